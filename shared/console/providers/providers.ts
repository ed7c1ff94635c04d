/**
 * What the console's tools read from outside the operations core. Each provider is optional: a
 * tool whose provider is not configured answers a typed `unavailable` (never a guess, never stale
 * data). Azure implementations live beside this file and load their SDKs on first use.
 */

/** One inventory record; only these (allow-listed) fields ever leave a provider. */
export interface InventoryRecord {
  name: string;
  type: string;
  location: string;
  resource_group: string;
  state: string;
  /** Names of related records (a release's database, a job's database). */
  relations: string[];
  /** Resource-group containers and topology-derived records are counted apart from resources. */
  kind: "resource" | "resource_group" | "derived";
  /** For `compute.vm-shutdown-schedule` records: the schedule as the provider stores it. */
  schedule?: { enabled: boolean; time: string; time_zone: string };
}

/** One inventory snapshot: the exact scope, provenance and freshness travel with the records. */
export interface InventorySnapshot {
  snapshot_id: string;
  observed_at: string;
  scope: string;
  provenance: string;
  records: InventoryRecord[];
  truncated: boolean;
  coverage_gaps: string[];
}

export interface InventoryProvider {
  /** A snapshot no older than `maxAgeMs` (the refresh barrier), or throws when none can be had. */
  snapshot(options: { maxAgeMs: number; abortSignal?: AbortSignal }): Promise<InventorySnapshot>;
}

export interface SubscriptionProvider {
  /** The server-configured subscription (the id is masked by the tool, never by the caller). */
  scope(): Promise<{ subscription_id: string; display_name: string; state: string; observed_at: string }>;
  health(): Promise<{ findings: { source: string; status: string; summary: string }[]; coverage_gaps: string[]; truncated: boolean; observed_at: string }>;
}

/** A single-workspace log query (Log Analytics). */
export interface LogProvider {
  readonly workspace: string;
  query(kql: string, window: { start: Date; end: Date }): Promise<{ tables: { name: string; columns: string[]; rows: unknown[][] }[] }>;
}

export interface MetricProvider {
  query(request: { namespace: string; metric: string; window: { start: Date; end: Date }; aggregation: string }): Promise<{ points: { at: string; value: number | null }[]; unit: string }>;
}

/** A server-owned snapshot read as stored (detection readiness, T2 recovery, configuration baseline). */
export interface SnapshotProvider<T> {
  latest(): Promise<T | undefined>;
  /** A snapshot observed longer ago than this is stale evidence: the tool answers `unavailable` instead (query rule 3). */
  maxAgeMs?: number;
}

export interface BrowserEvidenceProvider {
  capture(request: { policy_id: string; policy_version: number; source_url: string; stable_selectors: string[] }): Promise<{ artifact_id: string; sha256: string; captured_at: string }>;
}

export interface ConsoleProviders {
  inventory?: InventoryProvider;
  subscription?: SubscriptionProvider;
  logs?: LogProvider;
  metrics?: MetricProvider;
  detectionReadiness?: SnapshotProvider<Record<string, unknown>>;
  t2Recovery?: SnapshotProvider<Record<string, unknown>>;
  configurationBaseline?: SnapshotProvider<Record<string, unknown>>;
  browserEvidence?: BrowserEvidenceProvider;
}
