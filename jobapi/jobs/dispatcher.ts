import { randomUUID } from "node:crypto";
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { batchQueries, parseQueryFasta, toFasta } from "../../shared/blast/fasta.js";
import { type BlastOptions, toBlastArgs } from "../../shared/blast/options.js";
import { type BlastProgram, QUERY_BATCH_LETTERS, queryMolecule } from "../../shared/blast/programs.js";
import type { DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { ACTIVE_STATUSES, DEFAULT_FLEET, fleetOf, type JobRecord } from "../../shared/jobs/model.js";
import { shardArtifact } from "./artifact-store.js";
import { createSemaphore, shardThreads } from "../executors/executor.js";
import {
  type DispatcherOptions,
  JobFailure,
  JobFailures,
  LeaseLostError,
  type MergedResult,
  nextAttempt,
  now,
  type RunContext,
  setShard,
  touch,
} from "./dispatch-context.js";
import { mergeAndPublish, publishSingleShard, storingReporter } from "./merge-publish.js";
import { planShards, preflightMessage, shardMemoryNeed } from "./shard-plan.js";
import { runShard } from "./shard-runner.js";

// The dispatcher's queue and lease: which jobs run here and when, and each job's course through
// its phases. The phases live beside it: shard planning (shard-plan.ts), running shards
// (shard-runner.ts), merge and publish (merge-publish.ts); what they share, in dispatch-context.ts.

export type { DispatcherOptions } from "./dispatch-context.js";
export { memoryRemedies, PREFLIGHT_REMEDIES, preflightMessage, shardMemoryNeed } from "./shard-plan.js";

/** Queries handed over by submits in this process, kept in memory up to this many bytes in all. */
const HANDED_OVER_QUERY_BYTES = 32 * 1024 * 1024;
/**
 * Moves jobs through `queued → dispatching → submitting → running → completed` (or `failed`,
 * `cancelled`): higher priority first, then oldest; at most `maxActiveJobs` at once. After a
 * restart, `start()` reconciles unfinished jobs: shards whose outputs are stored are kept, the
 * rest run again, and each job ends completed or failed with a clear error — never stuck.
 */
export class JobDispatcher implements RunContext {
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
  readonly scratchDir: string;
  readonly failures: JobFailures;
  /** The fleet whose jobs this dispatcher runs (and whose lease it holds): see {@link DispatcherOptions.fleet}. */
  readonly fleet: string;
  /** Query FASTA of jobs submitted through this process, so dispatching need not read it back. */
  private readonly handedOver = new Map<string, string>();
  private handedOverBytes = 0;

  constructor(readonly o: DispatcherOptions) {
    this.failures = new JobFailures(o);
    this.scratchDir = path.join(o.workDir, `dispatcher-${randomUUID()}`);
    this.fleet = o.fleet ?? DEFAULT_FLEET;
  }

  /**
   * Whether a job is this dispatcher's to run: one a job API of its fleet accepted. Job APIs of
   * other fleets on the same storage account (another deployment, `npm start`'s own beside the one
   * deployed to its cluster) run theirs; none takes another's, queued or orphaned.
   */
  private ours(job: JobRecord): boolean {
    return fleetOf(job) === this.fleet;
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
        if (!this.ours(job)) continue;
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
        if (!this.running.has(job.job_id) && this.dispatching() && this.ours(job)) {
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
    for await (const job of this.o.jobs.list(["queued"])) if (this.ours(job)) queued.push(job);
    queued.sort(compareForDispatch);
    for (const job of queued) {
      if (this.running.size >= this.o.maxActiveJobs || !this.dispatching()) return;
      const claimed = await this.o.jobs.update(job.job_id, (j) =>
        j.status === "queued" && this.ours(j) ? touch({ ...j, status: "dispatching" }) : undefined,
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
            : (this.failures.roleRefusal(error)?.message ?? "internal error while running the job");
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
  ensureDispatching(signal: AbortSignal): void {
    if (!this.dispatching()) throw signal.reason ?? new LeaseLostError();
  }

  /** Applies a change unless the job was cancelled meanwhile; aborts the run if it was. */
  async advance(jobId: string, signal: AbortSignal, change: (j: JobRecord) => JobRecord): Promise<JobRecord> {
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
      const shards = planShards(
        j,
        batches.map((b) => b.index),
        partitions,
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
        // A run that resumes searches again: no storing phase until BLAST has finished.
        storing: null,
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
      .map((shard) => runShard(this, job, db, shard, optionArgs, threads, room, { store: only === undefined }, signal));
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
    // BLAST has finished: the job says how much of its result is stored until it completes.
    const storingProgress = storingReporter(this, jobId, signal);
    if (only) {
      const published = await publishSingleShard(
        this,
        job,
        only,
        path.join(dir, "out", `${only.id}.xml`),
        signal,
        storingProgress,
        timings,
      );
      timings.published_ms = ms(blastedAt);
      await storingProgress.settle();
      await this.advance(jobId, signal, (j) =>
        touch({
          ...setShard(j, only.id, { state: "succeeded", output_bytes: published.shardBytes }),
          status: "completed",
          storing: null,
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
      mergeAndPublish(this, job, db, dir, signal, storingProgress).finally(() => {
        timings.merge_ms = ms(blastedAt);
      }),
      Promise.all(storing).finally(() => {
        timings.store_ms = ms(blastedAt);
      }),
    ]);
    const error = [merged, ...stored].find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (error) throw error.reason;
    const { mergedBytes, xmlBytes } = (merged as PromiseFulfilledResult<MergedResult>).value;
    await storingProgress.settle();
    await this.advance(jobId, signal, (j) =>
      touch({
        ...j,
        status: "completed",
        merged_bytes: mergedBytes,
        merged_xml_bytes: xmlBytes,
        completed_at: now(),
        storing: null,
      }),
    );
    timings.after_shards_ms = ms(blastedAt);
    this.o.logger.info("job completed", { job_id: jobId, shards: job.shards.length, ...timings });
  }
}

/** Dispatch order: higher priority first, then oldest. */
export function compareForDispatch(a: JobRecord, b: JobRecord): number {
  return b.priority - a.priority || a.created_at.localeCompare(b.created_at) || a.job_id.localeCompare(b.job_id);
}
