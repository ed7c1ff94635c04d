// Where a cluster shard's time goes, from its Job's creation to its output recorded (issue 24 item 3).
//
// Two clocks meet here: the job API sees the cluster through its watches (when it created the Job,
// when it first saw the pod bound to a node, its container running, the Job complete), and the
// shard worker knows its own process (when it started, finished importing, had its database cache
// ready, ran BLAST, began its upload). The worker hands its part over as metadata of the output blob
// it stores, so the job API reads it with the size it reads anyway: no request more per shard.
// Both are wall clocks in epoch milliseconds; on a cluster the nodes' clocks are NTP-synchronised
// (a few ms apart), so offsets across the two are good to that.

/** What the shard worker records of its own process, in epoch milliseconds. */
export interface WorkerTimings {
  /** The worker's process started (Node's time origin). */
  started: number;
  /** Its code was loaded (the import done, `main` entered). */
  imported: number;
  /** The database cache on its node held its partition, verified. */
  cache_ready: number;
  /** Its query batch was downloaded: BLAST starts. */
  blast_started: number;
  blast_ended: number;
  /** It began to gzip and upload its output (the upload's end is the container's end). */
  upload_started: number;
}

const WORKER_KEYS = ["started", "imported", "cache_ready", "blast_started", "blast_ended", "upload_started"] as const;

/** The blob metadata key the worker's timings travel under (metadata names are C# identifiers). */
export const TIMINGS_METADATA_KEY = "shardtimings";

/**
 * The worker's timings as one metadata value: `started=<epoch ms>;imported=<ms after started>;…`
 * (ASCII, short, no characters a header value could not carry).
 */
export function encodeWorkerTimings(t: WorkerTimings): string {
  return WORKER_KEYS.map((k) => `${k}=${Math.round(k === "started" ? t.started : t[k] - t.started)}`).join(";");
}

/** The timings of {@link encodeWorkerTimings}, or undefined for anything else (an older worker, a stranger's blob). */
export function decodeWorkerTimings(value: string | undefined): WorkerTimings | undefined {
  if (!value || value.length > 512) return undefined;
  const fields = new Map<string, number>();
  for (const part of value.split(";")) {
    const match = /^([a-z_]+)=(\d{1,15})$/.exec(part);
    if (!match) return undefined;
    fields.set(match[1] as string, Number(match[2]));
  }
  const started = fields.get("started");
  if (started === undefined) return undefined;
  const out: Partial<WorkerTimings> = { started };
  for (const k of WORKER_KEYS) {
    if (k === "started") continue;
    const offset = fields.get(k);
    if (offset === undefined) return undefined;
    out[k] = started + offset;
  }
  return out as WorkerTimings;
}

/** What the job API's executor saw of a shard's Job, in epoch milliseconds (each when known). */
export interface ObservedTimings {
  /** The create request was sent (undefined for an adopted Job). */
  created?: number;
  /** The shard's pod was first seen bound to a node. */
  scheduled?: number;
  /** Its container was first seen running. */
  running?: number;
  /** The Job was seen complete. */
  completed: number;
}

/**
 * A shard's timeline: milliseconds from its Job's creation (or, for an adopted Job, from its
 * worker's start) to each phase, in order, and the phases' durations. Logged by the job API as
 * `shard timings` (snake_case fields); a phase not known is left out.
 */
export function shardTimeline(
  observed: ObservedTimings,
  worker: WorkerTimings | undefined,
  recorded: number,
): Record<string, number> {
  const origin = observed.created ?? worker?.started ?? observed.completed;
  const at: [string, number | undefined][] = [
    ["scheduled_ms", observed.scheduled],
    ["container_running_ms", observed.running],
    ["worker_started_ms", worker?.started],
    ["worker_imported_ms", worker?.imported],
    ["cache_ready_ms", worker?.cache_ready],
    ["blast_started_ms", worker?.blast_started],
    ["blast_ended_ms", worker?.blast_ended],
    ["upload_started_ms", worker?.upload_started],
    ["completed_observed_ms", observed.completed],
    ["recorded_ms", recorded],
  ];
  const out: Record<string, number> = {};
  for (const [name, value] of at) if (value !== undefined) out[name] = Math.round(value - origin);
  if (worker) {
    out.import_ms = Math.round(worker.imported - worker.started);
    out.cache_ms = Math.round(worker.cache_ready - worker.imported);
    out.query_ms = Math.round(worker.blast_started - worker.cache_ready);
    out.blast_ms = Math.round(worker.blast_ended - worker.blast_started);
    // Gzip, upload and the process's exit, to the job API seeing the Job complete.
    out.upload_and_exit_ms = Math.round(observed.completed - worker.upload_started);
    if (observed.created !== undefined) out.pod_start_ms = Math.round(worker.started - observed.created);
  }
  out.record_ms = Math.round(recorded - observed.completed);
  if (observed.created !== undefined && worker)
    out.overhead_ms = Math.round(recorded - observed.created - (worker.blast_ended - worker.blast_started));
  return out;
}
