/** Job-API job states (spec §3). */
export const JOB_STATUSES = [
  "queued",
  "dispatching",
  "submitting",
  "running",
  "completed",
  "failed",
  "cancelled",
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const ACTIVE_STATUSES: ReadonlySet<JobStatus> = new Set(["dispatching", "submitting", "running"]);
export const TERMINAL_STATUSES: ReadonlySet<JobStatus> = new Set(["completed", "failed", "cancelled"]);

export type ExecutionProfile = "standard" | "sharded";
export type SubmissionSource = "external_api" | "facade" | "dashboard";
export type ShardState = "pending" | "running" | "succeeded" | "failed";

/** One unit of execution: a query batch against the whole database or one partition. */
export interface Shard {
  id: string;
  batch: number;
  /** Partition index, or -1 for the whole database. */
  partition: number;
  state: ShardState;
  attempts: number;
  output_bytes: number;
}

/** A job as stored; the wire shapes of §2.3–2.5 are projections of it. */
export interface JobRecord {
  job_id: string;
  status: JobStatus;
  program: string;
  db_name: string;
  db_version: string;
  db_location: string;
  blast_version: string;
  blast_options: Record<string, unknown>;
  priority: number;
  execution_profile: ExecutionProfile;
  resource_profile: string;
  submission_source: SubmissionSource;
  external_correlation_id: string;
  idempotency_key: string;
  fingerprint: string;
  query_count: number;
  query_letters: number;
  created_at: string;
  updated_at: string;
  last_progress_at: string;
  started_at: string;
  completed_at: string;
  error: string;
  shards: Shard[];
  merged_bytes: number;
  /** Size of the merged XML before compression (the facade's `merged-xml` file). */
  merged_xml_bytes: number;
  cancel_requested: boolean;
  /** While BLAST has finished and the results are merged and stored (running, not yet completed). */
  storing?: StoringProgress | null;
  /**
   * The dispatch fleet of the job API that accepted it (`JOBAPI_DISPATCH_FLEET`): only that fleet's
   * lease holder runs it, even when other job APIs share the storage account. The default fleet's
   * records (and every record stored before fleets existed) have none: {@link DEFAULT_FLEET}.
   */
  fleet?: string;
}

/** The fleet of a job API that names none, and of jobs stored before fleets existed. */
export const DEFAULT_FLEET = "default";

/** A fleet name: a DNS label (it is part of the lease row's key). */
export const FLEET_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The fleet a job belongs to. */
export function fleetOf(job: Pick<JobRecord, "fleet">): string {
  return job.fleet ?? DEFAULT_FLEET;
}

/**
 * The storing phase of a running job (issue 23): BLAST has finished on every shard, and the merged
 * BLAST XML is being written to storage. `xml_bytes_total` is the merged XML's size when known in
 * advance: exact for a job of one shard, an upper bound (`total_is_estimate`) for a merge of
 * several shard outputs (the merge keeps each query's best hits across partitions), null when the
 * shard outputs are only stored compressed.
 */
export interface StoringProgress {
  xml_bytes: number;
  xml_bytes_total: number | null;
  total_is_estimate: boolean;
  started_at: string;
}

/** Short OpenAPI job ids: 12 characters of [a-z0-9]; never a UUID. */
/** What a submit decides about a new job; the rest of its record starts empty. */
export type NewJob = Pick<
  JobRecord,
  | "job_id"
  | "program"
  | "db_name"
  | "db_version"
  | "db_location"
  | "blast_version"
  | "blast_options"
  | "priority"
  | "execution_profile"
  | "resource_profile"
  | "submission_source"
  | "external_correlation_id"
  | "idempotency_key"
  | "fingerprint"
  | "query_count"
  | "query_letters"
> &
  Partial<Pick<JobRecord, "fleet">>;

/** A queued job as it is first stored: no progress, no shards, no results yet. */
export function newJobRecord(job: NewJob, now = new Date()): JobRecord {
  const at = now.toISOString();
  return {
    ...job,
    status: "queued",
    created_at: at,
    updated_at: at,
    last_progress_at: at,
    started_at: "",
    completed_at: "",
    error: "",
    shards: [],
    merged_bytes: 0,
    merged_xml_bytes: 0,
    cancel_requested: false,
  };
}

export const JOB_ID_PATTERN = /^[a-z0-9]{12}$/;
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

export function newJobId(): string {
  // Web Crypto (global in Node and browsers), so this module also bundles into the web app.
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  let id = "";
  // 256 % 36 bias is negligible for an identifier that only has to be unique, not secret.
  for (const b of bytes) id += ALPHABET[b % ALPHABET.length];
  return id;
}

/** Named priorities; integers 0–100 are accepted as they are. */
export const PRIORITY_NAMES = { low: 25, normal: 50, high: 75, urgent: 100 } as const;
export type PriorityName = keyof typeof PRIORITY_NAMES;

/** The facade's status vocabulary: `success` for completed, `running` for any active state. */
export function facadeStatus(status: JobStatus): "queued" | "running" | "success" | "failed" | "cancelled" {
  switch (status) {
    case "queued":
      return "queued";
    case "completed":
      return "success";
    case "failed":
      return "failed";
    case "cancelled":
      return "cancelled";
    default:
      return "running";
  }
}

/** `kubernetes.summary`-style counters over a job's shards. */
export function shardCounters(shards: readonly Shard[]): {
  total: number;
  succeeded: number;
  failed: number;
  active: number;
} {
  let succeeded = 0;
  let failed = 0;
  let active = 0;
  for (const shard of shards) {
    if (shard.state === "succeeded") succeeded++;
    else if (shard.state === "failed") failed++;
    else if (shard.state === "running") active++;
  }
  return { total: shards.length, succeeded, failed, active };
}

export function shardId(batch: number, partition: number): string {
  return partition < 0 ? `b${batch}` : `b${batch}-p${partition}`;
}
