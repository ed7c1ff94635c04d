import type { ContainerClient } from "@azure/storage-blob";
import { odata, type TableClient } from "@azure/data-tables";
import { isStatus, packText, unpackText } from "../storage/table-text.js";
import { openBlobContainer } from "../storage/blob-container.js";
import { openTableClient, type StorageTarget } from "../storage/storage-connection.js";
import { ConflictError } from "../errors.js";
import type { StoringProgress } from "../jobs/model.js";

/** A search as the dashboard tracks it (UUID), linked to its job-API job once submitted. */
export interface DashboardJob {
  job_id: string;
  openapi_job_id: string | null;
  operation_id: string;
  status: string;
  title: string;
  program: string;
  db: string;
  execution_profile: "standard" | "sharded";
  priority: number | string | null;
  blast_options: Record<string, unknown>;
  query_count: number;
  created_by: { oid: string; name: string };
  created_at: string;
  updated_at: string;
  cancel_requested: boolean;
  error: string;
  progress: { total: number; succeeded: number; failed: number; active: number } | null;
  /** The merged result's size once the search completed (from the job API), shown before a download. */
  result_bytes?: { xml: number; gzip: number } | null;
  /** While the job API stores the results (after BLAST, before completed): merged XML bytes stored so far. */
  storing?: StoringProgress | null;
  /**
   * When the dashboard first saw the job in each status (ISO 8601), so the job page shows every
   * step's time after a reload too. Absent on jobs stored before it was kept.
   */
  status_times?: Record<string, string>;
  /** What the idempotency key binds to (the search-defining fields); never shown. */
  request_fingerprint?: string;
}

export const TERMINAL_JOB_STATES = new Set(["completed", "failed", "cancelled"]);

/** `job`'s status times with `status` reached at `at` (a status seen before keeps its first time). */
export function withStatusTime(job: DashboardJob, status: string, at: string): Record<string, string> {
  const times = { ...job.status_times };
  times[status] ??= at;
  return times;
}

/** Dashboard jobs in Table storage (ETag concurrency) and their queries in Blob storage. */
export class DashboardJobStore {
  private readonly queries: Promise<ContainerClient>;

  constructor(
    private readonly table: TableClient,
    queries: ContainerClient | Promise<ContainerClient>,
  ) {
    this.queries = Promise.resolve(queries);
  }

  /** The store in `storage` (an Azurite connection string, or the app's storage connection). */
  static fromConnectionString(storage: StorageTarget): DashboardJobStore {
    return new DashboardJobStore(
      openTableClient(storage, "dashboardjobs"),
      openBlobContainer(storage, "dashboard-queries"),
    );
  }

  private ready: Promise<void> | undefined;
  private init(): Promise<void> {
    this.ready ??= Promise.all([
      this.table.createTable(),
      this.queries.then((queries) => queries.createIfNotExists()),
    ]).then(() => undefined);
    return this.ready;
  }

  private entity(job: DashboardJob) {
    return {
      partitionKey: "job",
      rowKey: job.job_id,
      status: job.status,
      created_at: job.created_at,
      ...packText("doc", JSON.stringify(job)),
    };
  }

  /**
   * Creates the job and stores its query; on a retry with the same idempotency key (the same job
   * id) answers the stored job instead (see {@link acceptRetry}).
   */
  async create(job: DashboardJob, queryFasta: string): Promise<{ job: DashboardJob; created: boolean }> {
    await this.init();
    try {
      await this.table.createEntity(this.entity(job));
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      const stored = await this.get(job.job_id);
      if (!stored) throw error;
      return { job: await this.acceptRetry(stored, job, queryFasta), created: false };
    }
    const data = Buffer.from(queryFasta);
    await (await this.queryBlob(job.job_id)).upload(data, data.length);
    return { job, created: true };
  }

  /**
   * Answers `stored` for a retry (`request`) of the submit that created it. A retry must be the
   * same request: another query or other search fields under the same key are a ConflictError,
   * and never replace what the first request stored. A first attempt may have stopped before
   * storing its query: the retry stores it, never over one stored.
   */
  async acceptRetry(stored: DashboardJob, request: DashboardJob, queryFasta: string): Promise<DashboardJob> {
    await this.init();
    // Jobs stored before fingerprints were kept cannot be told apart: treated as the same request.
    if (stored.request_fingerprint !== undefined && stored.request_fingerprint !== request.request_fingerprint) {
      throw new ConflictError(
        "idempotency_key was already used for a different request; use a new key for a new search",
      );
    }
    const data = Buffer.from(queryFasta);
    try {
      await (await this.queryBlob(stored.job_id)).upload(data, data.length, { conditions: { ifNoneMatch: "*" } });
    } catch (uploadError) {
      if (!isStatus(uploadError, 409)) throw uploadError;
    }
    return stored;
  }

  private async queryBlob(jobId: string) {
    return (await this.queries).getBlockBlobClient(`${jobId}.fa`);
  }

  async get(jobId: string): Promise<DashboardJob | undefined> {
    await this.init();
    try {
      return JSON.parse(
        unpackText(await this.table.getEntity<Record<string, unknown>>("job", jobId), "doc"),
      ) as DashboardJob;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async query(jobId: string): Promise<string> {
    await this.init();
    return (await (await this.queryBlob(jobId)).downloadToBuffer()).toString("utf8");
  }

  /** Read-modify-write with the entity's ETag; re-runs `change` on a concurrent update. */
  async update(
    jobId: string,
    change: (job: DashboardJob) => DashboardJob | undefined,
  ): Promise<DashboardJob | undefined> {
    await this.init();
    for (let attempt = 0; attempt < 20; attempt++) {
      let entity: Record<string, unknown>;
      try {
        entity = await this.table.getEntity<Record<string, unknown>>("job", jobId);
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
      const current = JSON.parse(unpackText(entity, "doc")) as DashboardJob;
      const next = change(current);
      if (!next) return current;
      next.updated_at = new Date().toISOString();
      if (next.status !== current.status) next.status_times = withStatusTime(current, next.status, next.updated_at);
      try {
        await this.table.updateEntity(this.entity(next), "Replace", { etag: String(entity.etag) });
        return next;
      } catch (error) {
        if (!isStatus(error, 412)) throw error;
      }
    }
    throw new Error(`dashboard job ${jobId}: too many concurrent updates`);
  }

  /** Newest first, optionally filtered by status; `page` is 1-based. */
  async list(filter: {
    status?: string;
    page: number;
    pageSize: number;
  }): Promise<{ jobs: DashboardJob[]; total: number }> {
    await this.init();
    const clauses = [odata`PartitionKey eq ${"job"}`];
    if (filter.status) clauses.push(odata`status eq ${filter.status}`);
    const all: DashboardJob[] = [];
    for await (const entity of this.table.listEntities<Record<string, unknown>>({
      queryOptions: { filter: clauses.join(" and ") },
    })) {
      all.push(JSON.parse(unpackText(entity, "doc")) as DashboardJob);
    }
    all.sort((a, b) => b.created_at.localeCompare(a.created_at));
    const start = (filter.page - 1) * filter.pageSize;
    return { jobs: all.slice(start, start + filter.pageSize), total: all.length };
  }
}
