import type { ObservedTimings } from "../jobs/shard-timings.js";

/** One shard as an executor runs it: fixed argv, files it reads and writes. */
export interface ShardSpec {
  jobId: string;
  shardId: string;
  program: string;
  /** Full argv after the program name; built by {@link buildShardArgs}, never from raw request text. */
  args: string[];
  /** Where the executor leaves the XML output. */
  outputPath: string;
  /** Working folder: the database release, so `-db` is relative and no host path lands in results. */
  cwd: string;
  /** This run's attempt (1, 2…): cluster Job names are deterministic per shard and attempt. */
  attempt?: number;
  /** Query batch index and the query file of this shard (the `-query` of `args`). */
  batch?: number;
  queryPath?: string;
  /** The database release searched (labels, and the node-local cache path of the cluster's shard worker). */
  database?: { name: string; version: string };
  /** Memory the pre-flight reserves for the database (partition) this shard searches. */
  memoryBytes?: number;
  /** The shard searches one partition of a job run with the sharded execution profile. */
  sharded?: boolean;
  /** `-num_threads` of this shard (its CPU request on a cluster). */
  threads?: number;
}

/**
 * Runs shards. The local executor runs BLAST+ processes on this machine; a Kubernetes executor
 * runs the same command as cluster Jobs. `run` resolves when the shard's output is complete.
 */
export interface ShardExecutor {
  readonly name: string;
  /** Every shard runs on this one machine, so shards running at once share its memory. */
  readonly oneNode: boolean;
  /**
   * The shard's own process stores its output as the artifact `shards/<id>.out.gz` (the cluster's
   * shard worker); the dispatcher then neither stores nor reads `outputPath`.
   */
  readonly storesOutputs?: boolean;
  /**
   * Resolves when the shard's output is complete. Aborting `signal` stops waiting; whether the
   * shard itself stops is the executor's (locally it does; cluster Jobs keep running to be adopted
   * by the next process, and {@link cancelJob} removes them). Failures may be a ShardFailedError.
   * A cluster executor resolves with what it saw of the shard's Job and when (its timings).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: an executor that observes nothing (the local one, test stand-ins) returns nothing
  run(spec: ShardSpec, signal: AbortSignal): Promise<ObservedTimings | undefined | void>;
  /** Removes whatever still runs for a cancelled job (its cluster Jobs and their pods). */
  cancelJob?(jobId: string): Promise<void>;
}

/**
 * `-num_threads` for each of a job's `shards` when the executor runs up to `slots` BLAST processes
 * at once (one per core locally): "auto" gives the job about two threads per core while its shards
 * run side by side, and every core to a job of one shard. Partitions never take exactly equal time;
 * with two threads per core, the shard still running after the others have finished keeps every core
 * busy instead of one (static partitions otherwise leave cores idle while the last one finishes).
 * A number is taken as it is.
 */
export function shardThreads(setting: number | "auto", slots: number, shards: number): number {
  if (setting !== "auto") return setting;
  const cores = Math.max(1, slots);
  const side = Math.max(1, Math.min(shards, cores));
  return Math.min(cores, Math.ceil((2 * cores) / side));
}

/** The BLAST command line of one shard. Results are always XML (`-outfmt 5`) so they merge exactly. */
export function buildShardArgs(input: {
  optionArgs: readonly string[];
  queryPath: string;
  dbPath: string;
  outputPath: string;
  threads: number;
}): string[] {
  return [
    ...input.optionArgs,
    "-query",
    input.queryPath,
    "-db",
    input.dbPath,
    "-outfmt",
    "5",
    "-out",
    input.outputPath,
    "-num_threads",
    String(input.threads),
  ];
}

/** A counting semaphore: at most `limit` holders at once, FIFO. */
export function createSemaphore(limit: number) {
  let held = 0;
  const waiting: (() => void)[] = [];
  return {
    async acquire(signal?: AbortSignal): Promise<() => void> {
      if (held >= limit) {
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => {
            const i = waiting.indexOf(go);
            if (i >= 0) waiting.splice(i, 1);
            reject(signal?.reason ?? new Error("aborted"));
          };
          const go = () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          };
          waiting.push(go);
          signal?.addEventListener("abort", onAbort, { once: true });
        });
      }
      held++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held--;
        waiting.shift()?.();
      };
    },
    get active() {
      return held;
    },
  };
}
