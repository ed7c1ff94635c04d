import {
  errorResponse,
  headerRef,
  jsonContent,
  jsonSchemaOf,
  type Operation,
  openApiDocument,
  refusedBeforeRouting,
  retryLater,
  unauthorized,
  validationFailed,
} from "../shared/http/openapi.js";
import {
  acceptanceSchema,
  cancelOrDeleteResultSchema,
  cancelResultSchema,
  clusterSchema,
  databaseListSchema,
  facadeStatusSchema,
  facadeSubmitResponseSchema,
  facadeSubmitSchema,
  jobApiConfigSchema,
  jobApiHealthSchema,
  jobApiNotReadySchema,
  jobApiReadySchema,
  jobListSchema,
  MAX_STATUS_WAIT_SECONDS,
  statusSchema,
  submitRequestSchema,
  warmupSchema,
} from "../shared/jobs/schemas.js";
import { hitDetailSchema, hitPageSchema, queryPageSchema } from "../shared/jobs/result-page-schemas.js";
import type { JobApiRoute } from "./http.js";

export const JOB_API_VERSION = "1.0.0";

// Pieces the routes' operation objects are written with (the shared ones re-exported).
export { errorResponse, headerRef, jsonContent, refusedBeforeRouting, retryLater, unauthorized, validationFailed };

export const jobIdParam = {
  name: "job_id",
  in: "path",
  required: true,
  schema: { type: "string", pattern: "^[a-z0-9]{12}$" },
};
/** The operation needs `X-SVC-API-Token`. */
export const secured = [{ ApiToken: [] }];
/** Public operations (liveness, readiness). */
export const unsecured: unknown[] = [];
/** Conditional, long-polling status reads (additive): ETag + If-None-Match, and `wait`. */
export const statusWaitParams = [
  {
    name: "If-None-Match",
    in: "header",
    schema: { type: "string" },
    description: "ETag of the status the client holds; unchanged → 304",
  },
  {
    name: "wait",
    in: "query",
    schema: { type: "integer", minimum: 0, maximum: MAX_STATUS_WAIT_SECONDS, default: 0 },
    description: "with If-None-Match: hold the request up to this many seconds until the status changes",
  },
];
export const notModified = {
  description: "the status still equals If-None-Match (after waiting up to `wait` seconds)",
  headers: { ETag: headerRef("ETag") },
};
/** A JSON status answer with its version. */
export const withEtag = (description: string, ref: string) => ({
  description,
  headers: { ETag: headerRef("ETag") },
  content: jsonContent(ref),
});
/** A file download of `type`, named by Content-Disposition. */
export const download = (type: string) => ({
  [type]: { schema: { type: "string", format: "binary" } },
});

/**
 * The job API's OpenAPI 3.1 document: each path's operation comes from its route definition, the
 * components from the same zod schemas that validate requests, so the description and the
 * behaviour cannot drift apart.
 */
export function buildOpenApiDocument(routes: readonly JobApiRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {};
  for (const route of routes) {
    if (!route.openapi) continue;
    paths[route.path] ??= {};
    (paths[route.path] as Record<string, Operation>)[route.method.toLowerCase()] = route.openapi as Operation;
  }
  return openApiDocument({
    title: "blastplane job API",
    version: JOB_API_VERSION,
    description:
      "Runs NCBI BLAST+ searches: sharded execution, exact merges, streamed results. Every route except /v1/health, /v1/ready, /openapi.json and /docs needs the X-SVC-API-Token header.",
    servers: [{ url: "/", description: "the job API's own origin (port 8000 in the local stack)" }],
    securitySchemes: { ApiToken: { type: "apiKey", in: "header", name: "X-SVC-API-Token" } },
    schemas: {
      SubmitRequest: jsonSchemaOf(submitRequestSchema),
      SubmitAccepted: jsonSchemaOf(acceptanceSchema),
      JobStatus: jsonSchemaOf(statusSchema),
      JobList: jsonSchemaOf(jobListSchema),
      ResultQueryPage: jsonSchemaOf(queryPageSchema),
      ResultHitPage: jsonSchemaOf(hitPageSchema),
      ResultHit: jsonSchemaOf(hitDetailSchema),
      CancelResult: jsonSchemaOf(cancelResultSchema),
      CancelOrDeleteResult: jsonSchemaOf(cancelOrDeleteResultSchema),
      FacadeSubmitRequest: jsonSchemaOf(facadeSubmitSchema),
      FacadeSubmitResponse: jsonSchemaOf(facadeSubmitResponseSchema),
      FacadeStatus: jsonSchemaOf(facadeStatusSchema),
      DatabaseList: jsonSchemaOf(databaseListSchema),
      Warmup: jsonSchemaOf(warmupSchema),
      ServiceConfig: jsonSchemaOf(jobApiConfigSchema),
      Cluster: jsonSchemaOf(clusterSchema),
      Health: jsonSchemaOf(jobApiHealthSchema),
      Ready: jsonSchemaOf(jobApiReadySchema),
      NotReady: jsonSchemaOf(jobApiNotReadySchema),
    },
    paths,
  });
}
