import {
  errorResponse,
  headerRef,
  jsonBody,
  ok,
  parametersOf,
  retryLater,
  validationFailed,
} from "../shared/http/openapi.js";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { FASTA_LIMITS } from "../shared/blast/fasta.js";
import type { DashboardJob } from "../shared/dashboard/dashboard-jobs.js";
import type { JobApiResults } from "../shared/dashboard/job-api-client.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import {
  dashboardJobListQuerySchema,
  dashboardJobPathSchema,
  dashboardResultsQuerySchema,
  dashboardSubmitSchema,
} from "../shared/dashboard/schemas.js";
import { jsonResult } from "../shared/http/envelope.js";
import { resultPageQuerySchema } from "../shared/jobs/result-page-schemas.js";
import { z } from "zod";
import { parseJsonBody, parsePath, parseQuery } from "../shared/http/validation.js";
import { dashboardJobService, downloadTickets } from "./composition/dashboard-deps.js";
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
    status_times: job.status_times ?? {},
    error: job.error,
    progress: job.progress,
    result_bytes: job.result_bytes ?? null,
    storing: job.storing ?? null,
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
  {
    methods: ["POST"],
    route: "blast/jobs",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Submit a search",
      description:
        "Validates and records the job, then starts its submission to the job API as an operation; the answer is the §2.7 envelope. An idempotency_key repeats the first answer.",
      requestBody: jsonBody("DashboardSubmitRequest"),
      responses: {
        ...ok("accepted: the job and its operation", "DashboardJobEnvelope"),
        "400": errorResponse("malformed JSON"),
        "409": errorResponse("idempotency_key bound to a different request"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
        "503": retryLater("storage or the durable task hub is unavailable"),
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, dashboardSubmitSchema, FASTA_LIMITS.maxBytes * 2);
    const { job, operation } = await dashboardJobService(scope).submit(callerOf(scope), body);
    return jsonResult(200, envelope(job, operation, scope.requestId), scope.requestId);
  },
);

route(
  "listBlastJobs",
  {
    methods: ["GET"],
    route: "blast/jobs",
    role: "Reader",
    openapi: {
      summary: "List searches, newest first, one page at a time",
      parameters: parametersOf(dashboardJobListQuerySchema, "query"),
      responses: {
        ...ok("one page of jobs and the total", "DashboardJobList"),
        "400": errorResponse("an invalid query parameter"),
      },
    },
  },
  async (request, scope) => {
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
  },
);

route(
  "getBlastJob",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}",
    role: "Reader",
    openapi: {
      summary: "One search",
      parameters: parametersOf(dashboardJobPathSchema, "path"),
      responses: {
        ...ok("the job", "DashboardJob"),
        "400": errorResponse("not a dashboard job UUID"),
        "404": errorResponse("unknown job"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const job = await dashboardJobService(scope).get(uuid);
    return jsonResult(200, { ...jobView(job), meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

route(
  "cancelBlastJob",
  {
    methods: ["DELETE"],
    route: "blast/jobs/{uuid}",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Cancel a search",
      parameters: parametersOf(dashboardJobPathSchema, "path"),
      responses: {
        ...ok("the job and its operation (a finished job is left as it is)", "DashboardJobEnvelope"),
        "400": errorResponse("not a dashboard job UUID"),
        "404": errorResponse("unknown job"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { job, operation } = await dashboardJobService(scope).cancel(callerOf(scope), uuid, {
      requestId: scope.requestId,
    });
    return jsonResult(200, envelope(job, operation, scope.requestId), scope.requestId);
  },
);

/** The media types a results download answers, by `content` (OpenAPI). */
const RESULTS_MEDIA_TYPES = {
  "application/xml": { schema: { type: "string", format: "binary" } },
  "text/tab-separated-values": { schema: { type: "string" } },
  "application/zip": { schema: { type: "string", format: "binary" } },
};

/**
 * A results download as the response: its media type, one file name for every content (the job
 * API names only its ZIPs, after its own id), the bytes streamed through — no storage URL reaches
 * the browser.
 */
function resultsDownload(results: JobApiResults & { fileName: string }, headers: Record<string, string>) {
  return {
    status: 200,
    headers: {
      ...headers,
      ...(results.contentType ? { "content-type": results.contentType } : {}),
      "content-disposition": `attachment; filename="${results.fileName}"`,
    },
    body: Readable.fromWeb(results.body as NodeReadableStream<Uint8Array>) as unknown as AsyncIterable<Uint8Array>,
  };
}

route(
  "blastJobResults",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}/results",
    role: "Reader",
    openapi: {
      summary: "Download a search's results (streamed through; no storage URL)",
      parameters: [
        ...parametersOf(dashboardJobPathSchema, "path"),
        ...parametersOf(dashboardResultsQuerySchema, "query"),
      ],
      responses: {
        "200": {
          description: "xml: BLAST XML; tabular: outfmt 6 text; full, merged: ZIP",
          headers: { "Content-Disposition": headerRef("ContentDisposition") },
          content: RESULTS_MEDIA_TYPES,
        },
        "400": errorResponse("not a dashboard job UUID, or an unknown content value"),
        "404": errorResponse("unknown job, or no results yet"),
        "502": errorResponse("the job API failed to answer"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { content } = parseQuery(request, dashboardResultsQuerySchema);
    return resultsDownload(await dashboardJobService(scope).openResults(uuid, content), {
      "X-Request-Id": scope.requestId,
    });
  },
);

// Streamed downloads (issue 23): the page gets a single-use ticket with its token, then gives the
// browser a plain link, so a multi-GB result goes to disk as it arrives instead of into memory.
const downloadQuerySchema = dashboardResultsQuerySchema.extend({
  ticket: z.string().max(200).describe("a ticket from POST …/results/ticket (single use, 60 s)"),
});
/** A ticket and its link are credentials for a minute: never kept by browsers or proxies. */
const NO_STORE = { "Cache-Control": "no-store" };

route(
  "blastJobResultsTicket",
  {
    methods: ["POST"],
    route: "blast/jobs/{uuid}/results/ticket",
    role: "Reader",
    openapi: {
      summary: "A single-use link to download a search's results without the bearer header (streamed to disk)",
      description:
        "The answer's download_url (relative to the dashboard) downloads the content once, within 60 s of issue, with no Authorization header: a browser link. Only the ticket's digest is stored.",
      parameters: [
        ...parametersOf(dashboardJobPathSchema, "path"),
        ...parametersOf(dashboardResultsQuerySchema, "query"),
      ],
      responses: {
        ...ok("the ticket, its expiry and the download link (Cache-Control: no-store)", "DownloadTicket"),
        "400": errorResponse("not a dashboard job UUID, or an unknown content value"),
        "404": errorResponse("unknown job"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { content } = parseQuery(request, dashboardResultsQuerySchema);
    await dashboardJobService(scope).get(uuid);
    const issued = await downloadTickets().issue(callerOf(scope).oid, uuid, content);
    const query = new URLSearchParams({ content, ticket: issued.ticket });
    return jsonResult(
      200,
      {
        ...issued,
        download_url: `/api/blast/jobs/${uuid}/results/download?${query}`,
        meta: { request_id: scope.requestId },
      },
      scope.requestId,
      NO_STORE,
    );
  },
);

route(
  "blastJobResultsDownload",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}/results/download",
    openapi: {
      summary: "Download a search's results with a ticket instead of the bearer header (a browser link)",
      security: [],
      parameters: [...parametersOf(dashboardJobPathSchema, "path"), ...parametersOf(downloadQuerySchema, "query")],
      responses: {
        "200": {
          description: "xml: BLAST XML; tabular: outfmt 6 text; full, merged: ZIP — as an attachment",
          headers: { "Content-Disposition": headerRef("ContentDisposition") },
          content: RESULTS_MEDIA_TYPES,
        },
        "400": errorResponse("not a dashboard job UUID, or an unknown content value"),
        "401": errorResponse("no ticket, or one that is malformed, unknown, used, expired or for another download"),
        "404": errorResponse("unknown job, or no results yet"),
        "502": errorResponse("the job API failed to answer"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const { content, ticket } = parseQuery(request, downloadQuerySchema);
    await downloadTickets().redeem(ticket, uuid, content);
    return resultsDownload(await dashboardJobService(scope).openResults(uuid, content), {
      "X-Request-Id": scope.requestId,
      ...NO_STORE,
    });
  },
);

// Paged results (issue 23 item 2): the job API's pages, passed through. The results page reads
// these instead of the whole XML; they need the same role as the download.
const queryPathSchema = dashboardJobPathSchema.extend({
  n: z.coerce.number().int().min(1).max(100_000_000).describe("1-based position of the query in the result"),
});
const hitPathSchema = queryPathSchema.extend({
  k: z.coerce.number().int().min(1).max(100_000_000).describe("1-based rank of the hit within its query"),
});
const pageNotFound = errorResponse(
  "unknown job, no results yet, unknown query or hit, or a result stored without an index (download it instead)",
);

route(
  "blastJobResultQueries",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}/results/queries",
    role: "Reader",
    openapi: {
      summary: "Per-query summaries of a search's result, paged (read from its index, not the whole XML)",
      parameters: [...parametersOf(dashboardJobPathSchema, "path"), ...parametersOf(resultPageQuerySchema, "query")],
      responses: {
        ...ok("a page of query summaries, with the result's size", "ResultQueryPage"),
        "400": errorResponse("not a dashboard job UUID, or a bad offset or limit (at most 500)"),
        "404": pageNotFound,
        "502": errorResponse("the job API failed to answer"),
      },
    },
  },
  async (request, scope) => {
    const { uuid } = parsePath(request, dashboardJobPathSchema);
    const page = parseQuery(request, resultPageQuerySchema);
    return jsonResult(200, await dashboardJobService(scope).resultPage(uuid, {}, page), scope.requestId);
  },
);

route(
  "blastJobResultHits",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}/results/queries/{n}/hits",
    role: "Reader",
    openapi: {
      summary: "One query's hits, paged (only that query's part of the result is read)",
      parameters: [...parametersOf(queryPathSchema, "path"), ...parametersOf(resultPageQuerySchema, "query")],
      responses: {
        ...ok("the query and a page of its hits", "ResultHitPage"),
        "400": errorResponse("not a dashboard job UUID, or a bad query number, offset or limit"),
        "404": pageNotFound,
        "502": errorResponse("the job API failed to answer"),
      },
    },
  },
  async (request, scope) => {
    const { uuid, n } = parsePath(request, queryPathSchema);
    const page = parseQuery(request, resultPageQuerySchema);
    return jsonResult(200, await dashboardJobService(scope).resultPage(uuid, { n }, page), scope.requestId);
  },
);

route(
  "blastJobResultHit",
  {
    methods: ["GET"],
    route: "blast/jobs/{uuid}/results/queries/{n}/hits/{k}",
    role: "Reader",
    openapi: {
      summary: "One hit with its HSPs and alignment lines (query, match line, subject; coordinates, frames, strands)",
      parameters: parametersOf(hitPathSchema, "path"),
      responses: {
        ...ok("the hit and its HSPs", "ResultHit"),
        "400": errorResponse("not a dashboard job UUID, or a bad query or hit number"),
        "404": pageNotFound,
        "502": errorResponse("the job API failed to answer"),
      },
    },
  },
  async (request, scope) => {
    const { uuid, n, k } = parsePath(request, hitPathSchema);
    return jsonResult(200, await dashboardJobService(scope).resultPage(uuid, { n, k }), scope.requestId);
  },
);
