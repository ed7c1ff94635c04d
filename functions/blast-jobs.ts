import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { FASTA_LIMITS } from "../shared/blast/fasta.js";
import type { DashboardJob } from "../shared/dashboard/dashboard-jobs.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import {
  dashboardJobListQuerySchema,
  dashboardJobPathSchema,
  dashboardResultsQuerySchema,
  dashboardSubmitSchema,
} from "../shared/dashboard/schemas.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody, parsePath, parseQuery } from "../shared/http/validation.js";
import { dashboardJobService } from "./composition/dashboard-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** A dashboard job as the routes show it (never its request fingerprint or cancel flag). */
function jobView(job: DashboardJob) {
  return {
    job_id: job.job_id,
    job_id_kind: "dashboard",
    openapi_job_id: job.openapi_job_id,
    status: job.status,
    title: job.title,
    program: job.program,
    db: job.db,
    execution_profile: job.execution_profile,
    priority: job.priority,
    options: job.blast_options,
    query_count: job.query_count,
    created_by: job.created_by,
    created_at: job.created_at,
    updated_at: job.updated_at,
    error: job.error,
    progress: job.progress,
    operation_status_url: `/api/operations/${job.operation_id}`,
  };
}

/** The §2.7 envelope: the job's fields plus job_id_kind, status, operation, target, admission, meta. */
function envelope(job: DashboardJob, operation: OperationView, requestId: string) {
  return {
    ...jobView(job),
    operation,
    target: {
      resource_type: "blast_job",
      job_id_kind: "dashboard",
      dashboard_job_id: job.job_id,
      openapi_job_id: job.openapi_job_id,
    },
    admission: { decision: "accepted", reason: "validated and queued for submission to the job API" },
    meta: { request_id: requestId },
  };
}

route(
  "blastJobsSubmit",
  { methods: ["POST"], route: "blast/jobs", role: "Contributor", durable: true },
  async (request, scope) => {
    const body = await parseJsonBody(request, dashboardSubmitSchema, FASTA_LIMITS.maxBytes * 2);
    const { job, operation } = await dashboardJobService(scope).submit(callerOf(scope), body);
    return jsonResult(200, envelope(job, operation, scope.requestId), scope.requestId);
  },
);

route("listBlastJobs", { methods: ["GET"], route: "blast/jobs", role: "Reader" }, async (request, scope) => {
  const query = parseQuery(request, dashboardJobListQuerySchema);
  const { jobs, total } = await dashboardJobService(scope).list({
    status: query.status,
    page: query.page,
    pageSize: query.page_size,
  });
  return jsonResult(
    200,
    {
      jobs: jobs.map(jobView),
      page: query.page,
      page_size: query.page_size,
      total,
      meta: { request_id: scope.requestId },
    },
    scope.requestId,
  );
});

route("getBlastJob", { methods: ["GET"], route: "blast/jobs/{uuid}", role: "Reader" }, async (request, scope) => {
  const { uuid } = parsePath(request, dashboardJobPathSchema);
  const job = await dashboardJobService(scope).get(uuid);
  return jsonResult(200, { ...jobView(job), meta: { request_id: scope.requestId } }, scope.requestId);
});

route(
  "cancelBlastJob",
  { methods: ["DELETE"], route: "blast/jobs/{uuid}", role: "Contributor", durable: true },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { job, operation } = await dashboardJobService(scope).cancel(callerOf(scope), uuid, {
      requestId: scope.requestId,
    });
    return jsonResult(200, envelope(job, operation, scope.requestId), scope.requestId);
  },
);

route(
  "blastJobResults",
  { methods: ["GET"], route: "blast/jobs/{uuid}/results", role: "Reader" },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { content } = parseQuery(request, dashboardResultsQuerySchema);
    const results = await dashboardJobService(scope).openResults(uuid, content);
    const headers: Record<string, string> = { "X-Request-Id": scope.requestId };
    if (results.contentType) headers["content-type"] = results.contentType;
    if (results.contentDisposition) headers["content-disposition"] = results.contentDisposition;
    // Bytes stream through; no storage URL reaches the browser.
    return {
      status: 200,
      headers,
      body: Readable.fromWeb(results.body as NodeReadableStream<Uint8Array>) as unknown as AsyncIterable<Uint8Array>,
    };
  },
);
