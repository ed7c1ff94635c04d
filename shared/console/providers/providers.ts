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
  health(): Promise<SubscriptionHealth>;
}

/** Who caused a health finding, from Resource Health's own attribution; `unknown` when it says nothing. */
export type HealthCause = "platform" | "customer" | "unknown";

/** One source `query_subscription_health` reads, with its own freshness; a failed or unconfigured one is a coverage gap. */
export interface HealthSource {
  source: "resource_graph" | "resource_health" | "metrics";
  status: "ok" | "failed" | "not_configured";
  /** When the source answered (absent when it did not). */
  observed_at?: string;
  /** How many resources (or resource × metric pairs) it checked. */
  checked: number;
  truncated: boolean;
}

/** The subscription's health (C-093, C-094): findings, cause classification, coverage gaps, freshness, truncation. */
export interface SubscriptionHealth {
  findings: {
    source: string;
    status: string;
    summary: string;
    resource?: string;
    resource_type?: string;
    resource_group?: string;
    cause?: HealthCause;
  }[];
  /** How many findings there were before the cut to the returned ones. */
  findings_total?: number;
  cause_classification?: Record<HealthCause, number>;
  sources?: HealthSource[];
  coverage_gaps: string[];
  truncated: boolean;
  /** The oldest observation among the sources that answered. */
  observed_at: string;
}

/** One resource's current availability status as Resource Health reports it (ids never leave the provider). */
export interface ResourceHealthStatus {
  name: string;
  type: string;
  resource_group: string;
  state: string;
  summary: string;
  reason_type: string;
  cause: HealthCause;
  since?: string;
}

/** One entry of a resource's health history: an availability-state transition or an annotation (impacting event). */
export interface ResourceHealthEntry {
  at: string;
  kind: "availability_state" | "annotation";
  state?: string;
  title: string;
  summary: string;
  reason_type: string;
  category: string;
  initiator: "customer_initiated" | "status_only" | "platform_initiated";
}

export interface ResourceHealthProvider {
  /** Every resource in the configured scope with its current availability status. */
  current(): Promise<{
    statuses: ResourceHealthStatus[];
    truncated: boolean;
    observed_at: string /** Statuses whose id names no resource of the form this provider reads (reported as a gap). */;
    unreadable?: number;
  }>;
  /**
   * The history entries of one resource of the configured scope (`name` or `<resource group>/<name>`)
   * inside the window; throws `not_found` when the scope has no such resource.
   */
  history(
    resource: string,
    window: { start: Date; end: Date },
  ): Promise<{
    resource: { name: string; type: string; resource_group: string };
    entries: ResourceHealthEntry[];
    truncated: boolean;
    observed_at: string;
  }>;
}

/** A single-workspace log query (Log Analytics). */
export interface LogProvider {
  readonly workspace: string;
  query(
    kql: string,
    window: { start: Date; end: Date },
  ): Promise<{ tables: { name: string; columns: string[]; rows: unknown[][] }[] }>;
}

export interface MetricProvider {
  query(request: {
    namespace: string;
    metric: string;
    window: { start: Date; end: Date };
    aggregation: string;
  }): Promise<{ points: { at: string; value: number | null }[]; unit: string }>;
}

/** A server-owned snapshot read as stored (detection readiness, T2 recovery, configuration baseline). */
export interface SnapshotProvider<T> {
  latest(): Promise<T | undefined>;
  /** A snapshot observed longer ago than this is stale evidence: the tool answers `unavailable` instead (query rule 3). */
  maxAgeMs?: number;
}

/** An immutable, content-addressed browser artifact: its id and digest, never a page or a handle to one. */
export interface BrowserEvidenceArtifact {
  artifact_id: string;
  sha256: string;
  size: number;
  captured_at: string;
  policy_id: string;
  policy_version: number;
  /** True when the policy's byte or time bound cut the page short. */
  truncated: boolean;
}

export interface BrowserEvidenceProvider {
  capture(request: {
    policy_id: string;
    policy_version: number;
    source_url: string;
    stable_selectors: string[];
  }): Promise<BrowserEvidenceArtifact>;
}

/** One deployment in a history: a Git commit or tag, or a cloud (ARM) deployment. */
export interface DeploymentRecord {
  /** When it happened (commit or tag time; the ARM deployment's timestamp), ISO 8601 UTC. */
  at: string;
  source: "git" | "cloud" | "control_plane";
  /** `git.commit`, `git.tag` or `arm.deployment`. */
  kind: string;
  /** The tag or deployment name, or the commit's abbreviated hash. */
  name: string;
  /** A few allow-listed facts (commit subject and author; provisioning state, duration, correlation id). */
  detail: Record<string, string>;
}

/** A deployment history over a time window (newest first, at most `limit` records). */
export interface DeploymentHistoryProvider {
  list(window: { start: Date; end: Date }, limit: number): Promise<{ records: DeploymentRecord[]; truncated: boolean }>;
}

export interface ConsoleProviders {
  /** `query_deployments`' Git history: the server-configured repository. */
  gitDeployments?: DeploymentHistoryProvider;
  /** `query_deployments`' cloud history: ARM deployments of the server-configured resource group. */
  cloudDeployments?: DeploymentHistoryProvider;
  inventory?: InventoryProvider;
  subscription?: SubscriptionProvider;
  logs?: LogProvider;
  metrics?: MetricProvider;
  detectionReadiness?: SnapshotProvider<Record<string, unknown>>;
  t2Recovery?: SnapshotProvider<Record<string, unknown>>;
  configurationBaseline?: SnapshotProvider<Record<string, unknown>>;
  browserEvidence?: BrowserEvidenceProvider;
  /** Resource Health of the configured scope: `query_inventory kind=resource_health_history`. */
  resourceHealth?: ResourceHealthProvider;
}
