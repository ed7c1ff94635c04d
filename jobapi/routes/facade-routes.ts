import type { Readable } from "node:stream";
import { ConflictError, NotFoundError } from "../../shared/errors.js";
import { type HttpResult, jsonResult } from "../../shared/http/envelope.js";
import { parseJsonBody } from "../../shared/http/validation.js";
import { facadeStatus, type JobRecord, shardCounters } from "../../shared/jobs/model.js";
import { facadeSubmitSchema } from "../../shared/jobs/schemas.js";
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
import { acceptedStatus, parseJobId } from "./job-views.js";
import { attachment, gunzipped } from "./result-streams.js";
import { conditionalStatus } from "./status-reads.js";

/** File ids are short and plain; anything else is 404 without a lookup. */
const FILE_ID = /^[a-z0-9-]{1,64}$/;

/** A result file the facade offers; ids are stable for the life of the job. */
interface ResultFile {
  file_id: string;
  filename: string;
  format: string;
  size_bytes: number;
  contentType: string;
  open: (abortSignal: AbortSignal) => Promise<Readable | undefined>;
}

function seconds(from: string, to: string): number {
  if (!from || !to) return 0;
  return Math.max(0, Math.round((Date.parse(to) - Date.parse(from)) / 1000));
}

export interface FacadeRouteOptions {
  service: JobService;
  artifacts: Pick<ArtifactStore, "open">;
  bodyLimitBytes: number;
}

/** The stable facade (`/api/v1/facade`, spec §2.5): submit, status with file ids, file downloads. */
export function createFacadeRoutes(o: FacadeRouteOptions): JobApiRoute[] {
  const { service, artifacts } = o;

  function resultFiles(job: JobRecord): ResultFile[] {
    const files: ResultFile[] = [];
    if (job.status === "completed") {
      files.push({
        file_id: "merged-xml",
        filename: "merged_results.xml",
        format: "blast_xml",
        size_bytes: job.merged_xml_bytes,
        contentType: "application/xml",
        open: async (abortSignal) => gunzipped(await artifacts.open(job.job_id, MERGED_ARTIFACT, abortSignal)),
      });
      files.push({
        file_id: "merged-gz",
        filename: MERGED_ARTIFACT,
        format: "blast_xml_gzip",
        size_bytes: job.merged_bytes,
        contentType: "application/gzip",
        open: (abortSignal) => artifacts.open(job.job_id, MERGED_ARTIFACT, abortSignal),
      });
    }
    for (const shard of job.shards) {
      if (shard.state !== "succeeded") continue;
      files.push({
        file_id: `shard-${shard.id}`,
        filename: `${shard.id}.out.gz`,
        format: "blast_xml_gzip",
        size_bytes: shard.output_bytes,
        contentType: "application/gzip",
        open: (abortSignal) => artifacts.open(job.job_id, shardArtifact(shard.id), abortSignal),
      });
    }
    return files;
  }

  function facadeView(job: JobRecord) {
    const counters = shardCounters(job.shards);
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
      execution: {
        shard_count: counters.total,
        shards_succeeded: counters.succeeded,
        shards_active: counters.active,
        shards_failed: counters.failed,
      },
      error: job.error,
      result: {
        files: resultFiles(job).map(({ file_id, filename, format, size_bytes }) => ({
          file_id,
          filename,
          format,
          size_bytes,
        })),
      },
    };
  }

  return [
    {
      method: "POST",
      path: "/api/v1/facade/submit",
      openapi: {
        operationId: "facadeSubmit",
        summary: "Facade submit",
        security: secured,
        requestBody: { required: true, content: jsonContent("FacadeSubmitRequest") },
        responses: {
          "202": { description: "accepted", content: jsonContent("FacadeSubmitResponse") },
          "200": {
            description: "idempotent replay: the idempotency_key's existing job",
            headers: { "Idempotent-Replayed": headerRef("IdempotentReplayed") },
            content: jsonContent("FacadeSubmitResponse"),
          },
          "400": errorResponse("malformed JSON"),
          "409": errorResponse("idempotency conflict"),
          "413": errorResponse("request body too large"),
          ...validationFailed,
          "429": retryLater("queue full"),
        },
      },
      handler: async (req, { requestId }) => {
        const body = await parseJsonBody(req, facadeSubmitSchema, o.bodyLimitBytes);
        const { options, ...rest } = body;
        const outcome = await service.submit({
          ...rest,
          blast_options: options,
          source: "facade",
          request_id: requestId,
        });
        const { status, headers } = acceptedStatus(outcome.replayed);
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
      openapi: {
        operationId: "facadeGetJob",
        summary: "Facade status",
        security: secured,
        parameters: [jobIdParam, ...statusWaitParams],
        responses: {
          "200": withEtag("status (with ETag)", "FacadeStatus"),
          "304": notModified,
          "400": errorResponse("wait out of range"),
          "404": errorResponse("unknown job"),
        },
      },
      // Its clock-derived seconds change by themselves; the (weak) ETag follows the job instead.
      handler: async (req, { requestId }) =>
        conditionalStatus(
          service,
          req,
          requestId,
          facadeView,
          ({ elapsed_seconds, queue_wait_seconds, run_seconds, ...stable }) => stable,
        ),
    },
    {
      method: "GET",
      path: "/api/v1/facade/jobs/{job_id}/files/{file_id}",
      openapi: {
        operationId: "facadeGetFile",
        summary: "Stream one result file",
        security: secured,
        parameters: [
          jobIdParam,
          { name: "file_id", in: "path", required: true, schema: { type: "string", pattern: FILE_ID.source } },
        ],
        responses: {
          "200": {
            description: "the file's bytes: merged-xml is BLAST XML, the others gzip",
            headers: { "Content-Disposition": headerRef("ContentDisposition") },
            content: { ...download("application/xml"), ...download("application/gzip") },
          },
          "400": errorResponse("malformed job id"),
          "404": errorResponse("unknown file"),
          "409": errorResponse("job has not succeeded yet"),
        },
      },
      handler: async (req, { requestId }): Promise<HttpResult> => {
        const job = await service.get(parseJobId(req.params.job_id));
        const fileId = req.params.file_id ?? "";
        if (!FILE_ID.test(fileId)) throw new NotFoundError(`no file with id '${fileId.slice(0, 64)}'`);
        if (job.status !== "completed")
          throw new ConflictError(
            `job ${job.job_id} is ${facadeStatus(job.status)}; files are available once it is success`,
          );
        const file = resultFiles(job).find((f) => f.file_id === fileId);
        if (!file) throw new NotFoundError(`no file with id '${fileId}'`);
        const body = await file.open(req.signal);
        if (!body) throw new NotFoundError(`file '${fileId}' is missing`);
        return { status: 200, headers: attachment(file.contentType, file.filename, requestId), body };
      },
    },
  ];
}
