import type { CloudAuthorizationFailure } from "../../shared/auth/cloud-authorization.js";
import { describeCloudAuthorizationError } from "../../shared/auth/cloud-authorization.js";
import type { DatabaseCatalog } from "../../shared/databases/database-catalog.js";
import type { JobRecord, Shard } from "../../shared/jobs/model.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { ShardExecutor } from "../executors/executor.js";
import type { ArtifactStore } from "./artifact-store.js";
import type { DispatchLease } from "./dispatch-lease.js";
import type { JobStore } from "./job-store.js";

// What the dispatcher's parts share: its options, the run context its shard runner and publisher
// work through, the failures a job ends with, and the small record helpers.

export interface DispatcherOptions {
  jobs: JobStore;
  artifacts: ArtifactStore;
  catalog: DatabaseCatalog;
  executor: ShardExecutor;
  logger: Logger;
  /** Scratch space for query batches and shard outputs; each dispatcher works in a folder of its own inside. */
  workDir: string;
  /**
   * The dispatch lease this process must hold to run jobs (see {@link DispatchLease}); without one,
   * the dispatcher runs jobs from `start()` on (a single process, or tests).
   */
  lease?: Pick<DispatchLease, "start" | "stop" | "isHeld">;
  /**
   * This job API's dispatch fleet (`JOBAPI_DISPATCH_FLEET`, default `default`): it runs
   * only the jobs a job API of its fleet accepted, and its lease is its fleet's (docs/decisions/0026-dispatch-fleets.md).
   */
  fleet?: string;
  /** Jobs dispatched at once; more wait as `queued`. */
  maxActiveJobs: number;
  /** Memory of the node a shard runs on, for the pre-flight. */
  nodeMemoryBytes: number;
  /** Kept free on the node (ElasticBLAST: RAM − 2 GB ≥ bytes-to-cache). */
  memoryMarginBytes: number;
  /** `-num_threads` per shard, or "auto" (see {@link shardThreads}). */
  threadsPerShard: number | "auto";
  /** BLAST processes the executor runs at once. */
  shardSlots: number;
  /** Attempts per shard before the job fails. */
  shardAttempts: number;
  pollIntervalMs?: number;
  /** How often the storing phase's progress is written to the job (default 2 s; 0 in tests: every chunk). */
  storingReportMs?: number;
  /** Hears of each Azure refusal for want of a role (the `role_assignment.missing` event); must not throw. */
  onRoleRefusal?: (failure: CloudAuthorizationFailure) => void;
}

/** Fast gzip: results are large text and are compressed once per job (level 6 costs ~4× the time). */
export const GZIP_LEVEL = 1;

/** A failure that ends the job with its message (anything else ends it with "internal error"). */
export class JobFailure extends Error {}

/** A dispatch write refused because this process no longer holds the dispatch lease. */
export class LeaseLostError extends Error {
  constructor() {
    super("this process no longer holds the dispatch lease");
  }
}

/** Turns storage, merge and authorization errors into the job's failure; the details go to the log only. */
export class JobFailures {
  constructor(private readonly o: Pick<DispatcherOptions, "logger" | "onRoleRefusal">) {}

  invalidOutput(jobId: string, error: unknown): JobFailure {
    this.o.logger.error("merge failed", { job_id: jobId, error });
    return new JobFailure(
      "merging the shard outputs failed: a shard's output is not valid BLAST XML, or the shards disagree",
    );
  }

  /** The role refusal `error` stands for, if it is one; each is also reported (`onRoleRefusal`). */
  roleRefusal(error: unknown): CloudAuthorizationFailure | undefined {
    const refusal = describeCloudAuthorizationError(error);
    if (refusal) this.o.onRoleRefusal?.(refusal);
    return refusal;
  }

  /** A storage write that failed; the details (which may name storage endpoints) go to the log only. */
  storageFailure(jobId: string, what: string, error: unknown): JobFailure {
    this.o.logger.error("storing a job artifact failed", { job_id: jobId, artifact: what, error });
    const refusal = this.roleRefusal(error);
    if (refusal) return new JobFailure(`storing ${what} failed: ${refusal.message}`);
    return new JobFailure(`storing ${what} failed; the job API log has the storage error (job ${jobId})`);
  }
}

/** What a job's run needs from the dispatcher that runs it. */
export interface RunContext {
  readonly o: DispatcherOptions;
  /** The dispatcher's scratch folder (a job works in `<scratchDir>/<job_id>`). */
  readonly scratchDir: string;
  readonly failures: JobFailures;
  /** Throws unless this process may still write the job's state (it holds the dispatch lease). */
  ensureDispatching(signal: AbortSignal): void;
  /** Applies a change unless the job was cancelled meanwhile; aborts the run if it was. */
  advance(jobId: string, signal: AbortSignal, change: (j: JobRecord) => JobRecord): Promise<JobRecord>;
}

export interface ShardRun {
  /** Settles when the shard's output is stored and the shard marked succeeded. */
  stored: Promise<void>;
}

export interface MergedResult {
  mergedBytes: number;
  xmlBytes: number;
}

export function now(): string {
  return new Date().toISOString();
}

export function touch(job: JobRecord): JobRecord {
  const t = now();
  return { ...job, updated_at: t, last_progress_at: t };
}

/** The attempt a shard about to run is on: its first, the one that was interrupted, or the one after a failure. */
export function nextAttempt(shard: Shard): number {
  return shard.state === "failed" || shard.attempts === 0 ? shard.attempts + 1 : shard.attempts;
}

export function setShard(job: JobRecord, id: string, change: Partial<Shard>): JobRecord {
  return touch({ ...job, shards: job.shards.map((s) => (s.id === id ? { ...s, ...change } : s)) });
}
