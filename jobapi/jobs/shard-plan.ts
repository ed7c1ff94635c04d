import type { DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { type JobRecord, type Shard, shardId } from "../../shared/jobs/model.js";

// Shard planning: whether a job fits a node (the memory pre-flight) and which shards it runs.

const GIB = 1024 ** 3;

/** The spec's three remedies (§7) for a database that does not fit a node's memory. */
export const PREFLIGHT_REMEDIES =
  "Remedies: submit from the dashboard with the sharded execution profile, recreate the cluster with a larger machine type, or choose a smaller database.";

/**
 * The remedies for a job that ran out of memory: the spec's three (§7), less the sharded execution
 * profile when the job already ran with it (resubmitting it the same way would fail the same way).
 */
export function memoryRemedies(sharded: boolean): string {
  return sharded
    ? "Remedies: recreate the cluster with a larger machine type, prepare the database again with more partitions (DATABASE_PARTITIONS), or choose a smaller database."
    : PREFLIGHT_REMEDIES;
}

/** The spec's memory pre-flight failure (§7), with its remedies ({@link memoryRemedies}). */
export function preflightMessage(dbName: string, neededBytes: number, availableBytes: number, sharded = false): string {
  const size = (n: number) => (n >= GIB ? `${(n / GIB).toFixed(1)} GiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`);
  return (
    `memory pre-flight failed: database memory requirements of ${dbName} (${size(neededBytes)} to cache) exceed the machine type's memory ` +
    `(${size(Math.max(0, availableBytes))} usable). ${memoryRemedies(sharded)}`
  );
}

/** Bytes one shard needs in memory: the whole database, or the largest partition it searches. */
export function shardMemoryNeed(db: DatabaseEntry, sharded: boolean): number {
  const m = db.manifest;
  if (!sharded || m.partitions.length === 0) return m.bytes_to_cache;
  const largest = Math.max(...m.partitions.map((p) => p.letters));
  return Math.ceil(m.bytes_to_cache * (largest / Math.max(1, m.letters)));
}

/**
 * The job's shards: the ones it has (a resumed job: finished shards kept, the rest pending again),
 * or one per query batch and database partition (`-1`: the whole database).
 */
export function planShards(job: JobRecord, batches: number[], partitions: number[]): Shard[] {
  if (job.shards.length > 0)
    return job.shards.map((s) => (s.state === "succeeded" || s.state === "failed" ? s : { ...s, state: "pending" }));
  return batches.flatMap((batch) =>
    partitions.map((p) => ({
      id: shardId(batch, p),
      batch,
      partition: p,
      state: "pending" as const,
      attempts: 0,
      output_bytes: 0,
    })),
  );
}
