import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { PassThrough } from "node:stream";
import { createGunzip } from "node:zlib";
import yazl from "yazl";
import { z } from "zod";
import { renderTabular } from "../shared/blast/tabular.js";
import { jsonResult, type HttpResult } from "../shared/http/envelope.js";
import { ConflictError, NotFoundError } from "../shared/errors.js";
import { parseJsonBody, parseQuery } from "../shared/http/validation.js";
import type { ApiTokenService } from "../shared/secrets/api-tokens.js";
import type { ArtifactStore } from "./jobs/artifact-store.js";
import { type DatabaseCatalog, databaseSummary } from "../shared/databases/database-catalog.js";
import type { JobStore } from "./jobs/job-store.js";
import { type JobService, parseJobId } from "./jobs/job-service.js";
import { facadeStatus, JOB_STATUSES, type JobRecord, shardCounters } from "../shared/jobs/model.js";
import { facadeSubmitSchema, resultsQuerySchema, statusQuerySchema, submitRequestSchema } from "../shared/jobs/schemas.js";
import type { JobApiConfig } from "./config.js";
import type { JobApiRequest, Route } from "./http.js";
import { buildOpenApiDocument, JOB_API_VERSION } from "./openapi.js";

export interface JobApiDeps {
  config: JobApiConfig;
  service: JobService;
  jobs: JobStore;
  artifacts: ArtifactStore;
  catalog: DatabaseCatalog;
  tokens: ApiTokenService;
  blastVersion: () => Promise<string>;
  executorName: string;
  activeJobs: () => number;
}

const MERGED = "merged_results.out.gz";
const listQuery = z.object({
  status: z.enum(JOB_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

/** A result file the facade offers; ids are stable for the life of the job. */
interface ResultFile {
  file_id: string;
  filename: string;
  format: string;
  size_bytes: number;
  open: (signal: AbortSignal) => Promise<Readable | undefined>;
  contentType: string;
}

function seconds(from: string, to: string): number {
  if (!from || !to) return 0;
  return Math.max(0, Math.round((Date.parse(to) - Date.parse(from)) / 1000));
}

async function gunzipped(source: Readable | undefined): Promise<Readable | undefined> {
  // Larger chunks than the 16 KiB default cost less CPU per MB (measured on BLAST XML: 16 KiB
  // ~6 ms/MB, 128 KiB ~3.5, 1 MiB ~2.7); memory stays a few chunks per response.
  if (!source) return undefined;
  const gunzip = createGunzip({ chunkSize: 1024 * 1024 });
  // .pipe() does not forward errors; a failed download must end the response, not stall it.
  source.on("error", (error) => gunzip.destroy(error));
  return source.pipe(gunzip);
}

/** The job API's routes (spec §4.2), as factories over their dependencies. */
export function createJobApiRoutes(d: JobApiDeps): Route[] {
  const openapi = JSON.stringify(buildOpenApiDocument());
  const require = createRequire(import.meta.url);
  const swaggerDir = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  const DOC_ASSETS: Record<string, string> = {
    "swagger-ui.css": "text/css",
    "swagger-ui-bundle.js": "application/javascript",
    "swagger-ui-standalone-preset.js": "application/javascript",
    "favicon-32x32.png": "image/png",
  };

  function resultFiles(job: JobRecord): ResultFile[] {
    const files: ResultFile[] = [];
    if (job.status === "completed") {
      files.push({
        file_id: "merged-xml",
        filename: "merged_results.xml",
        format: "blast_xml",
        size_bytes: job.merged_xml_bytes,
        contentType: "application/xml",
        open: async (signal) => gunzipped(await d.artifacts.open(job.job_id, MERGED, signal)),
      });
      files.push({
        file_id: "merged-gz",
        filename: MERGED,
        format: "blast_xml_gzip",
        size_bytes: job.merged_bytes,
        contentType: "application/gzip",
        open: (signal) => d.artifacts.open(job.job_id, MERGED, signal),
      });
    }
    for (const s of job.shards) {
      if (s.state !== "succeeded") continue;
      files.push({
        file_id: `shard-${s.id}`,
        filename: `${s.id}.out.gz`,
        format: "blast_xml_gzip",
        size_bytes: s.output_bytes,
        contentType: "application/gzip",
        open: (signal) => d.artifacts.open(job.job_id, `shards/${s.id}.out.gz`, signal),
      });
    }
    return files;
  }

  /**
   * A status answer with an ETag; with `If-None-Match` it is 304 while unchanged, and `?wait=N`
   * holds the request up to N seconds for a change (long polling instead of a tight poll loop).
   */
  async function conditionalStatus<T>(
    req: JobApiRequest,
    requestId: string,
    render: (job: JobRecord) => T | Promise<T>,
    versionOf?: (body: T) => unknown,
  ): Promise<HttpResult> {
    const jobId = parseJobId(req.params.job_id);
    const { wait } = parseQuery(req, statusQuerySchema);
    const view = await d.service.watch(jobId, render, { ifNoneMatch: req.headers.get("if-none-match"), waitMs: wait * 1000, signal: req.signal, versionOf });
    if (view.notModified) return { status: 304, headers: { ETag: view.etag, "X-Request-Id": requestId } };
    return jsonResult(200, view.body, requestId, { ETag: view.etag });
  }

  function zipOf(entries: { name: string; open: () => Promise<Readable | undefined> }[]): PassThrough {
    const zip = new yazl.ZipFile();
    for (const entry of entries) {
      // Stored, not deflated: the entries are gzip files already. Opened one at a time, on demand.
      zip.addReadStreamLazy(entry.name, { compress: false }, (cb) => {
        entry.open().then(
          (stream) => (stream ? cb(null, stream) : cb(new Error(`${entry.name} disappeared`), new PassThrough())),
          (error: unknown) => cb(error, new PassThrough()),
        );
      });
    }
    zip.end();
    const out = new PassThrough();
    zip.outputStream.on("error", (e) => out.destroy(e)).pipe(out);
    return out;
  }

  function facadeView(job: JobRecord) {
    const c = shardCounters(job.shards);
    const end = job.completed_at || new Date().toISOString();
    return {
      job_id: job.job_id,
      status: facadeStatus(job.status),
      created_at: job.created_at,
      updated_at: job.updated_at,
      completed_at: job.completed_at || null,
      blast_version: job.blast_version,
      db_name: job.db_name,
      db_version: job.db_version,
      elapsed_seconds: seconds(job.created_at, end),
      queue_wait_seconds: seconds(job.created_at, job.started_at || end),
      run_seconds: job.started_at ? seconds(job.started_at, end) : 0,
      external_correlation_id: job.external_correlation_id || null,
      execution: { shard_count: c.total, shards_succeeded: c.succeeded, shards_active: c.active, shards_failed: c.failed },
      error: job.error,
      result: { files: resultFiles(job).map(({ file_id, filename, format, size_bytes }) => ({ file_id, filename, format, size_bytes })) },
    };
  }

  const accepted = (replayed: boolean): { status: number; headers: Record<string, string> } =>
    replayed ? { status: 200, headers: { "Idempotent-Replayed": "true" } } : { status: 202, headers: {} };

  return [
    {
      method: "GET",
      path: "/openapi.json",
      public: true,
      handler: async (_req, { requestId }) => ({ status: 200, headers: { "Content-Type": "application/json", "X-Request-Id": requestId }, body: openapi }),
    },
    {
      method: "GET",
      path: "/docs",
      public: true,
      handler: async () => ({
        status: 200,
        headers: { "Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'" },
        body: `<!doctype html><html><head><meta charset="utf-8"><title>blastplane job API</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head><body><div id="swagger-ui"></div><script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/init.js"></script></body></html>`,
      }),
    },
    {
      method: "GET",
      path: "/docs/{asset}",
      public: true,
      handler: async (req): Promise<HttpResult> => {
        const asset = req.params.asset ?? "";
        if (asset === "init.js") {
          return {
            status: 200,
            headers: { "Content-Type": "application/javascript" },
            body: 'window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });',
          };
        }
        const type = DOC_ASSETS[asset];
        if (!type) throw new NotFoundError("not found");
        return { status: 200, headers: { "Content-Type": type, "Cache-Control": "public, max-age=3600" }, body: await readFile(path.join(swaggerDir, asset)) };
      },
    },
    {
      method: "GET",
      path: "/v1/health",
      public: true,
      handler: async (_req, { requestId }) => jsonResult(200, { status: "ok", version: JOB_API_VERSION }, requestId),
    },
    {
      method: "GET",
      path: "/v1/ready",
      public: true,
      handler: async (_req, { requestId, logger }) => {
        const checks: Record<string, string> = {};
        const probe = async (name: string, run: () => Promise<unknown>) => {
          try {
            await Promise.race([
              run(),
              new Promise((_, reject) => setTimeout(() => reject(new Error("no answer within 2 s")), 2000).unref()),
            ]);
            checks[name] = "ok";
          } catch (error) {
            logger.warn("readiness check failed", { check: name, error });
            checks[name] = "unavailable";
          }
        };
        await Promise.all([
          probe("storage", () => Promise.all([d.jobs.ping(), d.artifacts.ping()])),
          probe("blast", () => d.blastVersion()),
          probe("api_token", async () => {
            if (!(await d.tokens.state())) throw new Error("no API token configured");
          }),
        ]);
        const failing = Object.entries(checks).filter(([, v]) => v !== "ok").map(([k]) => k);
        if (failing.length > 0) {
          return { status: 503, headers: { "Content-Type": "application/json", "Retry-After": "5" }, jsonBody: { detail: `not ready: ${failing.join(", ")} unavailable`, request_id: requestId, checks } };
        }
        return jsonResult(200, { status: "ready", checks }, requestId);
      },
    },
    {
      method: "GET",
      path: "/v1/config",
      handler: async (_req, { requestId }) =>
        jsonResult(
          200,
          {
            version: JOB_API_VERSION,
            blast_version: await d.blastVersion(),
            executor: d.executorName,
            programs: ["blastn", "blastp", "blastx", "tblastn", "tblastx"],
            execution_profiles: ["standard", "sharded"],
            limits: {
              max_active_jobs: d.config.maxActiveJobs,
              max_queued_jobs: d.config.maxQueuedJobs,
              request_body_bytes: d.config.bodyLimitBytes,
              shard_concurrency: d.config.shardConcurrency,
              threads_per_shard: d.config.threadsPerShard,
            },
          },
          requestId,
        ),
    },
    {
      method: "GET",
      path: "/v1/cluster",
      handler: async (_req, { requestId }) =>
        jsonResult(
          200,
          {
            executor: d.executorName,
            status: "running",
            nodes: [{ name: os.hostname(), cpus: os.availableParallelism(), memory_bytes: d.config.nodeMemoryBytes }],
            active_jobs: d.activeJobs(),
            max_active_jobs: d.config.maxActiveJobs,
          },
          requestId,
        ),
    },
    {
      method: "GET",
      path: "/v1/databases",
      handler: async (_req, { requestId }) => {
        const entries = await d.catalog.list();
        return jsonResult(
          200,
          {
            databases: entries.map((e) => ({ ...databaseSummary(e), location: e.location })),
          },
          requestId,
        );
      },
    },
    {
      method: "GET",
      path: "/v1/jobs",
      handler: async (req, { requestId }) => {
        const q = parseQuery(req, listQuery);
        const jobs = await d.service.list({ status: q.status, limit: q.limit });
        return jsonResult(200, { jobs: await Promise.all(jobs.map(async (j) => d.service.status(j, await d.service.queuePosition(j)))) }, requestId);
      },
    },
    {
      method: "POST",
      path: "/v1/jobs",
      handler: async (req, { requestId }) => {
        const body = await parseJsonBody(req, submitRequestSchema, d.config.bodyLimitBytes);
        const outcome = await d.service.submit({ ...body, source: "external_api" });
        const { status, headers } = accepted(outcome.replayed);
        return jsonResult(status, d.service.acceptance(outcome.job, outcome.queuePosition), requestId, headers);
      },
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/status",
      handler: async (req, { requestId }) =>
        conditionalStatus(req, requestId, async (job) => d.service.status(job, await d.service.queuePosition(job))),
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/results",
      handler: async (req, { requestId }): Promise<HttpResult> => {
        const jobId = parseJobId(req.params.job_id);
        const { content } = parseQuery(req, resultsQuerySchema);
        const job = await d.service.get(jobId);
        const published = job.status === "completed";
        if (content === "full") {
          const shards = job.shards.filter((s) => s.state === "succeeded");
          if (shards.length === 0) throw new NotFoundError("no shard output is available yet; poll the job status");
          const body = zipOf(shards.map((s) => ({ name: `${s.id}.out.gz`, open: () => d.artifacts.open(jobId, `shards/${s.id}.out.gz`, req.signal) })));
          return { status: 200, headers: { "Content-Type": "application/zip", "Content-Disposition": `attachment; filename="${jobId}_full.zip"`, "X-Request-Id": requestId }, body };
        }
        if (!published) throw new NotFoundError("the merged result is not published yet; poll the job status, or try content=full");
        if (content === "merged") {
          const body = zipOf([{ name: MERGED, open: () => d.artifacts.open(jobId, MERGED, req.signal) }]);
          return { status: 200, headers: { "Content-Type": "application/zip", "Content-Disposition": `attachment; filename="${jobId}_merged.zip"`, "X-Request-Id": requestId }, body };
        }
        const xml = await gunzipped(await d.artifacts.open(jobId, MERGED, req.signal));
        if (!xml) throw new NotFoundError("the merged result is missing");
        if (content === "xml") return { status: 200, headers: { "Content-Type": "application/xml", "X-Request-Id": requestId }, body: xml };
        const tsv = new PassThrough();
        renderTabular(xml, tsv).then(
          () => tsv.end(),
          (error: unknown) => tsv.destroy(error instanceof Error ? error : new Error(String(error))),
        );
        return { status: 200, headers: { "Content-Type": "text/tab-separated-values; charset=utf-8", "X-Request-Id": requestId }, body: tsv };
      },
    },
    {
      method: "POST",
      path: "/v1/jobs/{job_id}/cancel",
      handler: async (req, { requestId }) => jsonResult(200, await d.service.cancel(parseJobId(req.params.job_id)), requestId),
    },
    {
      method: "DELETE",
      path: "/v1/jobs/{job_id}",
      handler: async (req, { requestId }) => jsonResult(200, await d.service.cancelOrDelete(parseJobId(req.params.job_id)), requestId),
    },
    {
      method: "POST",
      path: "/api/v1/facade/submit",
      handler: async (req, { requestId }) => {
        const body = await parseJsonBody(req, facadeSubmitSchema, d.config.bodyLimitBytes);
        const { options, ...rest } = body;
        const outcome = await d.service.submit({ ...rest, blast_options: options, source: "facade" });
        const { status, headers } = accepted(outcome.replayed);
        const job = outcome.job;
        return jsonResult(
          status,
          {
            job_id: job.job_id,
            status: facadeStatus(job.status),
            created_at: job.created_at,
            db_name: job.db_name,
            db_version: job.db_version,
            submission_source: job.submission_source,
            external_correlation_id: body.external_correlation_id ?? (job.external_correlation_id || null),
            queue_position: outcome.queuePosition,
          },
          requestId,
          headers,
        );
      },
    },
    {
      method: "GET",
      path: "/api/v1/facade/jobs/{job_id}",
      // Its clock-derived seconds change by themselves; the (weak) ETag follows the job instead.
      handler: async (req, { requestId }) =>
        conditionalStatus(req, requestId, facadeView, ({ elapsed_seconds, queue_wait_seconds, run_seconds, ...stable }) => stable),
    },
    {
      method: "GET",
      path: "/api/v1/facade/jobs/{job_id}/files/{file_id}",
      handler: async (req, { requestId }): Promise<HttpResult> => {
        const job = await d.service.get(parseJobId(req.params.job_id));
        const fileId = req.params.file_id ?? "";
        if (!/^[a-z0-9-]{1,64}$/.test(fileId)) throw new NotFoundError(`no file with id '${fileId.slice(0, 64)}'`);
        if (job.status !== "completed") throw new ConflictError(`job ${job.job_id} is ${facadeStatus(job.status)}; files are available once it is success`);
        const file = resultFiles(job).find((f) => f.file_id === fileId);
        if (!file) throw new NotFoundError(`no file with id '${fileId}'`);
        const body = await file.open(req.signal);
        if (!body) throw new NotFoundError(`file '${fileId}' is missing`);
        return {
          status: 200,
          headers: { "Content-Type": file.contentType, "Content-Disposition": `attachment; filename="${file.filename}"`, "X-Request-Id": requestId },
          body,
        };
      },
    },
  ];
}
