import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { odata, type TableClient } from "@azure/data-tables";
import { isStatus, packText, unpackText } from "../../shared/storage/table-text.js";
import { openTableClient, type StorageTarget } from "../../shared/storage/storage-connection.js";
import type { JobRecord, JobStatus } from "../../shared/jobs/model.js";

const PARTITION = "job";
const IDEMPOTENCY_PARTITION = "key";
const MAX_CONFLICT_RETRIES = 20;
/** Jobs whose last written version this process remembers (so an update can skip the read). */
const KNOWN_VERSIONS_LIMIT = 1000;
/** The event of every job's change (a job's own event is its id). */
const ANY_JOB = Symbol("any job");

export interface IdempotencyClaim {
  job_id: string;
  fingerprint: string;
  /** When the claim was taken (ISO); claims stored before it was kept have none. */
  claimed_at?: string;
}

function keyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/**
 * Job state in Table storage. Every write is a compare-and-swap on the entity's ETag, so the
 * dispatcher and a concurrent DELETE never overwrite each other's changes.
 */
export class JobStore {
  /**
   * The version of each job this process last wrote or read, with its ETag. An update first tries
   * its change on that copy (one round trip instead of two); if anyone else changed the job since,
   * the ETag no longer matches and the update falls back to a fresh read.
   */
  private readonly known = new Map<string, { job: JobRecord; etag: string }>();
  /** The tail of each job's chain of in-process updates. */
  private readonly updating = new Map<string, Promise<void>>();
  /** Emits a job's id when this process changed it (long-polling status requests listen). */
  private readonly changes = new EventEmitter().setMaxListeners(0);

  constructor(
    private readonly jobs: TableClient,
    private readonly keys: TableClient,
  ) {}

  /** The store in `storage` (an Azurite connection string, or the job API's storage connection). */
  static fromConnectionString(storage: StorageTarget, prefix = "jobapi"): JobStore {
    // Fail over quickly when storage is down (the route answers 503); transient blips still retry.
    const options = { retryOptions: { maxRetries: 2, retryDelayInMs: 200, maxRetryDelayInMs: 1000 } };
    return new JobStore(
      openTableClient(storage, `${prefix}jobs`, options),
      openTableClient(storage, `${prefix}idempotency`, options),
    );
  }

  async init(): Promise<void> {
    await this.jobs.createTable();
    await this.keys.createTable();
  }

  private entity(job: JobRecord) {
    return {
      partitionKey: PARTITION,
      rowKey: job.job_id,
      status: job.status,
      priority: job.priority,
      created_at: job.created_at,
      ...packText("doc", JSON.stringify(job)),
    };
  }

  private remember(job: JobRecord, etag: string | undefined): void {
    this.known.delete(job.job_id);
    if (etag === undefined) return;
    this.known.set(job.job_id, { job: structuredClone(job), etag });
    if (this.known.size > KNOWN_VERSIONS_LIMIT) this.known.delete(this.known.keys().next().value as string);
  }

  /**
   * Stores a new job. A 409 is success when the stored job is this one: the SDK retried an insert
   * that had landed but whose answer was lost (job ids are random; another job never has this id).
   */
  async create(job: JobRecord): Promise<void> {
    let etag: string | undefined;
    try {
      etag = (await this.jobs.createEntity(this.entity(job))).etag;
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      const stored = await this.getWithEtag(job.job_id);
      if (!stored || JSON.stringify(stored.job) !== JSON.stringify(job)) throw error;
      etag = stored.etag;
    }
    this.remember(job, etag);
    this.changed(job.job_id, job);
  }

  /**
   * Calls `listener` with the record whenever this process writes the job (undefined once it is
   * deleted); returns the unsubscribe. Writes by other processes are not seen here: a waiter
   * re-reads on a timer too.
   */
  onChange(jobId: string, listener: (job: JobRecord | undefined) => void): () => void {
    this.changes.on(jobId, listener);
    return () => this.changes.off(jobId, listener);
  }

  /** Like {@link onChange}, for every job this process writes. */
  onAnyChange(listener: (jobId: string, job: JobRecord | undefined) => void): () => void {
    this.changes.on(ANY_JOB, listener);
    return () => this.changes.off(ANY_JOB, listener);
  }

  private changed(jobId: string, job: JobRecord | undefined): void {
    this.changes.emit(jobId, job);
    this.changes.emit(ANY_JOB, jobId, job);
  }

  async get(jobId: string): Promise<JobRecord | undefined> {
    return (await this.getWithEtag(jobId))?.job;
  }

  private async getWithEtag(jobId: string): Promise<{ job: JobRecord; etag: string } | undefined> {
    try {
      const e = await this.jobs.getEntity<Record<string, unknown>>(PARTITION, jobId);
      const found = { job: JSON.parse(unpackText(e, "doc")) as JobRecord, etag: String(e.etag) };
      this.remember(found.job, found.etag);
      return found;
    } catch (error) {
      if (isStatus(error, 404)) {
        this.known.delete(jobId);
        return undefined;
      }
      throw error;
    }
  }

  /**
   * Read-modify-write with optimistic concurrency: `mutate` sees the current job and returns the
   * new one (or undefined to leave it); on a concurrent change it runs again on the fresh copy.
   */
  async update(jobId: string, mutate: (job: JobRecord) => JobRecord | undefined): Promise<JobRecord | undefined> {
    // This process's updates of one job run one after another: concurrent shard updates would
    // otherwise all conflict on the same ETag. Other processes are still handled by the ETag.
    const previous = this.updating.get(jobId) ?? Promise.resolve();
    const run = previous.then(() => this.compareAndSwap(jobId, mutate));
    const settled = run.then(
      () => {},
      () => {},
    );
    this.updating.set(jobId, settled);
    void settled.then(() => {
      if (this.updating.get(jobId) === settled) this.updating.delete(jobId);
    });
    return run;
  }

  private async compareAndSwap(
    jobId: string,
    mutate: (job: JobRecord) => JobRecord | undefined,
  ): Promise<JobRecord | undefined> {
    /** The document of the write refused last with 412, which may have landed after all. */
    let refused: string | undefined;
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt++) {
      // The remembered copy may be stale: a no-op decided on it is checked against a fresh read.
      const remembered = attempt === 0 ? this.known.get(jobId) : undefined;
      const current = remembered ?? (await this.getWithEtag(jobId));
      if (!current) return undefined;
      // The SDK retried a write whose answer was lost: the first attempt landed, the retry found
      // the ETag changed (by that very write). The stored job is exactly ours: done, not again.
      if (refused !== undefined && JSON.stringify(current.job) === refused) {
        this.changed(jobId, current.job);
        return current.job;
      }
      refused = undefined;
      const next = mutate(structuredClone(current.job));
      if (!next) {
        if (remembered) continue;
        return current.job;
      }
      try {
        const updated = await this.jobs.updateEntity(this.entity(next), "Replace", { etag: current.etag });
        this.remember(next, updated.etag);
        this.changed(jobId, next);
        return next;
      } catch (error) {
        this.known.delete(jobId);
        if (isStatus(error, 404)) return undefined;
        if (!isStatus(error, 412)) throw error;
        refused = JSON.stringify(next);
      }
    }
    throw new Error(`job ${jobId}: too many concurrent updates`);
  }

  async *list(statuses?: readonly JobStatus[]): AsyncIterable<JobRecord> {
    const clauses = [odata`PartitionKey eq ${PARTITION}`];
    if (statuses && statuses.length > 0) clauses.push(`(${statuses.map((s) => odata`status eq ${s}`).join(" or ")})`);
    for await (const e of this.jobs.listEntities<Record<string, unknown>>({
      queryOptions: { filter: clauses.join(" and ") },
    })) {
      yield JSON.parse(unpackText(e, "doc")) as JobRecord;
    }
  }

  async delete(jobId: string): Promise<void> {
    this.known.delete(jobId);
    await this.jobs.deleteEntity(PARTITION, jobId).catch((error: unknown) => {
      if (!isStatus(error, 404)) throw error;
    });
    this.changed(jobId, undefined);
  }

  /**
   * Claims an idempotency key for a job; when another job holds it, returns that claim instead. A
   * claim already naming this job is this claim (an insert retried after its answer was lost).
   */
  async claimKey(
    key: string,
    claim: IdempotencyClaim,
  ): Promise<{ claimed: true } | { claimed: false; holder: IdempotencyClaim; etag: string }> {
    const rowKey = keyHash(key);
    for (let attempt = 0; attempt < MAX_CONFLICT_RETRIES; attempt++) {
      try {
        await this.keys.createEntity({ partitionKey: IDEMPOTENCY_PARTITION, rowKey, ...claim });
        return { claimed: true };
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
      }
      try {
        const e = await this.keys.getEntity<Record<string, unknown>>(IDEMPOTENCY_PARTITION, rowKey);
        const holder: IdempotencyClaim = { job_id: String(e.job_id), fingerprint: String(e.fingerprint) };
        if (typeof e.claimed_at === "string") holder.claimed_at = e.claimed_at;
        if (holder.job_id === claim.job_id) return { claimed: true };
        return { claimed: false, holder, etag: String(e.etag) };
      } catch (error) {
        // Released between the two calls (its submit failed, or its job was deleted): claim again.
        if (!isStatus(error, 404)) throw error;
      }
    }
    throw new Error("idempotency key: too many concurrent claims");
  }

  /** Moves a key held by a finished job to a new one; false when someone else moved it first. */
  async reassignKey(key: string, claim: IdempotencyClaim, etag: string): Promise<boolean> {
    try {
      await this.keys.updateEntity({ partitionKey: IDEMPOTENCY_PARTITION, rowKey: keyHash(key), ...claim }, "Replace", {
        etag,
      });
      return true;
    } catch (error) {
      if (isStatus(error, 412) || isStatus(error, 404)) return false;
      throw error;
    }
  }

  async releaseKey(key: string, jobId: string): Promise<void> {
    const rowKey = keyHash(key);
    try {
      const e = await this.keys.getEntity<Record<string, unknown>>(IDEMPOTENCY_PARTITION, rowKey);
      if (String(e.job_id) === jobId)
        await this.keys.deleteEntity(IDEMPOTENCY_PARTITION, rowKey, { etag: String(e.etag) });
    } catch (error) {
      if (!isStatus(error, 404) && !isStatus(error, 412)) throw error;
    }
  }

  async ping(): Promise<void> {
    // A one-row query, not Get Table ACL: ACL operations are not available with Microsoft Entra ID
    // authorization, so with the managed identity that probe could never answer "ready".
    const rows = this.jobs.listEntities({
      queryOptions: { filter: odata`PartitionKey eq ${"~ping"}`, select: ["PartitionKey"] },
    });
    await rows
      .byPage({ maxPageSize: 1 })
      .next()
      .catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
  }
}
