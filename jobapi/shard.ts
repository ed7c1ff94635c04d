import { createReadStream } from "node:fs";
import { describeCloudAuthorizationError } from "../shared/auth/cloud-authorization.js";
import { runBlastTool } from "../shared/blast/blast-tools.js";
import { BLAST_PROGRAMS, type BlastProgram } from "../shared/blast/programs.js";
import { parseEnv } from "../shared/config/env.js";
import { fillReleaseCache } from "../shared/databases/node-cache.js";
import { openDatabaseStorage } from "../shared/databases/table-catalog.js";
import { createLogger } from "../shared/logging/logger.js";
import { createParallelGzip } from "../shared/storage/parallel-gzip.js";
import { SHARD_STORAGE_SETTINGS, storageConnectionFromSettings } from "../shared/storage/storage-connection.js";
import { isStatus } from "../shared/storage/table-text.js";
import { releaseFolder } from "./executors/kubernetes-manifests.js";
import { ArtifactStore } from "./jobs/artifact-store.js";
import { encodeWorkerTimings, TIMINGS_METADATA_KEY } from "./jobs/shard-timings.js";
import { shardSettingsSchema } from "./pod-settings.js";

/** As the dispatcher stores shard outputs: fast gzip, parallel 1 MiB members. */
const GZIP_LEVEL = 1;

/** The partition a shard searches (`b<n>-p<i>` → i), or 0 for the whole database (`b<n>`). */
function partitionOf(shardId: string): number {
  const match = /-p(\d+)$/.exec(shardId);
  return match ? Number(match[1]) : 0;
}

/**
 * A shard's pod: `node dist/jobapi/shard.js <program> <BLAST argv…>`. Its init step fills the
 * node-local cache with its partition of the published release (verified against the release
 * manifest; one download per node however many pods start together). It then reads its query batch from
 * Blob storage, runs BLAST+ on its database partition in the node-local cache with the argv the
 * job API built (never a shell, never request text), and uploads the output gzipped, streamed,
 * MD5-checked block by block and as a whole, only if it is not published yet: a pod that
 * Kubernetes retries, or one adopted after a job API restart, never replaces a published output.
 * Exit 0 when the output is published (by this pod or an earlier one), 1 with the reason on
 * stderr otherwise; SIGTERM stops BLAST.
 */
async function main(): Promise<void> {
  // Epoch ms; the process's start is Node's time origin (see shard-timings.ts).
  const now = () => performance.timeOrigin + performance.now();
  const started = performance.timeOrigin;
  const imported = now();
  const e = parseEnv(shardSettingsSchema, process.env, (values) => ({
    ...values,
    storage: storageConnectionFromSettings(values, SHARD_STORAGE_SETTINGS),
  }));
  const logger = createLogger({
    level: e.LOG_LEVEL,
    base: { service: "shard", job_id: e.SHARD_JOB_ID, shard: e.SHARD_ID },
  });
  const [program, ...args] = process.argv.slice(2);
  if (!program || !(BLAST_PROGRAMS as readonly string[]).includes(program))
    throw new Error(`not a BLAST program: ${String(program)}`);
  const stop = new AbortController();
  process.once("SIGTERM", () => stop.abort(new Error("pod terminating")));
  const artifacts = ArtifactStore.fromConnectionString(e.storage);
  const output = `shards/${e.SHARD_ID}.out.gz`;
  if ((await artifacts.size(e.SHARD_JOB_ID, output)) !== undefined) {
    logger.info("shard output already published; nothing to do");
    return;
  }
  const cwd = releaseFolder(e.SHARD_DB_CACHE_ROOT, e.SHARD_DB_NAME, e.SHARD_DB_RELEASE);
  const filled = await fillReleaseCache({
    store: openDatabaseStorage(e.storage).store,
    cacheRoot: e.SHARD_DB_CACHE_ROOT,
    database: e.SHARD_DB_NAME,
    release: e.SHARD_DB_RELEASE,
    partition: partitionOf(e.SHARD_ID),
    signal: stop.signal,
  });
  logger.info("database cache ready", {
    downloaded: filled.downloaded.length,
    verified: filled.verified,
    stamped: filled.stamped,
    waited: filled.waited,
    took_over: filled.tookOver,
  });
  const cacheReady = now();
  await artifacts.downloadToFile(e.SHARD_JOB_ID, `batches/b${e.SHARD_BATCH}.fa`, e.SHARD_QUERY_FILE);
  const blastStarted = now();
  logger.info("running BLAST", { program });
  await runBlastTool(program as BlastProgram, args, { cwd, signal: stop.signal });
  const blastEnded = now();
  const blastMs = Math.round(blastEnded - blastStarted);
  const timings = {
    started,
    imported,
    cache_ready: cacheReady,
    blast_started: blastStarted,
    blast_ended: blastEnded,
    upload_started: now(),
  };
  try {
    const bytes = await artifacts.uploadStream(e.SHARD_JOB_ID, output, createReadStream(e.SHARD_OUTPUT_FILE), {
      through: createParallelGzip({ level: GZIP_LEVEL }),
      signal: stop.signal,
      ifNew: true,
      checksum: true,
      // The job API reads them with the output's size: where this shard's time went (shard-timings.ts).
      metadata: { [TIMINGS_METADATA_KEY]: encodeWorkerTimings(timings) },
    });
    const uploaded = now();
    logger.info("shard output published", {
      bytes,
      blast_ms: blastMs,
      import_ms: Math.round(imported - started),
      cache_ms: Math.round(cacheReady - imported),
      query_ms: Math.round(blastStarted - cacheReady),
      upload_ms: Math.round(uploaded - timings.upload_started),
    });
  } catch (error) {
    // Another pod of this shard published first: its output stands.
    if (isStatus(error, 409) || isStatus(error, 412)) {
      logger.info("shard output was published by another pod; keeping it");
      return;
    }
    throw error;
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    // A missing role names itself (it reaches the job's error through the pod's log tail).
    const message =
      describeCloudAuthorizationError(error)?.message ?? (error instanceof Error ? error.message : String(error));
    process.stderr.write(`shard failed: ${message}\n`);
    process.exit(1);
  },
);
