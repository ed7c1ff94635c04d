import { once } from "node:events";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import path from "node:path";
import { PassThrough, Transform } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { gzipSync } from "node:zlib";
import type { BlastOptions } from "../../shared/blast/options.js";
import {
  BlastXmlError,
  mergeBlastXml,
  namedDatabaseHeader,
  readBlastXml,
  readIterations,
} from "../../shared/blast/xml-merge.js";
import type { DatabaseEntry } from "../../shared/databases/database-catalog.js";
import type { JobRecord, Shard, StoringProgress } from "../../shared/jobs/model.js";
import { createParallelGzip } from "../../shared/storage/parallel-gzip.js";
import { ResultIndexBuilder } from "../../shared/blast/result-index.js";
import { MERGED_ARTIFACT, RESULT_INDEX_ARTIFACT, shardArtifact } from "./artifact-store.js";
import { GZIP_LEVEL, type MergedResult, now, type RunContext, touch } from "./dispatch-context.js";

// Merge and publish: the shards' outputs become the job's merged result in Blob storage, with
// its index (per query, the byte range of its iteration) beside it for the paged results routes.

/** How often the storing phase's progress is written to the job by default. */
const STORING_REPORT_MS = 2000;

/** Reports the storing phase (issue 23): merged XML bytes written so far, of how many. */
export interface StoringReporter {
  /** The merged XML's size when known in advance; `estimate` when it is an upper bound. */
  total(bytes: number | null, estimate: boolean): void;
  /** Bytes of merged XML written so far; written to the job at most every few seconds. */
  written(bytes: number): void;
  /** Waits for a write in flight (before the job completes, so none lands after). */
  settle(): Promise<void>;
}

/**
 * Writes the storing phase's progress to the running job, throttled: one write in flight at a
 * time, at most one per `storingReportMs`. Progress is a courtesy: a failed write is logged, never
 * the job's failure, and nothing is written to a job that is no longer running.
 */
export function storingReporter(ctx: RunContext, jobId: string, signal: AbortSignal): StoringReporter {
  const interval = ctx.o.storingReportMs ?? STORING_REPORT_MS;
  const progress: StoringProgress = {
    xml_bytes: 0,
    xml_bytes_total: null,
    total_is_estimate: false,
    started_at: now(),
  };
  let last = Number.NEGATIVE_INFINITY;
  let inFlight: Promise<void> | undefined;
  const write = () => {
    if (inFlight || signal.aborted || performance.now() - last < interval) return;
    try {
      ctx.ensureDispatching(signal);
    } catch {
      return;
    }
    last = performance.now();
    const snapshot = { ...progress };
    inFlight = ctx.o.jobs
      .update(jobId, (j) =>
        j.status === "running" && !j.cancel_requested ? touch({ ...j, storing: snapshot }) : undefined,
      )
      .then(
        () => undefined,
        (error: unknown) => ctx.o.logger.warn("the storing progress was not written", { job_id: jobId, error }),
      )
      .finally(() => {
        inFlight = undefined;
      });
  };
  return {
    total(bytes, estimate) {
      progress.xml_bytes_total = bytes;
      progress.total_is_estimate = estimate;
      write();
    },
    written(bytes) {
      progress.xml_bytes = bytes;
      write();
    },
    async settle() {
      await inFlight;
    },
  };
}

/** The member table of a stored gzip as it is written: [compressed offset, uncompressed offset]. */
function memberTable(): { members: [number, number][]; onMember: (c: number, u: number) => void } {
  const members: [number, number][] = [];
  let compressed = 0;
  let uncompressed = 0;
  return {
    members,
    onMember(c, u) {
      members.push([compressed, uncompressed]);
      compressed += c;
      uncompressed += u;
    },
  };
}

/**
 * Stores the result index, once the merged result's compression has ended (beside its upload). The
 * index only speeds up reading: a failure is logged and the job still completes (its result pages
 * then say the index is missing).
 */
async function publishIndex(
  ctx: RunContext,
  job: JobRecord,
  builder: ResultIndexBuilder,
  members: [number, number][],
  signal: AbortSignal,
): Promise<void> {
  try {
    const index = builder.finish(members, job.db_name);
    const body = gzipSync(Buffer.from(JSON.stringify(index)), { level: GZIP_LEVEL });
    await ctx.o.artifacts.putBytes(job.job_id, RESULT_INDEX_ARTIFACT, body, signal);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    ctx.o.logger.warn("the result index was not stored; result pages of this job read no index", {
      job_id: job.job_id,
      error,
    });
  }
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

/**
 * Merges every shard's output into `merged_results.out.gz`, streamed through a parallel gzip
 * straight into Blob storage; the blob appears only when it is complete.
 */
export async function mergeAndPublish(
  ctx: RunContext,
  job: JobRecord,
  db: DatabaseEntry,
  dir: string,
  signal: AbortSignal,
  storing?: StoringReporter,
): Promise<MergedResult> {
  ctx.ensureDispatching(signal);
  const shardFiles = [];
  for (const s of job.shards) {
    // The plain XML this process produced merges fastest; after a restart, fetch the stored copy.
    const xml = path.join(dir, "out", `${s.id}.xml`);
    const gz = path.join(dir, "out", `${s.id}.out.gz`);
    let local = xml;
    if (!(await exists(xml))) {
      if (!(await exists(gz))) await ctx.o.artifacts.downloadToFile(job.job_id, shardArtifact(s.id), gz);
      local = gz;
    }
    shardFiles.push({ batchIndex: s.batch, partitionIndex: Math.max(0, s.partition), path: local });
  }
  // The merged XML is at most the shard outputs' XML added up (the merge keeps each query's best
  // hits across partitions); unknown when an output is only at hand compressed.
  const plain = shardFiles.every((f) => f.path.endsWith(".xml"));
  const sizes = plain ? await Promise.all(shardFiles.map(async (f) => (await stat(f.path)).size)) : [];
  storing?.total(plain ? sizes.reduce((a, b) => a + b, 0) : null, true);
  let xmlBytes = 0;
  const indexer = new ResultIndexBuilder();
  const table = memberTable();
  const xml = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      xmlBytes += chunk.length;
      indexer.write(chunk);
      storing?.written(xmlBytes);
      callback(null, chunk);
    },
  });
  // Cancelling the job (or stopping the job API) ends the upload, and with it the merge.
  const gzip = createParallelGzip({ level: GZIP_LEVEL, onMember: table.onMember });
  const uploaded = ctx.o.artifacts.uploadStream(job.job_id, MERGED_ARTIFACT, xml, { through: gzip, signal });
  // The index is complete once the last member is compressed: stored beside the merged result's
  // upload, not after it (one round trip and one storage commit fewer on the job's path).
  const indexed = finished(gzip).then(
    () => publishIndex(ctx, job, indexer, table.members, signal),
    () => undefined,
  );
  indexed.catch(() => {});
  // A failed upload must end the merge at once (its writer stops on the destroyed stream).
  uploaded.catch((error: unknown) => xml.destroy(error as Error));
  const options = job.blast_options as BlastOptions;
  try {
    await mergeBlastXml({
      shards: shardFiles,
      // In XML output num_alignments caps hits per query as max_target_seqs does; BLAST's default is 500.
      maxTargetSeqs: Number(options.max_target_seqs ?? options.num_alignments ?? 500),
      database: job.db_name,
      totals: { sequences: db.manifest.sequences, letters: db.manifest.letters },
      output: xml,
    });
    xml.end();
  } catch (error) {
    xml.destroy(error as Error);
    if (signal.aborted) {
      await uploaded.catch(() => {});
      throw signal.reason;
    }
    const uploadError = await uploaded.then(
      () => undefined,
      (e: unknown) => e,
    );
    // The upload's failure is the cause when it ended the merge; else the merge itself failed.
    if (uploadError !== undefined && uploadError !== error)
      throw ctx.failures.storageFailure(job.job_id, "the merged result", uploadError);
    throw ctx.failures.invalidOutput(job.job_id, error);
  }
  let mergedBytes: number;
  try {
    mergedBytes = await uploaded;
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw ctx.failures.storageFailure(job.job_id, "the merged result", error);
  }
  // Only an abort fails the index's store; anything else was logged there.
  await indexed;
  return { mergedBytes, xmlBytes };
}

/**
 * Publishes a job of one shard: its merged document is BLAST's own output with the database
 * named instead of the path BLAST was given (what the merge writes for one shard, byte for byte),
 * so the body is gzipped once and stored twice, under BLAST's header as the shard output and under
 * the merged header as `merged_results.out.gz` (each header its own gzip member). The output is
 * still read through the BLAST XML reader meanwhile, so a truncated or malformed one fails the job
 * as the merge would. `steps` receives when (ms from the call) the output proved valid, the
 * compression ended and each store was acknowledged: the "job completed" log line shows them.
 */
export async function publishSingleShard(
  ctx: RunContext,
  job: JobRecord,
  shard: Shard,
  xml: string,
  signal: AbortSignal,
  storing?: StoringReporter,
  steps: Record<string, number> = {},
): Promise<MergedResult & { shardBytes: number }> {
  ctx.ensureDispatching(signal);
  const began = performance.now();
  const mark = (name: string) => {
    steps[name] = Math.round(performance.now() - began);
  };
  // The header only (the reader's first event); the whole output is validated in the one read below.
  const events = readIterations(xml);
  let header: string;
  try {
    const first = await events.next();
    if (first.done || first.value.type !== "header") throw new BlastXmlError("no BLAST XML header");
    header = first.value.header.raw;
  } catch (error) {
    throw ctx.failures.invalidOutput(job.job_id, error);
  } finally {
    await events.return(undefined);
  }
  // An output that turns out invalid stops the uploads too.
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  // One read of the output: the bytes that are indexed and compressed also go through the BLAST XML
  // reader (`checked`), so a truncated or malformed output fails the job as the merge would, without
  // reading and decoding the file a second time. At most `CHECK_AHEAD_BYTES` wait for the reader.
  const checked = new PassThrough({ highWaterMark: CHECK_AHEAD_BYTES });
  checked.write(Buffer.from(header, "latin1"));
  const validated = (async () => {
    for await (const _ of readBlastXml(checked)) stop.signal.throwIfAborted();
    mark("validated_ms");
  })();
  validated.catch((error: unknown) => stop.abort(error));
  const mergedHeader = namedDatabaseHeader(header, job.db_name);
  // One shard: the merged XML's size is known before a byte is stored.
  const { size: blastBytes } = await stat(xml);
  storing?.total(mergedHeader.length + blastBytes - header.length, false);
  let written = mergedHeader.length;
  const shardCopy = new PassThrough({ highWaterMark: 1024 * 1024 });
  const mergedCopy = new PassThrough({ highWaterMark: 1024 * 1024 });
  shardCopy.write(gzipSync(Buffer.from(header, "latin1"), { level: GZIP_LEVEL }));
  const mergedHead = Buffer.from(mergedHeader, "latin1");
  const mergedHeadGz = gzipSync(mergedHead, { level: GZIP_LEVEL });
  mergedCopy.write(mergedHeadGz);
  // The merged document's index: its header is the first member, then the body's members.
  const indexer = new ResultIndexBuilder();
  indexer.write(mergedHead);
  const table = memberTable();
  table.onMember(mergedHeadGz.length, mergedHead.length);
  // The body after the header, in BLAST's bytes (the header string holds one character per byte).
  const body = pipeline(
    createReadStream(xml, { start: header.length, highWaterMark: 1024 * 1024 }),
    new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        indexer.write(chunk);
        written += chunk.length;
        storing?.written(written);
        feed(checked, chunk).then(() => callback(null, chunk), callback);
      },
      flush(callback) {
        checked.end();
        callback();
      },
    }),
    createParallelGzip({ level: GZIP_LEVEL, onMember: table.onMember }),
    async (members) => {
      for await (const member of members as AsyncIterable<Buffer>)
        await writeEach([shardCopy, mergedCopy], member, stop.signal);
      // Neither blob is committed before the document proved valid (an upload commits at its end).
      mark("gzipped_ms");
      await validated;
      shardCopy.end();
      mergedCopy.end();
    },
  );
  body.catch((error: unknown) => {
    // The reader then stops with the body's error: the read failed, not the document.
    checked.destroy(error as Error);
    shardCopy.destroy(error as Error);
    mergedCopy.destroy(error as Error);
  });
  const uploads = [
    ctx.o.artifacts.uploadStream(job.job_id, shardArtifact(shard.id), shardCopy, { signal: stop.signal }),
    ctx.o.artifacts.uploadStream(job.job_id, MERGED_ARTIFACT, mergedCopy, { signal: stop.signal }),
  ];
  // When each store was acknowledged, for the "job completed" log line (where the time after BLAST goes).
  for (const [i, upload] of uploads.entries())
    upload.then(
      () => mark(i === 0 ? "shard_stored_ms" : "merged_stored_ms"),
      () => {},
    );
  // The index is complete once the body is compressed (its member table too): stored while the two
  // uploads are, not after them (one round trip and one storage commit fewer on the job's path).
  const indexed = body.then(
    () => publishIndex(ctx, job, indexer, table.members, signal).then(() => mark("index_stored_ms")),
    () => undefined,
  );
  const [read, compressed, index, ...stored] = await Promise.allSettled([validated, body, indexed, ...uploads]);
  signal.removeEventListener("abort", onAbort);
  if (signal.aborted) throw signal.reason;
  // The reader fails with the body's own error when reading the output failed (a storage failure).
  const readFailed =
    compressed.status === "rejected" && read.status === "rejected" && read.reason === compressed.reason;
  if (read.status === "rejected" && !readFailed) throw ctx.failures.invalidOutput(job.job_id, read.reason);
  const failed = [compressed, ...stored].find((o): o is PromiseRejectedResult => o.status === "rejected");
  if (failed) throw ctx.failures.storageFailure(job.job_id, "the merged result", failed.reason);
  // Only an abort fails the index's store (handled above); anything else was logged there.
  if (index.status === "rejected") throw index.reason;
  const [shardBytes, mergedBytes] = stored.map((o) => (o as PromiseFulfilledResult<number>).value) as [number, number];
  return { shardBytes, mergedBytes, xmlBytes: mergedHeader.length + blastBytes - header.length };
}

/** Bytes of a one-shard output read ahead of the BLAST XML reader that checks it. */
const CHECK_AHEAD_BYTES = 4 * 1024 * 1024;

/**
 * Hands `chunk` to the reader that checks the output, waiting while it is `CHECK_AHEAD_BYTES`
 * behind. A reader that has stopped (its failure stops the uploads) takes nothing more.
 */
async function feed(checked: PassThrough, chunk: Buffer): Promise<void> {
  if (checked.destroyed || checked.write(chunk)) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      checked.off("drain", done);
      checked.off("close", done);
      resolve();
    };
    checked.on("drain", done);
    checked.on("close", done);
  });
}

/** Writes `chunk` to each stream, waiting while one is full; fails once one has closed early. */
async function writeEach(streams: PassThrough[], chunk: Buffer, signal: AbortSignal): Promise<void> {
  for (const stream of streams) {
    if (stream.destroyed) throw new Error("a result upload ended before its input did");
    if (stream.write(chunk)) continue;
    const waiting = new AbortController();
    const stop = () => waiting.abort(signal.reason);
    signal.addEventListener("abort", stop, { once: true });
    try {
      await Promise.race([
        once(stream, "drain", { signal: waiting.signal }),
        once(stream, "close", { signal: waiting.signal }).then(() => {
          throw new Error("a result upload ended before its input did");
        }),
      ]);
    } finally {
      waiting.abort();
      signal.removeEventListener("abort", stop);
    }
  }
}
