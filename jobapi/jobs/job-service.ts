import { parseQueryFasta } from "../../shared/blast/fasta.js";
import { type BlastOptions, validateOptionsForProgram } from "../../shared/blast/options.js";
import { type BlastProgram, queryMolecule } from "../../shared/blast/programs.js";
import type { DatabaseCatalog } from "../../shared/databases/database-catalog.js";
import { requireDatabaseFit } from "../../shared/databases/database-fit.js";
import { ConflictError, DependencyUnavailableError, NotFoundError, QueueFullError } from "../../shared/errors.js";
import { requestFingerprint } from "../../shared/http/idempotency.js";
import { longPoll } from "../../shared/http/long-poll.js";
import {
  DEFAULT_FLEET,
  fleetOf,
  type JobRecord,
  type JobStatus,
  newJobId,
  newJobRecord,
  PRIORITY_NAMES,
  type SubmissionSource,
  TERMINAL_STATUSES,
} from "../../shared/jobs/model.js";
import type { SubmitRequest } from "../../shared/jobs/schemas.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { AdmissionSignals } from "../../shared/ops/emitters/saturation-watch.js";
import type { ArtifactStore } from "./artifact-store.js";
import { compareForDispatch, type JobDispatcher } from "./dispatcher.js";
import type { JobStore } from "./job-store.js";

/** How long a key claimed by a submit whose job does not exist yet counts as that submit's. */
const CLAIM_IN_PROGRESS_MS = 60_000;

/** How long a listing of the queue serves admissions (a burst of submits lists it once, not per submit). */
const ADMISSION_LISTING_MAX_AGE_MS = 1000;

/** How often a waiting status request re-reads the job for changes it was not told about. */
const STATUS_RECHECK_MS = 1000;

export interface JobServiceOptions {
  jobs: JobStore;
  artifacts: ArtifactStore;
  catalog: DatabaseCatalog;
  /** Its `fleet` (when it has one) is stamped on each accepted job: only that fleet runs it. */
  dispatcher: Pick<JobDispatcher, "submitted" | "cancel"> & Partial<Pick<JobDispatcher, "fleet">>;
  logger: Logger;
  blastVersion: () => Promise<string>;
  /** Jobs waiting as `queued` beyond which submits get 429. */
  maxQueuedJobs: number;
  /** Suggested wait when the queue is full. */
  retryAfterSeconds: number;
  /** Hears of each refusal and admission (the `queue.saturated` streak watch). */
  admission?: AdmissionSignals;
}

/** A normalised submission from either the job API or the facade. */
export interface Submission extends Omit<SubmitRequest, "blast_options"> {
  blast_options?: BlastOptions;
  source: SubmissionSource;
  external_correlation_id?: string;
  /** The submit's request id, logged with the job id so a failure's raw diagnostics (logged by job id) lead back to the request. */
  request_id?: string;
}

export interface SubmitOutcome {
  job: JobRecord;
  /** True when an idempotency key returned an existing job instead of creating one. */
  replayed: boolean;
  queuePosition: number | null;
}

/** What an idempotency key binds to: the request's search-defining fields. */
export function fingerprint(s: Submission): string {
  return requestFingerprint({
    program: s.program,
    db: s.db,
    query_fasta: s.query_fasta,
    blast_options: s.blast_options ?? {},
    execution_profile: s.execution_profile ?? "standard",
    resource_profile: s.resource_profile ?? "",
    priority: s.priority ?? "normal",
  });
}

function priorityValue(p: Submission["priority"]): number {
  if (p === undefined) return PRIORITY_NAMES.normal;
  return typeof p === "number" ? p : PRIORITY_NAMES[p];
}

/**
 * Submission, status and cancellation of jobs: validation beyond the schema (database exists and
 * fits the program, FASTA alphabet and limits, options valid for the program), admission and
 * idempotency. It answers with job records; the routes render them.
 */
export class JobService {
  /**
   * Admission's critical sections, one after another: listing the queue and reserving a place,
   * and giving a reservation back. A burst of submits thus never queues more than the limit.
   */
  private admission: Promise<unknown> = Promise.resolve();
  /** Jobs admitted whose record may not be visible to a listing yet. */
  private readonly reserved = new Map<string, JobRecord>();
  /** The creation time of the last job admitted here, so the next is strictly later. */
  private lastAdmittedMs = 0;
  /** The queued jobs as last listed, plus those admitted here since, less those that left the queue here since (see {@link admit}). */
  private queuedSnapshot: { jobs: Map<string, JobRecord>; at: number } | undefined;
  /** Jobs that left the queue while the queue is being listed (the listing may still have them as queued). */
  private leftDuringListing: Set<string> | undefined;
  /** The queue listing for positions that callers are joining (not started yet); see {@link queueOrder}. */
  private nextQueueOrder: Promise<Map<string, number>> | undefined;
  /** The queue listing for positions running now (settled when none runs). */
  private queueOrderRunning: Promise<unknown> = Promise.resolve();

  constructor(private readonly o: JobServiceOptions) {
    // A job dispatched, cancelled or deleted by this process is no longer waiting: a submit's
    // position must not count it, even one answered from a listing taken before it left.
    o.jobs.onAnyChange((jobId, job) => {
      if (job?.status === "queued") return;
      this.queuedSnapshot?.jobs.delete(jobId);
      this.leftDuringListing?.add(jobId);
      // A reservation stands only for a job that waits (see the invariant in submit()).
      this.reserved.delete(jobId);
    });
  }

  private serially<T>(step: () => Promise<T> | T): Promise<T> {
    const run = this.admission.then(step);
    this.admission = run.catch(() => {});
    return run;
  }

  async submit(s: Submission): Promise<SubmitOutcome> {
    const program = s.program as BlastProgram;
    const db = requireDatabaseFit(program, s.db, await this.o.catalog.get(s.db), s.execution_profile);
    if (s.blast_options)
      validateOptionsForProgram(program, s.blast_options, s.source === "facade" ? "options" : "blast_options");
    const records = parseQueryFasta(s.query_fasta, queryMolecule(program));

    const fp = fingerprint(s);
    const jobId = newJobId();
    if (s.idempotency_key) {
      const existing = await this.claimIdempotencyKey(s.idempotency_key, jobId, fp);
      if (existing) return { job: existing, replayed: true, queuePosition: await this.queuePosition(existing) };
    }

    try {
      const blastVersion = await this.o.blastVersion();
      const { job, queued } = await this.admit((admittedAt) =>
        newJobRecord(
          {
            job_id: jobId,
            program,
            db_name: db.manifest.name,
            db_version: db.manifest.version,
            db_location: db.location,
            blast_version: blastVersion,
            blast_options: (s.blast_options ?? {}) as Record<string, unknown>,
            priority: priorityValue(s.priority),
            execution_profile: s.execution_profile ?? "standard",
            resource_profile: s.resource_profile ?? "",
            submission_source: s.source,
            external_correlation_id: s.external_correlation_id ?? "",
            idempotency_key: s.idempotency_key ?? "",
            fingerprint: fp,
            query_count: records.length,
            query_letters: records.reduce((n, r) => n + r.sequence.length, 0),
            // The default fleet's jobs carry none, as every record stored before fleets.
            ...(this.o.dispatcher.fleet === undefined || this.o.dispatcher.fleet === DEFAULT_FLEET
              ? {}
              : { fleet: this.o.dispatcher.fleet }),
          },
          admittedAt,
        ),
      );
      try {
        await this.store(job, s.query_fasta);
      } finally {
        // Given back only between two admissions' listings: a listing either sees the job or
        // counts its reservation, never neither.
        await this.serially(() => this.reserved.delete(jobId));
      }
      this.o.dispatcher.submitted(jobId, s.query_fasta);
      this.o.logger.info("job accepted", {
        job_id: jobId,
        request_id: s.request_id,
        program,
        db: job.db_name,
        queries: job.query_count,
        source: s.source,
        fleet: fleetOf(job),
      });
      // Its place among the jobs queued at admission: no second listing on the submit path.
      return { job, replayed: false, queuePosition: 1 + queued.filter((j) => compareForDispatch(j, job) < 0).length };
    } catch (error) {
      if (s.idempotency_key) await this.o.jobs.releaseKey(s.idempotency_key, jobId);
      throw error;
    }
  }

  /** Stores an admitted job's query and record, its database release marked in use. */
  private async store(job: JobRecord, queryFasta: string): Promise<void> {
    const jobId = job.job_id;
    // Its release must survive newer prepares while the job waits in the queue (marked before
    // the job exists, so the dispatcher's let-go at its end always comes after).
    const held = this.o.catalog.hold(job.db_name, job.db_version, jobId).catch((error: unknown) => {
      this.o.logger.warn("could not mark the database release in use", { job_id: jobId, error });
    });
    try {
      await Promise.all([this.o.artifacts.putText(jobId, "query.fa", queryFasta), held]);
      await this.o.jobs.create(job);
    } catch (error) {
      await held;
      await this.o.catalog.release(job.db_name, job.db_version, jobId).catch(() => {});
      throw error;
    }
  }

  /**
   * Binds the key to `jobId`, or returns the job already bound to it. The same key with a different
   * request is 409 while that job is active; once it has finished, the key moves to the new job.
   */
  private async claimIdempotencyKey(key: string, jobId: string, fp: string): Promise<JobRecord | undefined> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const claim = await this.o.jobs.claimKey(key, {
        job_id: jobId,
        fingerprint: fp,
        claimed_at: new Date().toISOString(),
      });
      if (claim.claimed) return undefined;
      // The winner writes its job right after claiming; give it a moment to appear.
      let holder: JobRecord | undefined;
      for (let i = 0; i < 50 && !holder; i++) {
        holder = await this.o.jobs.get(claim.holder.job_id);
        if (!holder) await new Promise((r) => setTimeout(r, 40));
      }
      if (holder && claim.holder.fingerprint === fp) return holder;
      if (holder && !TERMINAL_STATUSES.has(holder.status)) {
        throw new ConflictError(
          `idempotency_key is in use by job ${holder.job_id} with a different request; use a fresh key`,
        );
      }
      // A submit that claimed the key moments ago may still be writing its job (slow storage);
      // taking the key from it would run two jobs for one key. The same request retries later.
      if (
        !holder &&
        claim.holder.claimed_at &&
        Date.now() - Date.parse(claim.holder.claimed_at) < CLAIM_IN_PROGRESS_MS
      ) {
        if (claim.holder.fingerprint === fp) {
          throw new DependencyUnavailableError(
            "the first submit with this idempotency_key is still being stored; retry shortly",
            2,
          );
        }
        throw new ConflictError(
          "idempotency_key is in use by a submit still in progress with a different request; use a fresh key",
        );
      }
      // The holder finished (or its submit died before writing it): take the key over.
      if (
        await this.o.jobs.reassignKey(
          key,
          { job_id: jobId, fingerprint: fp, claimed_at: new Date().toISOString() },
          claim.etag,
        )
      )
        return undefined;
    }
    throw new ConflictError("idempotency_key is being claimed concurrently; retry");
  }

  /**
   * Refuses a submit while the queue is full, else builds its job (created now: admission order is
   * creation order, so each admitted job's queue position is its own) and reserves it a place.
   * Returns the job and the jobs queued before it was admitted (stored ones and those admitted but
   * not yet stored). Atomic within this process. A listing under a second old is reused, kept
   * current with this process's own writes; it can only over-count jobs another replica started
   * in that second, so a refusal is always decided on a fresh one, and its count is exact.
   */
  private admit(build: (admittedAt: Date) => JobRecord): Promise<{ job: JobRecord; queued: JobRecord[] }> {
    return this.serially(async () => {
      const fresh = async () => {
        const listed = new Map<string, JobRecord>();
        const left = new Set<string>();
        this.leftDuringListing = left;
        try {
          for await (const j of this.o.jobs.list(["queued"])) listed.set(j.job_id, j);
        } finally {
          this.leftDuringListing = undefined;
        }
        for (const id of left) listed.delete(id);
        this.queuedSnapshot = { jobs: listed, at: Date.now() };
        return listed;
      };
      // The queue only shrinks between listings but for what this process admits (added below),
      // and what leaves it through this process is taken out at once (see the constructor), so a
      // recent listing is exact here and can only over-count jobs another replica dispatched
      // since: it may admit, never refuse. A refusal re-lists.
      const recent =
        this.queuedSnapshot && Date.now() - this.queuedSnapshot.at < ADMISSION_LISTING_MAX_AGE_MS
          ? this.queuedSnapshot.jobs
          : undefined;
      const waitingOf = (listed: Map<string, JobRecord>) => {
        const all = new Map(listed);
        for (const [id, reserved] of this.reserved) if (!all.has(id)) all.set(id, reserved);
        return all;
      };
      let queued = waitingOf(recent ?? (await fresh()));
      if (recent && queued.size >= this.o.maxQueuedJobs) queued = waitingOf(await fresh());
      if (queued.size >= this.o.maxQueuedJobs) {
        this.o.admission?.refused(queued.size);
        throw new QueueFullError(
          `the queue is full (${queued.size} jobs waiting); retry later`,
          this.o.retryAfterSeconds,
        );
      }
      this.o.admission?.admitted();
      this.lastAdmittedMs = Math.max(Date.now(), this.lastAdmittedMs + 1);
      const job = build(new Date(this.lastAdmittedMs));
      this.reserved.set(job.job_id, job);
      this.queuedSnapshot?.jobs.set(job.job_id, job);
      return { job, queued: [...queued.values()] };
    });
  }

  /** 1-based position among queued jobs in dispatch order; null once the job left the queue. */
  async queuePosition(job: JobRecord): Promise<number | null> {
    if (job.status !== "queued") return null;
    return (await this.queueOrder()).get(job.job_id) ?? 1;
  }

  /**
   * The queued jobs' 1-based positions in dispatch order, from one listing shared by every caller
   * that asked before it started (a page of 100 queued jobs, or hundreds of long polls rechecking
   * at once, read the queue once instead of once each: each read parses every queued record on the
   * event loop). At most one listing runs at a time; a caller that asks while one runs waits for
   * the next, since a listing started before the call may predate the caller's own job.
   */
  private queueOrder(): Promise<Map<string, number>> {
    if (this.nextQueueOrder) return this.nextQueueOrder;
    const next = this.queueOrderRunning.then(async () => {
      // Started now: later callers wait for the listing after this one.
      this.nextQueueOrder = undefined;
      const queued: JobRecord[] = [];
      for await (const j of this.o.jobs.list(["queued"])) queued.push(j);
      queued.sort(compareForDispatch);
      return new Map(queued.map((j, i) => [j.job_id, i + 1]));
    });
    this.nextQueueOrder = next;
    this.queueOrderRunning = next.catch(() => {});
    return next;
  }

  /**
   * The job rendered by `render`, answered as soon as it differs from the client's copy
   * (`If-None-Match`) or after `waitMs`; see {@link longPoll}.
   */
  watch<T>(
    jobId: string,
    render: (job: JobRecord) => Promise<T> | T,
    request: {
      ifNoneMatch: string | null;
      waitMs: number;
      abortSignal?: AbortSignal;
      versionOf?: (body: T) => unknown;
    },
  ) {
    // A change written by this process comes with the record it wrote: rendered without a read.
    let written: JobRecord | undefined;
    return longPoll({
      render: async () => {
        const hint = written;
        written = undefined;
        return render(hint ?? (await this.get(jobId)));
      },
      versionOf: request.versionOf,
      ifNoneMatch: request.ifNoneMatch,
      waitMs: request.waitMs,
      subscribe: (listener) =>
        this.o.jobs.onChange(jobId, (job) => {
          written = job;
          listener();
        }),
      // Other replicas' writes and queue movement are not signalled here; re-read for them.
      recheckMs: STATUS_RECHECK_MS,
      signal: request.abortSignal,
    });
  }

  async get(jobId: string): Promise<JobRecord> {
    const job = await this.o.jobs.get(jobId);
    if (!job) throw new NotFoundError(`no job with id '${jobId}'`);
    return job;
  }

  /**
   * One page of jobs, newest first (ties by job id, so the order is total): at most `limit`, after
   * the `after` position (a previous page's last job), and whether more follow.
   */
  async list(filter: {
    status?: JobStatus;
    limit: number;
    after?: { created_at: string; job_id: string };
  }): Promise<{ jobs: JobRecord[]; more: boolean }> {
    const out: JobRecord[] = [];
    const after = filter.after;
    for await (const j of this.o.jobs.list(filter.status ? [filter.status] : undefined)) {
      if (after && (j.created_at > after.created_at || (j.created_at === after.created_at && j.job_id >= after.job_id)))
        continue;
      out.push(j);
    }
    out.sort((a, b) => b.created_at.localeCompare(a.created_at) || b.job_id.localeCompare(a.job_id));
    return { jobs: out.slice(0, filter.limit), more: out.length > filter.limit };
  }

  /**
   * Cancels a queued or active job (its shards stop; status `cancelled`). A job that has already
   * finished — also one that finishes while this runs — is left as it is, results and all: the
   * answer says which status it ended in.
   */
  async cancel(jobId: string): Promise<{ job_id: string; status: JobStatus }> {
    return this.cancelRecord(await this.get(jobId));
  }

  /** {@link cancel} of a job already read. */
  private async cancelRecord(job: JobRecord): Promise<{ job_id: string; status: JobStatus }> {
    const jobId = job.job_id;
    if (TERMINAL_STATUSES.has(job.status)) return { job_id: jobId, status: job.status };
    const updated = await this.o.jobs.update(jobId, (j) =>
      TERMINAL_STATUSES.has(j.status)
        ? undefined
        : {
            ...j,
            status: "cancelled",
            cancel_requested: true,
            updated_at: new Date().toISOString(),
            completed_at: new Date().toISOString(),
          },
    );
    if (!updated) throw new NotFoundError(`no job with id '${jobId}'`);
    if (updated.status !== "cancelled") return { job_id: jobId, status: updated.status };
    this.o.dispatcher.cancel(jobId);
    // A queued job never reaches the dispatcher, which would let go of its release.
    if (job.status === "queued") await this.o.catalog.release(job.db_name, job.db_version, jobId).catch(() => {});
    this.o.logger.info("job cancelled", { job_id: jobId });
    return { job_id: jobId, status: "cancelled" };
  }

  /**
   * DELETE: an active or queued job is cancelled ({@link cancel}); a finished job is deleted with
   * its artifacts. A job that finishes while being cancelled is kept (`deleted: false`).
   */
  async cancelOrDelete(jobId: string): Promise<{ job_id: string; status: JobStatus; deleted: boolean }> {
    const job = await this.get(jobId);
    if (!TERMINAL_STATUSES.has(job.status)) return { ...(await this.cancelRecord(job)), deleted: false };
    await this.o.artifacts.deleteJob(jobId);
    if (job.idempotency_key) await this.o.jobs.releaseKey(job.idempotency_key, jobId);
    await this.o.jobs.delete(jobId);
    this.o.logger.info("job deleted", { job_id: jobId });
    return { job_id: jobId, status: job.status, deleted: true };
  }
}
