import { InvalidRequestError, NotFoundError } from "../../shared/errors.js";
import { jsonResult } from "../../shared/http/envelope.js";
import { parseQuery } from "../../shared/http/validation.js";
import { MAX_RESULT_PAGE_SIZE, positionSchema, resultPageQuerySchema } from "../../shared/jobs/result-page-schemas.js";
import type { JobApiRoute } from "../http.js";
import type { JobService } from "../jobs/job-service.js";
import type { ResultPages } from "../jobs/result-pages.js";
import { errorResponse, jobIdParam, jsonContent, secured } from "../openapi.js";
import { parseJobId } from "./job-views.js";

export interface ResultPageRouteOptions {
  service: Pick<JobService, "get">;
  pages: ResultPages;
}

const pageParams = [
  {
    name: "offset",
    in: "query",
    schema: { type: "integer", minimum: 0, default: 0 },
    description: "items to skip (a previous page's next_offset)",
  },
  {
    name: "limit",
    in: "query",
    schema: { type: "integer", minimum: 1, maximum: MAX_RESULT_PAGE_SIZE, default: 100 },
  },
];
const queryParam = {
  name: "n",
  in: "path",
  required: true,
  schema: { type: "integer", minimum: 1 },
  description: "1-based position of the query in the result",
};
const hitParam = {
  name: "k",
  in: "path",
  required: true,
  schema: { type: "integer", minimum: 1 },
  description: "1-based rank of the hit within its query",
};

function position(raw: string | undefined, name: string): number {
  const parsed = positionSchema.safeParse(raw);
  if (!parsed.success) throw new InvalidRequestError(`invalid path parameter '${name}': expected a positive integer`);
  return parsed.data;
}

/**
 * `/v1/jobs/{job_id}/results/queries…` (additive, issue 23): a completed job's result in pages,
 * read through the index stored beside the merged result, so a page of the last of 1,440 queries
 * reads a few hundred KB, not the whole XML.
 */
export function createResultPageRoutes(o: ResultPageRouteOptions): JobApiRoute[] {
  const completed = async (raw: string | undefined) => {
    const jobId = parseJobId(raw);
    const job = await o.service.get(jobId);
    if (job.status !== "completed")
      throw new NotFoundError("the merged result is not published yet; poll the job status");
    return jobId;
  };
  const notFound = errorResponse(
    "unknown job, job not completed, unknown query or hit, or a result stored without an index (download it instead)",
  );
  return [
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/results/queries",
      openapi: {
        operationId: "listResultQueries",
        summary: "Per-query summaries of a completed job's result, paged",
        security: secured,
        parameters: [jobIdParam, ...pageParams],
        responses: {
          "200": { description: "a page of query summaries", content: jsonContent("ResultQueryPage") },
          "400": errorResponse("malformed job id, offset or limit (limit at most 500)"),
          "404": notFound,
        },
      },
      handler: async (req, { requestId }) => {
        const jobId = await completed(req.params.job_id);
        const { offset, limit } = parseQuery(req, resultPageQuerySchema);
        return jsonResult(200, await o.pages.queries(jobId, offset, limit, req.signal), requestId);
      },
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/results/queries/{n}/hits",
      openapi: {
        operationId: "listResultHits",
        summary: "One query's hits, paged (reads only that query's part of the stored result)",
        security: secured,
        parameters: [jobIdParam, queryParam, ...pageParams],
        responses: {
          "200": { description: "the query and a page of its hits", content: jsonContent("ResultHitPage") },
          "400": errorResponse("malformed job id, query number, offset or limit"),
          "404": notFound,
        },
      },
      handler: async (req, { requestId }) => {
        const jobId = await completed(req.params.job_id);
        const n = position(req.params.n, "n");
        const { offset, limit } = parseQuery(req, resultPageQuerySchema);
        return jsonResult(200, await o.pages.hits(jobId, n, offset, limit, req.signal), requestId);
      },
    },
    {
      method: "GET",
      path: "/v1/jobs/{job_id}/results/queries/{n}/hits/{k}",
      openapi: {
        operationId: "getResultHit",
        summary: "One hit with its HSPs and alignment lines",
        security: secured,
        parameters: [jobIdParam, queryParam, hitParam],
        responses: {
          "200": { description: "the hit and its HSPs", content: jsonContent("ResultHit") },
          "400": errorResponse("malformed job id, query or hit number"),
          "404": notFound,
        },
      },
      handler: async (req, { requestId }) => {
        const jobId = await completed(req.params.job_id);
        const n = position(req.params.n, "n");
        const k = position(req.params.k, "k");
        return jsonResult(200, await o.pages.hit(jobId, n, k, req.signal), requestId);
      },
    },
  ];
}
