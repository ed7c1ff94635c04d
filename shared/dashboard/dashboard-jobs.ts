import { BlobServiceClient, type ContainerClient } from "@azure/storage-blob";
import { odata, TableClient } from "@azure/data-tables";
import { isStatus, packText, unpackText } from "../storage/table-text.js";

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
}

export const TERMINAL_JOB_STATES = new Set(["completed", "failed", "cancelled"]);

/** Dashboard jobs in Table storage (ETag concurrency) and their queries in Blob storage. */
export class DashboardJobStore {
  constructor(
    private readonly table: TableClient,
    private readonly queries: ContainerClient,
  ) {}

  static fromConnectionString(connectionString: string): DashboardJobStore {
    return new DashboardJobStore(
      TableClient.fromConnectionString(connectionString, "dashboardjobs", { allowInsecureConnection: true }),
      BlobServiceClient.fromConnectionString(connectionString).getContainerClient("dashboard-queries"),
    );
  }

  private ready: Promise<void> | undefined;
  private init(): Promise<void> {
    this.ready ??= Promise.all([this.table.createTable(), this.queries.createIfNotExists()]).then(() => undefined);
    return this.ready;
  }

  private entity(job: DashboardJob) {
    return { partitionKey: "job", rowKey: job.job_id, status: job.status, created_at: job.created_at, ...packText("doc", JSON.stringify(job)) };
  }

  /** Creates the job; false when a job with this id exists already (an idempotent retry). */
  async create(job: DashboardJob, queryFasta: string): Promise<boolean> {
    await this.init();
    const data = Buffer.from(queryFasta);
    await this.queries.getBlockBlobClient(`${job.job_id}.fa`).upload(data, data.length);
    try {
      await this.table.createEntity(this.entity(job));
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }

  async get(jobId: string): Promise<DashboardJob | undefined> {
    await this.init();
    try {
      const e = await this.table.getEntity<Record<string, unknown>>("job", jobId);
      return JSON.parse(unpackText(e, "doc")) as DashboardJob;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async query(jobId: string): Promise<string> {
    await this.init();
    return (await this.queries.getBlockBlobClient(`${jobId}.fa`).downloadToBuffer()).toString("utf8");
  }

  /** Read-modify-write with the entity's ETag; re-runs `change` on a concurrent update. */
  async update(jobId: string, change: (job: DashboardJob) => DashboardJob | undefined): Promise<DashboardJob | undefined> {
    await this.init();
    for (let attempt = 0; attempt < 20; attempt++) {
      let e: Record<string, unknown>;
      try {
        e = await this.table.getEntity<Record<string, unknown>>("job", jobId);
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
      const current = JSON.parse(unpackText(e, "doc")) as DashboardJob;
      const next = change(current);
      if (!next) return current;
      next.updated_at = new Date().toISOString();
      try {
        await this.table.updateEntity(this.entity(next), "Replace", { etag: String(e.etag) });
        return next;
      } catch (error) {
        if (!isStatus(error, 412)) throw error;
      }
    }
    throw new Error(`dashboard job ${jobId}: too many concurrent updates`);
  }

  /** Newest first, optionally filtered by status; `page` is 1-based. */
  async list(filter: { status?: string; page: number; pageSize: number }): Promise<{ jobs: DashboardJob[]; total: number }> {
    await this.init();
    const clauses = [odata`PartitionKey eq ${"job"}`];
    if (filter.status) clauses.push(odata`status eq ${filter.status}`);
    const all: DashboardJob[] = [];
    for await (const e of this.table.listEntities<Record<string, unknown>>({ queryOptions: { filter: clauses.join(" and ") } })) {
      all.push(JSON.parse(unpackText(e, "doc")) as DashboardJob);
    }
    all.sort((a, b) => b.created_at.localeCompare(a.created_at));
    const start = (filter.page - 1) * filter.pageSize;
    return { jobs: all.slice(start, start + filter.pageSize), total: all.length };
  }
}
