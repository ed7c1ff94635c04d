import { z } from "zod";
import {
  acceptanceSchema,
  databaseSchema,
  errorEnvelopeSchema,
  facadeStatusSchema,
  facadeSubmitResponseSchema,
  facadeSubmitSchema,
  MAX_STATUS_WAIT_SECONDS,
  statusSchema,
  submitRequestSchema,
} from "../shared/jobs/schemas.js";

export const JOB_API_VERSION = "1.0.0";

function schema(s: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(s, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as Record<string, unknown>;
}

const json = (ref: string) => ({ "application/json": { schema: { $ref: `#/components/schemas/${ref}` } } });
const error = (description: string) => ({ description, content: json("Error") });
const jobIdParam = { name: "job_id", in: "path", required: true, schema: { type: "string", pattern: "^[a-z0-9]{12}$" } };
const secured = [{ ApiToken: [] }];
/** Conditional, long-polling status reads (additive): ETag + If-None-Match, and `wait`. */
const statusWaitParams = [
  { name: "If-None-Match", in: "header", schema: { type: "string" }, description: "ETag of the status the client holds; unchanged → 304" },
  {
    name: "wait",
    in: "query",
    schema: { type: "integer", minimum: 0, maximum: MAX_STATUS_WAIT_SECONDS, default: 0 },
    description: "with If-None-Match: hold the request up to this many seconds until the status changes",
  },
];
const notModified = { description: "the status still equals If-None-Match (after waiting up to `wait` seconds)" };

/**
 * The job API's OpenAPI 3.1 document, generated from the same zod schemas that validate requests,
 * so the description and the behaviour cannot drift apart.
 */
export function buildOpenApiDocument(): Record<string, unknown> {
  const common422 = { "422": { description: "ValidationError: each failing field as loc, msg, type", content: json("Error") } };
  return {
    openapi: "3.1.0",
    info: {
      title: "blastplane job API",
      version: JOB_API_VERSION,
      description:
        "Runs NCBI BLAST+ searches: sharded execution, exact merges, streamed results. Every route except /v1/health, /v1/ready, /openapi.json and /docs needs the X-SVC-API-Token header.",
    },
    components: {
      securitySchemes: { ApiToken: { type: "apiKey", in: "header", name: "X-SVC-API-Token" } },
      schemas: {
        SubmitRequest: schema(submitRequestSchema),
        SubmitAccepted: schema(acceptanceSchema),
        JobStatus: schema(statusSchema),
        FacadeSubmitRequest: schema(facadeSubmitSchema),
        FacadeSubmitResponse: schema(facadeSubmitResponseSchema),
        FacadeStatus: schema(facadeStatusSchema),
        Database: schema(databaseSchema),
        Error: schema(errorEnvelopeSchema),
      },
    },
    paths: {
      "/v1/health": { get: { summary: "Liveness", responses: { "200": { description: "alive" } } } },
      "/v1/ready": { get: { summary: "Readiness (storage, BLAST+, token store)", responses: { "200": { description: "ready" }, "503": error("a dependency is unavailable") } } },
      "/v1/config": { get: { summary: "Service configuration and limits", security: secured, responses: { "200": { description: "configuration" }, "401": error("token missing or wrong") } } },
      "/v1/cluster": { get: { summary: "Execution capacity", security: secured, responses: { "200": { description: "cluster status" }, "401": error("token missing or wrong") } } },
      "/v1/databases": {
        get: {
          summary: "Prepared databases",
          security: secured,
          responses: { "200": { description: "databases", content: { "application/json": { schema: { type: "object", properties: { databases: { type: "array", items: { $ref: "#/components/schemas/Database" } } } } } } }, "401": error("token missing or wrong") },
        },
      },
      "/v1/jobs": {
        get: {
          summary: "List jobs",
          security: secured,
          parameters: [
            { name: "status", in: "query", schema: { type: "string", enum: ["queued", "dispatching", "submitting", "running", "completed", "failed", "cancelled"] } },
            { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 500, default: 100 } },
          ],
          responses: { "200": { description: "jobs, newest first" }, "401": error("token missing or wrong") },
        },
        post: {
          summary: "Submit a search",
          security: secured,
          requestBody: { required: true, content: json("SubmitRequest") },
          responses: {
            "202": { description: "JobSubmitAccepted", content: json("SubmitAccepted") },
            "200": { description: "the idempotency_key's existing job (Idempotent-Replayed: true)", content: json("SubmitAccepted") },
            "400": error("malformed JSON"),
            "401": error("token missing or wrong"),
            "409": error("idempotency_key bound to a different active request"),
            ...common422,
            "429": error("queue full; see Retry-After"),
          },
        },
      },
      "/v1/jobs/{job_id}/status": {
        get: {
          summary: "Job status",
          security: secured,
          parameters: [jobIdParam, ...statusWaitParams],
          responses: { "200": { description: "status (with ETag)", content: json("JobStatus") }, "304": notModified, "400": error("not an OpenAPI job id, or wait out of range"), "404": error("unknown job") },
        },
      },
      "/v1/jobs/{job_id}/results": {
        get: {
          summary: "Result artifacts, streamed",
          security: secured,
          parameters: [jobIdParam, { name: "content", in: "query", schema: { type: "string", enum: ["full", "merged", "xml", "tabular"], default: "full" } }],
          responses: {
            "200": { description: "full: ZIP of shard outputs; merged: ZIP with merged_results.out.gz; xml: BLAST XML; tabular: outfmt 6 text" },
            "400": error("unknown content value or malformed job id"),
            "404": error("unknown job, or merged file not published yet"),
          },
        },
      },
      "/v1/jobs/{job_id}/cancel": {
        post: {
          summary: "Cancel a queued or active job; a finished job is left as it is (its status is answered)",
          security: secured,
          parameters: [jobIdParam],
          responses: { "200": { description: "{job_id, status}: cancelled, or the status the job had already reached" }, "400": error("malformed job id"), "404": error("unknown job") },
        },
      },
      "/v1/jobs/{job_id}": {
        delete: { summary: "Cancel an active job, or delete a finished one with its artifacts", security: secured, parameters: [jobIdParam], responses: { "200": { description: "cancelled or deleted" }, "404": error("unknown job") } },
      },
      "/api/v1/facade/submit": {
        post: {
          summary: "Facade submit",
          security: secured,
          requestBody: { required: true, content: json("FacadeSubmitRequest") },
          responses: { "202": { description: "accepted", content: json("FacadeSubmitResponse") }, "200": { description: "idempotent replay", content: json("FacadeSubmitResponse") }, "409": error("idempotency conflict"), ...common422, "429": error("queue full") },
        },
      },
      "/api/v1/facade/jobs/{job_id}": {
        get: {
          summary: "Facade status",
          security: secured,
          parameters: [jobIdParam, ...statusWaitParams],
          responses: { "200": { description: "status (with ETag)", content: json("FacadeStatus") }, "304": notModified, "400": error("wait out of range"), "404": error("unknown job") },
        },
      },
      "/api/v1/facade/jobs/{job_id}/files/{file_id}": {
        get: {
          summary: "Stream one result file",
          security: secured,
          parameters: [jobIdParam, { name: "file_id", in: "path", required: true, schema: { type: "string" } }],
          responses: { "200": { description: "file bytes" }, "404": error("unknown file"), "409": error("job has not succeeded yet") },
        },
      },
    },
  };
}
