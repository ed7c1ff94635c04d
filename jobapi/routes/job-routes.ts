import { PassThrough } from "node:stream";
import { renderTabular } from "../../shared/blast/tabular.js";
import { InvalidRequestError, NotFoundError } from "../../shared/errors.js";
import { decodeContinuation, encodeContinuation, linkWith } from "../../shared/http/continuation.js";
import { type HttpResult, jsonResult } from "../../shared/http/envelope.js";
import { parseJsonBody, parseQuery } from "../../shared/http/validation.js";
import { JOB_STATUSES } from "../../shared/jobs/model.js";
import { jobListQuerySchema, resultsQuerySchema, submitRequestSchema } from "../../shared/jobs/schemas.js";
import type { JobApiRoute } from "../http.js";
import { type ArtifactStore, MERGED_ARTIFACT, shardArtifact } from "../jobs/artifact-store.js";
import type { JobService } from "../jobs/job-service.js";
import {
  download,
  errorResponse,
  headerRef,
  jobIdParam,
  jsonContent,
  notModified,
  retryLater,
  secured,
  statusWaitParams,
  validationFailed,
  withEtag,
} from "../openapi.js";
import { acceptanceView, acceptedStatus, parseJobId, statusView } from "./job-views.js";
import { attachment, gunzipped, zipOf } from "./result-streams.js";
import { conditionalStatus } from "./status-reads.js";

export interface JobRouteOptions {
  service: JobService;
  artifacts: Pick<ArtifactStore, "open">;
  bodyLimitBytes: number;
}

/** `/v1/jobs…`: submit, list, status, results, cancel, delete (spec §4.2). */
export function createJobRoutes(o: JobRouteOptions): JobApiRoute[] {
  const { service, artifacts } = o;
  const withPosition = async (job: Parameters<JobService["queuePosition"]>[0]) =>
    statusView(job, await service.queuePosition(job));
  return [
    {
      method: "GET",
      path: "/v1/jobs",
      openapi: {
        operationId: "listJobs",
        summary: "List jobs",
        security: secured,
        parameters: [
          { name: "status", in: "query", schema: { type: "string", enum: [...JOB_STATUSES] } },
          { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 500, default: 100 } },
          {
            name: "cursor",
            in: "query",
            schema: { type: "string", maxLength: 500 },
            description: "a previous page's next_cursor (opaque): the page after it",
          },
        ],
        responses: {
          "200": { description: "jobs, newest first; next_link while more remain", content: jsonContent("JobList") },
          "400": errorResponse("an invalid query parameter (status, limit, or a cursor this service did not issue)"),
        },
      },
      handler: async (req, { requestId }) => {
        const query = parseQuery(req, jobListQuerySchema);
        const after = query.cursor === undefined ? undefined : decodeContinuation(query.cursor, 2);
        if (query.cursor !== undefined && !after)
          throw new InvalidRequestError("invalid query parameter 'cursor': not a cursor this service issued");
        const page = await service.list({
          status: query.status,
          limit: query.limit,
          after: after && { created_at: after[0] as string, job_id: after[1] as string },
        });
        const last = page.jobs.at(-1);
        // More than one page: the position of this page's last job continues the list (additive fields).
        const next = page.more && last ? encodeContinuation([last.created_at, last.job_id]) : undefined;
        return jsonResult(
          200,
          {
            jobs: await Promise.all(page.jobs.map(withPosition)),
            ...(next && {
              next_cursor: next,
              next_link: linkWith("/v1/jobs", { status: query.status, limit: query.limit, cursor: next }),
            }),
          },
          requestId,
        );
      },
    },
    {
      method: "POST",
      path: "/v1/jobs",
      openapi: {
        operationId: "submitJob",
        summary: "Submit a search",
        security: secured,
        requestBody: { required: true, content: jsonContent("SubmitRequest") },
        responses: {
          "202": { description: "JobSubmitAccepted", content: jsonContent("SubmitAccepted") },
          "200": {
            description: "the idempotency_key's existing job (Idempotent-Replayed: true)",
            headers: { "Idempotent-Replayed": headerRef("IdempotentReplayed") },
            content: jsonContent("SubmitAccepted"),
          },
          "400": errorResponse("malformed JSON"),
          "409": errorResponse("idempotency_key bound to a different active request"),
          "413": errorResponse("request body too large"),
          ...validationFailed,
          "429": retryLater("queue full; see Retry-After"),
        },
      },
      handler: async (req, { requestId }) => {
        const body = await parseJsonBody(req, submitRequestSchema, o.bodyLimitBytes);
        const outcome = await service.submit({ ...body, source: "external_api", request_id: requestId });
        const { status, headers } = acceptedStatus(outcome.replayed);
        return jsonResult(status, acceptanceView(outcome.job, outcome.queuePosition), requestId, headers);
      },
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/status",
      openapi: {
        operationId: "getJobStatus",
        summary: "Job status",
        security: secured,
        parameters: [jobIdParam, ...statusWaitParams],
        responses: {
          "200": withEtag("status (with ETag)", "JobStatus"),
          "304": notModified,
          "400": errorResponse("not an OpenAPI job id, or wait out of range"),
          "404": errorResponse("unknown job"),
        },
      },
      handler: async (req, { requestId }) => conditionalStatus(service, req, requestId, withPosition),
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/results",
      openapi: {
        operationId: "getJobResults",
        summary: "Result artifacts, streamed",
        security: secured,
        parameters: [
          jobIdParam,
          {
            name: "content",
            in: "query",
            schema: { type: "string", enum: ["full", "merged", "xml", "tabular"], default: "full" },
          },
        ],
        responses: {
          "200": {
            description:
              "full: ZIP of shard outputs; merged: ZIP with merged_results.out.gz; xml: BLAST XML; tabular: outfmt 6 text",
            headers: { "Content-Disposition": headerRef("ContentDisposition") },
            content: {
              ...download("application/zip"),
              ...download("application/xml"),
              "text/tab-separated-values": { schema: { type: "string" } },
            },
          },
          "400": errorResponse("unknown content value or malformed job id"),
          "404": errorResponse("unknown job, or merged file not published yet"),
        },
      },
      handler: async (req, { requestId }): Promise<HttpResult> => {
        const jobId = parseJobId(req.params.job_id);
        const { content } = parseQuery(req, resultsQuerySchema);
        const job = await service.get(jobId);
        if (content === "full") {
          const shards = job.shards.filter((s) => s.state === "succeeded");
          if (shards.length === 0) throw new NotFoundError("no shard output is available yet; poll the job status");
          const body = zipOf(
            shards.map((s) => ({
              name: `${s.id}.out.gz`,
              open: () => artifacts.open(jobId, shardArtifact(s.id), req.signal),
            })),
          );
          return { status: 200, headers: attachment("application/zip", `${jobId}_full.zip`, requestId), body };
        }
        if (job.status !== "completed")
          throw new NotFoundError("the merged result is not published yet; poll the job status, or try content=full");
        if (content === "merged") {
          const body = zipOf([
            { name: MERGED_ARTIFACT, open: () => artifacts.open(jobId, MERGED_ARTIFACT, req.signal) },
          ]);
          return { status: 200, headers: attachment("application/zip", `${jobId}_merged.zip`, requestId), body };
        }
        const xml = gunzipped(await artifacts.open(jobId, MERGED_ARTIFACT, req.signal));
        if (!xml) throw new NotFoundError("the merged result is missing");
        if (content === "xml") return { status: 200, headers: { "Content-Type": "application/xml" }, body: xml };
        const tsv = new PassThrough();
        renderTabular(xml, tsv).then(
          () => tsv.end(),
          (error: unknown) => tsv.destroy(error instanceof Error ? error : new Error(String(error))),
        );
        return { status: 200, headers: { "Content-Type": "text/tab-separated-values; charset=utf-8" }, body: tsv };
      },
    },
    {
      method: "POST",
      path: "/v1/jobs/{job_id}/cancel",
      openapi: {
        operationId: "cancelJob",
        summary: "Cancel a queued or active job; a finished job is left as it is (its status is answered)",
        security: secured,
        parameters: [jobIdParam],
        responses: {
          "200": {
            description: "cancelled, or the status the job had already reached",
            content: jsonContent("CancelResult"),
          },
          "400": errorResponse("malformed job id"),
          "404": errorResponse("unknown job"),
        },
      },
      handler: async (req, { requestId }) =>
        jsonResult(200, await service.cancel(parseJobId(req.params.job_id)), requestId),
    },
    {
      method: "DELETE",
      path: "/v1/jobs/{job_id}",
      openapi: {
        operationId: "deleteJob",
        summary: "Cancel an active job, or delete a finished one with its artifacts",
        security: secured,
        parameters: [jobIdParam],
        responses: {
          "200": { description: "cancelled or deleted", content: jsonContent("CancelOrDeleteResult") },
          "400": errorResponse("malformed job id"),
          "404": errorResponse("unknown job"),
        },
      },
      handler: async (req, { requestId }) =>
        jsonResult(200, await service.cancelOrDelete(parseJobId(req.params.job_id)), requestId),
    },
  ];
}
