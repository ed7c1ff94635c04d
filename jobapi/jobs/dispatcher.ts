import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createReadStream } from "node:fs";
import { mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { PassThrough, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { gzipSync } from "node:zlib";
import {
  type CloudAuthorizationFailure,
  describeCloudAuthorizationError,
} from "../../shared/auth/cloud-authorization.js";
import { userFacingBlastError } from "../../shared/blast/blast-diagnostics.js";
import { batchQueries, parseQueryFasta, toFasta } from "../../shared/blast/fasta.js";
import { type BlastOptions, toBlastArgs } from "../../shared/blast/options.js";
import { type BlastProgram, QUERY_BATCH_LETTERS, queryMolecule } from "../../shared/blast/programs.js";
import { BlastXmlError, mergeBlastXml, namedDatabaseHeader, readIterations } from "../../shared/blast/xml-merge.js";
import type { Logger } from "../../shared/logging/logger.js";
import { createParallelGzip } from "../../shared/storage/parallel-gzip.js";
import { type ArtifactStore, MERGED_ARTIFACT, shardArtifact } from "./artifact-store.js";
import type { DatabaseCatalog, DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { buildShardArgs, createSemaphore, type ShardExecutor, shardThreads } from "../executors/executor.js";
import type { DispatchLease } from "./dispatch-lease.js";
import type { JobStore } from "./job-store.js";
import { ACTIVE_STATUSES, type JobRecord, type Shard, shardId } from "../../shared/jobs/model.js";
import { ShardFailedError } from "../../shared/errors.js";

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
  /** Hears of each Azure refusal for want of a role (the `role_assignment.missing` event); must not throw. */
  onRoleRefusal?: (failure: CloudAuthorizationFailure) => void;
}

const GIB = 1024 ** 3;
/** Queries handed over by submits in this process, kept in memory up to this many bytes in all. */
const HANDED_OVER_QUERY_BYTES = 32 * 1024 * 1024;
/** Fast gzip: results are large text and are compressed once per job (level 6 costs ~4× the time). */
const GZIP_LEVEL = 1;

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

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

class JobFailure extends Error {}

/** A dispatch write refused because this process no longer holds the dispatch lease. */
class LeaseLostError extends Error {
  constructor() {
    super("this process no longer holds the dispatch lease");
  }
}

/**
 * Moves jobs through `queued → dispatching → submitting → running → completed` (or `failed`,
 * `cancelled`): higher priority first, then oldest; at most `maxActiveJobs` at once. After a
 * restart, `start()` reconciles unfinished jobs: shards whose outputs are stored are kept, the
 * rest run again, and each job ends completed or failed with a clear error — never stuck.
 */
export class JobDispatcher {
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private wakeAgain = false;
  private resumeOrphansNext = false;
  /** Set by `stop()`: the dispatcher never runs again. */
  private stopped = false;
  /** Whether this dispatcher runs jobs now (it holds the lease, or has none to hold). */
  private active = false;
  /** This dispatcher's scratch folder: two processes on one data folder never share one. */
  private readonly scratchDir: string;
  /** Query FASTA of jobs submitted through this process, so dispatching need not read it back. */
  private readonly handedOver = new Map<string, string>();
  private handedOverBytes = 0;

  constructor(private readonly o: DispatcherOptions) {
    this.scratchDir = path.join(o.workDir, `dispatcher-${randomUUID()}`);
  }

  /**
   * Starts dispatching: at once without a lease, else whenever this process holds it (and it stops
   * again when the lease is lost; see {@link DispatchLease}).
   */
  async start(): Promise<void> {
    if (!this.o.lease) return this.activate();
    let activation: Promise<void> | undefined;
    // The first round of the lease is awaited, so a process that is alone starts dispatching at once.
    await this.o.lease.start({
      acquired: () => {
        activation = this.activate().catch((error: unknown) =>
          this.o.logger.error("could not start dispatching", { error }),
        );
      },
      lost: () => {
        void this.deactivate("the dispatch lease was lost");
      },
    });
    await activation;
  }

  /** Whether this dispatcher may run jobs and write their state now. */
  private dispatching(): boolean {
    return this.active && !this.stopped && (this.o.lease?.isHeld() ?? true);
  }

  /** "active" while this process runs jobs, "standby" while another one does. */
  get role(): "active" | "standby" {
    return this.dispatching() ? "active" : "standby";
  }

  private async activate(): Promise<void> {
    if (this.active || this.stopped) return;
    this.active = true;
    // Scratch folders of dispatchers that no longer run (this process's or a predecessor's) go.
    await this.removeOtherScratch();
    await this.holdQueuedReleases();
    // The first pass and every periodic one also resume jobs left active by a previous process.
    this.timer = setInterval(() => this.wake({ resumeOrphans: true }), this.o.pollIntervalMs ?? 1000);
    this.timer.unref();
    this.wake({ resumeOrphans: true });
  }

  /** Stops running jobs (they stay active in storage, for the next holder to resume). */
  private async deactivate(reason: string): Promise<void> {
    const wasActive = this.active;
    this.active = false;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (wasActive && this.running.size > 0)
      this.o.logger.warn("dispatch stops; running jobs are left to the next dispatcher", {
        reason,
        jobs: [...this.running.keys()],
      });
    for (const { controller } of this.running.values()) controller.abort(new Error(reason));
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }

  private async removeOtherScratch(): Promise<void> {
    const entries = await readdir(this.o.workDir).catch(() => [] as string[]);
    for (const name of entries) {
      if (path.join(this.o.workDir, name) === this.scratchDir) continue;
      await rm(path.join(this.o.workDir, name), { recursive: true, force: true }).catch((error: unknown) =>
        this.o.logger.warn("could not remove an old scratch folder", { folder: name, error }),
      );
    }
  }

  /**
   * A queued job's database release is marked in use by the process that took its submit; after a
   * restart that process is gone and its marks no longer count, so this one marks them again.
   * (Active jobs are marked when they are resumed.) Best effort: storage may still be starting.
   */
  private async holdQueuedReleases(): Promise<void> {
    try {
      for await (const job of this.o.jobs.list(["queued"])) {
        await this.o.catalog.hold(job.db_name, job.db_version, job.job_id).catch((error: unknown) => {
          this.o.logger.warn("could not mark the database release in use", { job_id: job.job_id, error });
        });
      }
    } catch (error) {
      this.o.logger.warn("could not list queued jobs to mark their database releases in use", { error });
    }
  }

  /** Looks for queued work now (called after a submit). */
  wake(options: { resumeOrphans?: boolean } = {}): void {
    if (!this.dispatching()) return;
    this.resumeOrphansNext ||= options.resumeOrphans === true;
    if (this.ticking) {
      // A submit during a pass must not wait for the next poll: run again right after.
      this.wakeAgain = true;
      return;
    }
    this.ticking = true;
    const resumeOrphans = this.resumeOrphansNext;
    this.resumeOrphansNext = false;
    void this.tick(resumeOrphans)
      .catch((error: unknown) => this.o.logger.error("dispatch tick failed", { error }))
      .finally(() => {
        this.ticking = false;
        if (this.wakeAgain) {
          this.wakeAgain = false;
          this.wake();
        }
      });
  }

  /**
   * A job was just stored by a submit in this process: keep its query (the stored copy stays the
   * source of truth; a job dispatched elsewhere or after a restart reads that) and look for work.
   */
  submitted(jobId: string, queryFasta: string): void {
    this.takeHandedOver(jobId);
    if (queryFasta.length <= HANDED_OVER_QUERY_BYTES) {
      // Oldest first out: a job another replica dispatched never comes to take its copy.
      for (const oldest of this.handedOver.keys()) {
        if (this.handedOverBytes + queryFasta.length <= HANDED_OVER_QUERY_BYTES) break;
        this.takeHandedOver(oldest);
      }
      this.handedOver.set(jobId, queryFasta);
      this.handedOverBytes += queryFasta.length;
    }
    this.wake();
  }

  /** The job's query: handed over by its submit, else read from storage. */
  private async queryOf(jobId: string): Promise<string> {
    const handed = this.takeHandedOver(jobId);
    return handed ?? (await this.o.artifacts.getText(jobId, "query.fa"));
  }

  private takeHandedOver(jobId: string): string | undefined {
    const fasta = this.handedOver.get(jobId);
    if (fasta !== undefined) {
      this.handedOver.delete(jobId);
      this.handedOverBytes -= fasta.length;
    }
    return fasta;
  }

  get activeCount(): number {
    return this.running.size;
  }

  private async tick(resumeOrphans: boolean): Promise<void> {
    // Active jobs this process is not running were orphaned (a storage outage, a crash): resume them.
    // Only on the periodic passes: a submit's wake goes straight to the queue.
    if (resumeOrphans) {
      const activeIds = new Set<string>();
      for await (const job of this.o.jobs.list([...ACTIVE_STATUSES])) {
        activeIds.add(job.job_id);
        if (!this.running.has(job.job_id) && this.dispatching()) {
          this.o.logger.info("resuming orphaned job", { job_id: job.job_id, status: job.status });
          this.launch(job.job_id);
        }
      }
      // A job cancelled or deleted through another process (which cannot reach these shards).
      for (const [jobId, run] of this.running) {
        if (activeIds.has(jobId)) continue;
        const job = await this.o.jobs.get(jobId);
        if (!job || job.status === "cancelled" || job.cancel_requested)
          run.controller.abort(new Error("job cancelled"));
      }
    }
    if (this.running.size >= this.o.maxActiveJobs) return;
    const queued: JobRecord[] = [];
    for await (const job of this.o.jobs.list(["queued"])) queued.push(job);
    queued.sort(compareForDispatch);
    for (const job of queued) {
      if (this.running.size >= this.o.maxActiveJobs || !this.dispatching()) return;
      const claimed = await this.o.jobs.update(job.job_id, (j) =>
        j.status === "queued" ? touch({ ...j, status: "dispatching" }) : undefined,
      );
      if (claimed?.status === "dispatching" && !this.running.has(job.job_id)) this.launch(job.job_id, claimed);
    }
  }

  /** Runs a job; `claimed` is its record as this process just claimed it (else it is read). */
  private launch(jobId: string, claimed?: JobRecord): void {
    const controller = new AbortController();
    const done = this.runJob(jobId, controller.signal, claimed)
      .catch(async (error: unknown) => {
        // Stopped here (cancelled, stopping, or the lease moved on): not a failure of the job.
        if (controller.signal.aborted || error instanceof LeaseLostError) return;
        // A missing role says which one, where, and how long a new assignment takes (spec §7).
        const message =
          error instanceof JobFailure
            ? error.message
            : (this.roleRefusal(error)?.message ?? "internal error while running the job");
        if (!(error instanceof JobFailure)) this.o.logger.error("job failed unexpectedly", { job_id: jobId, error });
        // If storage is down the job stays active in storage; a later tick picks it up again.
        await this.fail(jobId, message).catch((failError: unknown) =>
          this.o.logger.error("could not record the job failure", { job_id: jobId, error: failError }),
        );
      })
      .finally(async () => {
        // Cleaned before the job may be launched again, so a relaunch never loses its new files.
        await rm(path.join(this.scratchDir, jobId), { recursive: true, force: true }).catch((error: unknown) =>
          this.o.logger.warn("could not remove a job's scratch folder", { job_id: jobId, error }),
        );
        this.running.delete(jobId);
        this.wake();
      });
    this.running.set(jobId, { controller, done });
  }

  /** Stops a job's shards (after the job was marked cancelled). */
  cancel(jobId: string): void {
    this.takeHandedOver(jobId);
    this.running.get(jobId)?.controller.abort(new Error("job cancelled"));
    // Cluster Jobs outlive this process's runs: they are removed whether or not it runs the job.
    this.o.executor
      .cancelJob?.(jobId)
      .catch((error: unknown) =>
        this.o.logger.warn("could not remove a cancelled job's shards", { job_id: jobId, error }),
      );
  }

  /**
   * Stops taking work and aborts running shards; their jobs are reconciled by the next dispatcher.
   * The lease is given up last, once nothing here runs any more.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.deactivate("job API stopping");
    await this.o.lease?.stop();
  }

  private async fail(jobId: string, message: string): Promise<void> {
    if (!this.dispatching()) return;
    await this.o.jobs.update(jobId, (j) =>
      j.status === "cancelled" || j.status === "completed"
        ? undefined
        : touch({ ...j, status: "failed", error: message, completed_at: now() }),
    );
    this.o.logger.warn("job failed", { job_id: jobId, error: message });
  }

  /**
   * Only the lease holder writes a running job's state or artifacts: a process that was paused and
   * resumes is past its lease on its own clock before it hears of the loss, and must write nothing.
   */
  private ensureDispatching(signal: AbortSignal): void {
    if (!this.dispatching()) throw signal.reason ?? new LeaseLostError();
  }

  /** Applies a change unless the job was cancelled meanwhile; aborts the run if it was. */
  private async advance(jobId: string, signal: AbortSignal, change: (j: JobRecord) => JobRecord): Promise<JobRecord> {
    this.ensureDispatching(signal);
    const job = await this.o.jobs.update(jobId, (j) =>
      j.status === "cancelled" || j.cancel_requested ? undefined : change(j),
    );
    if (!job || job.status === "cancelled" || job.cancel_requested || signal.aborted)
      throw signal.reason ?? new Error("job cancelled");
    return job;
  }

  private async runJob(jobId: string, signal: AbortSignal, claimed?: JobRecord): Promise<void> {
    const initial = claimed ?? (await this.o.jobs.get(jobId));
    if (!initial) return;
    // The release stays on disk while the job needs it (held since its submit); let go at the end.
    try {
      if (initial.status === "cancelled" || initial.cancel_requested) return;
      const db = await this.o.catalog.get(initial.db_name, initial.db_version);
      if (!db) throw new JobFailure(`database ${initial.db_name} version ${initial.db_version} is no longer available`);
      // Marked again by this process, which takes over a hold left by one that died.
      await this.o.catalog.hold(initial.db_name, initial.db_version, jobId).catch((error: unknown) => {
        // A read-only database folder cannot be marked; the search itself does not need the mark.
        this.o.logger.warn("could not mark the database release in use", { job_id: jobId, error });
      });
      await this.runOnDatabase(jobId, signal, initial, db);
    } finally {
      await this.o.catalog
        .release(initial.db_name, initial.db_version, jobId)
        .catch((error: unknown) => this.o.logger.warn("could not release a database hold", { job_id: jobId, error }));
    }
  }

  private async runOnDatabase(
    jobId: string,
    signal: AbortSignal,
    initial: JobRecord,
    db: DatabaseEntry,
  ): Promise<void> {
    const program = initial.program as BlastProgram;
    const fresh = initial.shards.length === 0;
    const sharded = initial.execution_profile === "sharded";
    if (sharded && db.manifest.partitions.length === 0) {
      throw new JobFailure(
        `database ${initial.db_name} has no prepared partitions; use the standard execution profile or add partitions`,
      );
    }
    const need = shardMemoryNeed(db, sharded);
    const usable = this.o.nodeMemoryBytes - this.o.memoryMarginBytes;
    if (need > usable) throw new JobFailure(preflightMessage(initial.db_name, need, usable, sharded));

    // Dispatching: query batches on the scratch folder, the shard plan in the job.
    const records = parseQueryFasta(await this.queryOf(jobId), queryMolecule(program));
    const batches = batchQueries(records, QUERY_BATCH_LETTERS[program]);
    const dir = path.join(this.scratchDir, jobId);
    // A resumed job's scratch outputs may be half-written by the process that died: start clean
    // (shards whose outputs were stored are fetched from storage for the merge).
    if (!fresh) await rm(path.join(dir, "out"), { recursive: true, force: true });
    await mkdir(path.join(dir, "out"), { recursive: true });
    for (const b of batches) await writeFile(path.join(dir, `b${b.index}.fa`), toFasta(b.records));
    const partitions = sharded ? db.manifest.partitions.map((p) => p.index) : [-1];
    let job = await this.advance(jobId, signal, (j) => {
      const shards: Shard[] =
        j.shards.length > 0
          ? j.shards.map((s) => (s.state === "succeeded" || s.state === "failed" ? s : { ...s, state: "pending" }))
          : batches.flatMap((b) =>
              partitions.map((p) => ({
                id: shardId(b.index, p),
                batch: b.index,
                partition: p,
                state: "pending" as const,
                attempts: 0,
                output_bytes: 0,
              })),
            );
      return touch({ ...j, status: "submitting", shards, started_at: j.started_at || now() });
    });

    // Submitting: find the shards still to run. A job planned just now has no stored outputs yet;
    // a resumed one keeps the shards whose outputs were stored.
    const optionArgs = toBlastArgs(program, job.blast_options as BlastOptions);
    const toRun = new Set<string>();
    for (const shard of job.shards) {
      if (shard.state === "succeeded") continue;
      const stored = fresh ? undefined : await this.o.artifacts.size(jobId, shardArtifact(shard.id));
      if (stored !== undefined) {
        await this.advance(jobId, signal, (j) => setShard(j, shard.id, { state: "succeeded", output_bytes: stored }));
        continue;
      }
      toRun.add(shard.id);
    }
    // Running: every unfinished shard runs, recorded in one write. Only a failed attempt counts: a
    // shard whose attempt was interrupted (the lease moved, or the process running it stopped) goes
    // on with that attempt, so resumes never use up attempts that did not run to an end.
    job = await this.advance(jobId, signal, (j) =>
      touch({
        ...j,
        status: "running",
        shards: j.shards.map((s) => (toRun.has(s.id) ? { ...s, state: "running", attempts: nextAttempt(s) } : s)),
      }),
    );
    // On one machine, partitions are searched one at a time with every core: the partitioned
    // profile exists for databases larger than memory, and partitions searched side by side need
    // their pages at once (query batches share one database's pages). One BLAST process with all
    // the threads also beat two side by side on a 2-core machine (1.03× vs 1.10× the time of one
    // whole-database search, bare BLAST+).
    const sideBySide = sharded && this.o.executor.oneNode ? 1 : toRun.size;
    const room = createSemaphore(sideBySide);
    const threads = shardThreads(this.o.threadsPerShard, this.o.shardSlots, Math.min(toRun.size, sideBySide));
    // A job of one shard run here publishes both files from one compression (publishSingleShard).
    // (An executor whose shards store their own outputs leaves the merge to publish it.)
    const only =
      !this.o.executor.storesOutputs && job.shards.length === 1 && toRun.size === 1 ? job.shards[0] : undefined;
    const runs = job.shards
      .filter((s) => toRun.has(s.id))
      .map((shard) => this.runShard(job, db, shard, optionArgs, threads, room, { store: only === undefined }, signal));
    const runningAt = performance.now();
    const outcomes = await Promise.allSettled(runs);
    const blastedAt = performance.now();
    // Shard outputs upload while the merge runs; the job completes once both are done.
    const storing = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.stored] : []));
    const settle = () => Promise.allSettled(storing);
    if (signal.aborted) {
      await settle();
      throw signal.reason;
    }
    const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (failure) {
      await settle();
      throw failure.reason instanceof JobFailure ? failure.reason : new JobFailure(String(failure.reason));
    }
    const ms = (from: number) => Math.round(performance.now() - from);
    const timings: Record<string, number> = { shards_ms: Math.round(blastedAt - runningAt) };
    if (only) {
      const published = await this.publishSingleShard(job, only, path.join(dir, "out", `${only.id}.xml`), signal);
      await this.advance(jobId, signal, (j) =>
        touch({
          ...setShard(j, only.id, { state: "succeeded", output_bytes: published.shardBytes }),
          status: "completed",
          merged_bytes: published.mergedBytes,
          merged_xml_bytes: published.xmlBytes,
          completed_at: now(),
        }),
      );
      timings.after_shards_ms = ms(blastedAt);
      this.o.logger.info("job completed", { job_id: jobId, shards: 1, ...timings });
      return;
    }
    const [merged, ...stored] = await Promise.allSettled([
      this.mergeAndPublish(job, db, dir, signal).finally(() => {
        timings.merge_ms = ms(blastedAt);
      }),
      Promise.all(storing).finally(() => {
        timings.store_ms = ms(blastedAt);
      }),
    ]);
    const error = [merged, ...stored].find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (error) throw error.reason;
    const { mergedBytes, xmlBytes } = (merged as PromiseFulfilledResult<MergedResult>).value;
    await this.advance(jobId, signal, (j) =>
      touch({ ...j, status: "completed", merged_bytes: mergedBytes, merged_xml_bytes: xmlBytes, completed_at: now() }),
    );
    timings.after_shards_ms = ms(blastedAt);
    this.o.logger.info("job completed", { job_id: jobId, shards: job.shards.length, ...timings });
  }

  /**
   * Merges every shard's output into `merged_results.out.gz`, streamed through a parallel gzip
   * straight into Blob storage; the blob appears only when it is complete.
   */
  private async mergeAndPublish(
    job: JobRecord,
    db: DatabaseEntry,
    dir: string,
    signal: AbortSignal,
  ): Promise<MergedResult> {
    this.ensureDispatching(signal);
    const shardFiles = [];
    for (const s of job.shards) {
      // The plain XML this process produced merges fastest; after a restart, fetch the stored copy.
      const xml = path.join(dir, "out", `${s.id}.xml`);
      const gz = path.join(dir, "out", `${s.id}.out.gz`);
      let local = xml;
      if (!(await exists(xml))) {
        if (!(await exists(gz))) await this.o.artifacts.downloadToFile(job.job_id, shardArtifact(s.id), gz);
        local = gz;
      }
      shardFiles.push({ batchIndex: s.batch, partitionIndex: Math.max(0, s.partition), path: local });
    }
    let xmlBytes = 0;
    const xml = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        xmlBytes += chunk.length;
        callback(null, chunk);
      },
    });
    // Cancelling the job (or stopping the job API) ends the upload, and with it the merge.
    const uploaded = this.o.artifacts.uploadStream(job.job_id, MERGED_ARTIFACT, xml, {
      through: createParallelGzip({ level: GZIP_LEVEL }),
      signal,
    });
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
        throw this.storageFailure(job.job_id, "the merged result", uploadError);
      throw this.invalidOutput(job.job_id, error);
    }
    try {
      return { mergedBytes: await uploaded, xmlBytes };
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw this.storageFailure(job.job_id, "the merged result", error);
    }
  }

  /**
   * Publishes a job of one shard: its merged document is BLAST's own output with the database
   * named instead of the path BLAST was given (what the merge writes for one shard, byte for byte),
   * so the body is gzipped once and stored twice, under BLAST's header as the shard output and under
   * the merged header as `merged_results.out.gz` (each header its own gzip member). The output is
   * still read through the BLAST XML reader meanwhile, so a truncated or malformed one fails the job
   * as the merge would.
   */
  private async publishSingleShard(
    job: JobRecord,
    shard: Shard,
    xml: string,
    signal: AbortSignal,
  ): Promise<MergedResult & { shardBytes: number }> {
    this.ensureDispatching(signal);
    const events = readIterations(xml);
    let header: string;
    try {
      const first = await events.next();
      if (first.done || first.value.type !== "header") throw new BlastXmlError("no BLAST XML header");
      header = first.value.header.raw;
    } catch (error) {
      await events.return(undefined);
      throw this.invalidOutput(job.job_id, error);
    }
    // An output that turns out invalid stops the uploads too.
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    const validated = (async () => {
      for await (const _ of events) stop.signal.throwIfAborted();
    })();
    validated.catch((error: unknown) => stop.abort(error));
    const mergedHeader = namedDatabaseHeader(header, job.db_name);
    const shardCopy = new PassThrough({ highWaterMark: 1024 * 1024 });
    const mergedCopy = new PassThrough({ highWaterMark: 1024 * 1024 });
    shardCopy.write(gzipSync(Buffer.from(header, "latin1"), { level: GZIP_LEVEL }));
    mergedCopy.write(gzipSync(Buffer.from(mergedHeader, "latin1"), { level: GZIP_LEVEL }));
    // The body after the header, in BLAST's bytes (the header string holds one character per byte).
    const body = pipeline(
      createReadStream(xml, { start: header.length, highWaterMark: 1024 * 1024 }),
      createParallelGzip({ level: GZIP_LEVEL }),
      async (members) => {
        for await (const member of members as AsyncIterable<Buffer>)
          await writeEach([shardCopy, mergedCopy], member, stop.signal);
        // Neither blob is committed before the document proved valid (an upload commits at its end).
        await validated;
        shardCopy.end();
        mergedCopy.end();
      },
    );
    body.catch((error: unknown) => {
      shardCopy.destroy(error as Error);
      mergedCopy.destroy(error as Error);
    });
    const uploads = [
      this.o.artifacts.uploadStream(job.job_id, shardArtifact(shard.id), shardCopy, { signal: stop.signal }),
      this.o.artifacts.uploadStream(job.job_id, MERGED_ARTIFACT, mergedCopy, { signal: stop.signal }),
    ];
    const [read, compressed, ...stored] = await Promise.allSettled([validated, body, ...uploads]);
    signal.removeEventListener("abort", onAbort);
    if (signal.aborted) throw signal.reason;
    if (read.status === "rejected") throw this.invalidOutput(job.job_id, read.reason);
    const failed = [compressed, ...stored].find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (failed) throw this.storageFailure(job.job_id, "the merged result", failed.reason);
    const [shardBytes, mergedBytes] = stored.map((o) => (o as PromiseFulfilledResult<number>).value) as [
      number,
      number,
    ];
    const { size } = await stat(xml);
    return { shardBytes, mergedBytes, xmlBytes: mergedHeader.length + size - header.length };
  }

  private invalidOutput(jobId: string, error: unknown): JobFailure {
    this.o.logger.error("merge failed", { job_id: jobId, error });
    return new JobFailure(
      "merging the shard outputs failed: a shard's output is not valid BLAST XML, or the shards disagree",
    );
  }

  /** The role refusal `error` stands for, if it is one; each is also reported (`onRoleRefusal`). */
  private roleRefusal(error: unknown): CloudAuthorizationFailure | undefined {
    const refusal = describeCloudAuthorizationError(error);
    if (refusal) this.o.onRoleRefusal?.(refusal);
    return refusal;
  }

  /** A storage write that failed; the details (which may name storage endpoints) go to the log only. */
  private storageFailure(jobId: string, what: string, error: unknown): JobFailure {
    this.o.logger.error("storing a job artifact failed", { job_id: jobId, artifact: what, error });
    const refusal = this.roleRefusal(error);
    if (refusal) return new JobFailure(`storing ${what} failed: ${refusal.message}`);
    return new JobFailure(`storing ${what} failed; the job API log has the storage error (job ${jobId})`);
  }

  /**
   * Runs one shard, whose current attempt is already recorded, retrying up to `shardAttempts`;
   * resolves when BLAST has written its output, with `stored`: the output being gzipped into Blob
   * storage and the shard marked succeeded.
   */
  private async runShard(
    job: JobRecord,
    db: DatabaseEntry,
    shard: Shard,
    optionArgs: string[],
    threads: number,
    room: ReturnType<typeof createSemaphore>,
    options: { store: boolean },
    signal: AbortSignal,
  ): Promise<ShardRun> {
    const dir = path.join(this.scratchDir, job.job_id);
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
    for (let attempt = shard.attempts; attempt <= this.o.shardAttempts; attempt++) {
      attempts = attempt;
      if (attempt > shard.attempts)
        await this.advance(job.job_id, signal, (j) => setShard(j, shard.id, { state: "running", attempts: attempt }));
      try {
        const release = await room.acquire(signal);
        try {
          await this.o.executor.run(
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
          : this.o.executor.storesOutputs
            ? this.recordStored(job.job_id, shard.id, signal)
            : this.storeShard(job.job_id, shard.id, xml, signal);
        // Awaited by the caller; this only keeps an early failure from being reported as unhandled.
        stored.catch(() => {});
        return { stored };
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        const raw = error instanceof Error ? error.message : String(error);
        const refusal = this.roleRefusal(error);
        // The raw diagnostics (toolkit paths, line numbers) to the log; a readable message to the job.
        this.o.logger.warn("shard attempt failed", { job_id: job.job_id, shard: shard.id, attempt, error: raw });
        lastError = refusal?.message ?? userFacingBlastError(raw);
        // Out of memory, no node large enough, no image, a missing role: another attempt would fail the same way.
        if ((error instanceof ShardFailedError && !error.retryable) || refusal) break;
      }
    }
    await this.advance(job.job_id, signal, (j) => setShard(j, shard.id, { state: "failed" }));
    if (attempts === 0) {
      // Its last allowed attempt failed under a process that stopped before failing the job (or the
      // allowed number was lowered since): nothing ran here, and the reason was not recorded.
      throw new JobFailure(
        `shard ${shard.id} has no attempt left: attempt ${shard.attempts} of ${this.o.shardAttempts} allowed (JOBAPI_SHARD_ATTEMPTS) would be next; the job API that ran the earlier attempts logged why they failed`,
      );
    }
    throw new JobFailure(`shard ${shard.id} failed after ${attempts} attempt(s): ${lastError}`);
  }

  /** The shard stored its own output (a cluster shard worker): record it as succeeded with its size. */
  private async recordStored(jobId: string, shardId: string, signal: AbortSignal): Promise<void> {
    const bytes = await this.o.artifacts.size(jobId, shardArtifact(shardId));
    if (bytes === undefined) throw new JobFailure(`shard ${shardId} finished without storing its output`);
    await this.advance(jobId, signal, (j) => setShard(j, shardId, { state: "succeeded", output_bytes: bytes }));
  }

  private async storeShard(jobId: string, shardId: string, xml: string, signal: AbortSignal): Promise<void> {
    this.ensureDispatching(signal);
    let bytes: number;
    try {
      bytes = await this.o.artifacts.uploadStream(jobId, shardArtifact(shardId), createReadStream(xml), {
        through: createParallelGzip({ level: GZIP_LEVEL }),
        signal,
      });
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      throw this.storageFailure(jobId, `the output of shard ${shardId}`, error);
    }
    await this.advance(jobId, signal, (j) => setShard(j, shardId, { state: "succeeded", output_bytes: bytes }));
  }
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

interface ShardRun {
  /** Settles when the shard's output is stored and the shard marked succeeded. */
  stored: Promise<void>;
}

interface MergedResult {
  mergedBytes: number;
  xmlBytes: number;
}

function now(): string {
  return new Date().toISOString();
}

function touch(job: JobRecord): JobRecord {
  const t = now();
  return { ...job, updated_at: t, last_progress_at: t };
}

/** The attempt a shard about to run is on: its first, the one that was interrupted, or the one after a failure. */
function nextAttempt(shard: Shard): number {
  return shard.state === "failed" || shard.attempts === 0 ? shard.attempts + 1 : shard.attempts;
}

function setShard(job: JobRecord, id: string, change: Partial<Shard>): JobRecord {
  return touch({ ...job, shards: job.shards.map((s) => (s.id === id ? { ...s, ...change } : s)) });
}

/** Dispatch order: higher priority first, then oldest. */
export function compareForDispatch(a: JobRecord, b: JobRecord): number {
  return b.priority - a.priority || a.created_at.localeCompare(b.created_at) || a.job_id.localeCompare(b.job_id);
}
