import { type HttpResult, jsonResult } from "../../shared/http/envelope.js";
import { parseQuery } from "../../shared/http/validation.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { statusQuerySchema } from "../../shared/jobs/schemas.js";
import type { JobApiRequest } from "../http.js";
import type { JobService } from "../jobs/job-service.js";
import { parseJobId } from "./job-views.js";

/**
 * A status answer with an ETag; with `If-None-Match` it is 304 while unchanged, and `?wait=N`
 * holds the request up to N seconds for a change (long polling instead of a tight poll loop).
 * `versionOf` picks the part of the body that identifies its version (weak ETag).
 */
export async function conditionalStatus<T>(
  service: Pick<JobService, "watch">,
  req: JobApiRequest,
  requestId: string,
  render: (job: JobRecord) => T | Promise<T>,
  versionOf?: (body: T) => unknown,
): Promise<HttpResult> {
  const jobId = parseJobId(req.params.job_id);
  const { wait } = parseQuery(req, statusQuerySchema);
  const view = await service.watch(jobId, render, {
    ifNoneMatch: req.headers.get("if-none-match"),
    waitMs: wait * 1000,
    abortSignal: req.signal,
    versionOf,
  });
  if (view.notModified) return { status: 304, headers: { ETag: view.etag } };
  return jsonResult(200, view.body, requestId, { ETag: view.etag });
}
