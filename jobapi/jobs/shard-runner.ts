import { createReadStream } from "node:fs";
import path from "node:path";
import { userFacingBlastError } from "../../shared/blast/blast-diagnostics.js";
import type { DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { ShardFailedError } from "../../shared/errors.js";
import type { JobRecord, Shard } from "../../shared/jobs/model.js";
import { createParallelGzip } from "../../shared/storage/parallel-gzip.js";
import { buildShardArgs, type createSemaphore, type ShardExecutor } from "../executors/executor.js";
import { shardArtifact } from "./artifact-store.js";
import { GZIP_LEVEL, JobFailure, type RunContext, type ShardRun, setShard } from "./dispatch-context.js";
import { shardMemoryNeed } from "./shard-plan.js";
import { decodeWorkerTimings, shardTimeline, TIMINGS_METADATA_KEY } from "./shard-timings.js";

// Running shards: each through the executor, retried up to the allowed attempts, its output stored.

/**
 * Runs one shard, whose current attempt is already recorded, retrying up to `shardAttempts`;
 * resolves when BLAST has written its output, with `stored`: the output being gzipped into Blob
 * storage and the shard marked succeeded.
 */
export async function runShard(
  ctx: RunContext,
  job: JobRecord,
  db: DatabaseEntry,
  shard: Shard,
  optionArgs: string[],
  threads: number,
  room: ReturnType<typeof createSemaphore>,
  options: { store: boolean },
  signal: AbortSignal,
): Promise<ShardRun> {
  const dir = path.join(ctx.scratchDir, job.job_id);
  const xml = path.join(dir, "out", `${shard.id}.xml`);
  const partition = shard.partition < 0 ? undefined : db.manifest.partitions.find((p) => p.index === shard.partition);
  const dbPath = partition ? partition.path : db.manifest.path;
  const args = buildShardArgs({
    optionArgs,
    queryPath: path.join(dir, `b${shard.batch}.fa`),
    dbPath,
    outputPath: xml,
    threads,
  });
  let lastError = "";
  let attempts = 0;
  for (let attempt = shard.attempts; attempt <= ctx.o.shardAttempts; attempt++) {
    attempts = attempt;
    if (attempt > shard.attempts)
      await ctx.advance(job.job_id, signal, (j) => setShard(j, shard.id, { state: "running", attempts: attempt }));
    try {
      const release = await room.acquire(signal);
      let observed: Awaited<ReturnType<ShardExecutor["run"]>>;
      try {
        observed = await ctx.o.executor.run(
          {
            jobId: job.job_id,
            shardId: shard.id,
            program: job.program,
            args,
            outputPath: xml,
            cwd: db.root,
            attempt,
            batch: shard.batch,
            queryPath: path.join(dir, `b${shard.batch}.fa`),
            database: { name: db.manifest.name, version: db.manifest.version },
            memoryBytes: shardMemoryNeed(db, shard.partition >= 0),
            sharded: shard.partition >= 0,
            threads,
          },
          signal,
        );
      } finally {
        release();
      }
      // Unless the caller publishes the output itself (a job of one shard).
      const stored = !options.store
        ? Promise.resolve()
        : ctx.o.executor.storesOutputs
          ? recordStored(ctx, job.job_id, shard.id, observed, signal)
          : storeShard(ctx, job.job_id, shard.id, xml, signal);
      // Awaited by the caller; this only keeps an early failure from being reported as unhandled.
      stored.catch(() => {});
      return { stored };
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      const raw = error instanceof Error ? error.message : String(error);
      const refusal = ctx.failures.roleRefusal(error);
      // The raw diagnostics (toolkit paths, line numbers) to the log; a readable message to the job.
      ctx.o.logger.warn("shard attempt failed", { job_id: job.job_id, shard: shard.id, attempt, error: raw });
      lastError = refusal?.message ?? userFacingBlastError(raw);
      // Out of memory, no node large enough, no image, a missing role: another attempt would fail the same way.
      if ((error instanceof ShardFailedError && !error.retryable) || refusal) break;
    }
  }
  await ctx.advance(job.job_id, signal, (j) => setShard(j, shard.id, { state: "failed" }));
  if (attempts === 0) {
    // Its last allowed attempt failed under a process that stopped before failing the job (or the
    // allowed number was lowered since): nothing ran here, and the reason was not recorded.
    throw new JobFailure(
      `shard ${shard.id} has no attempt left: attempt ${shard.attempts} of ${ctx.o.shardAttempts} allowed (JOBAPI_SHARD_ATTEMPTS) would be next; the job API that ran the earlier attempts logged why they failed`,
    );
  }
  throw new JobFailure(`shard ${shard.id} failed after ${attempts} attempt(s): ${lastError}`);
}

/** The shard stored its own output (a cluster shard worker): record it as succeeded with its size. */
async function recordStored(
  ctx: RunContext,
  jobId: string,
  shardId: string,
  observed: Awaited<ReturnType<ShardExecutor["run"]>>,
  signal: AbortSignal,
): Promise<void> {
  const stored = await ctx.o.artifacts.properties(jobId, shardArtifact(shardId));
  if (stored === undefined) throw new JobFailure(`shard ${shardId} finished without storing its output`);
  await ctx.advance(jobId, signal, (j) => setShard(j, shardId, { state: "succeeded", output_bytes: stored.bytes }));
  // Where the shard's time went, from its Job's creation to this record (its worker's part rides on the output's metadata).
  if (observed)
    ctx.o.logger.info("shard timings", {
      job_id: jobId,
      shard: shardId,
      ...shardTimeline(observed, decodeWorkerTimings(stored.metadata[TIMINGS_METADATA_KEY]), Date.now()),
    });
}

async function storeShard(
  ctx: RunContext,
  jobId: string,
  shardId: string,
  xml: string,
  signal: AbortSignal,
): Promise<void> {
  ctx.ensureDispatching(signal);
  let bytes: number;
  try {
    bytes = await ctx.o.artifacts.uploadStream(jobId, shardArtifact(shardId), createReadStream(xml), {
      through: createParallelGzip({ level: GZIP_LEVEL }),
      signal,
    });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw ctx.failures.storageFailure(jobId, `the output of shard ${shardId}`, error);
  }
  await ctx.advance(jobId, signal, (j) => setShard(j, shardId, { state: "succeeded", output_bytes: bytes }));
}
