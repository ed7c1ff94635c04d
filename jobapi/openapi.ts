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
import type { JobApiRoute } from "./http.js";

export const JOB_API_VERSION = "1.0.0";

function schema(s: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(s, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as Record<string, unknown>;
}

// Pieces the routes' operation objects are written with.

/** A JSON body referring to a component schema. */
export const jsonContent = (ref: string) => ({
  "application/json": { schema: { $ref: `#/components/schemas/${ref}` } },
});
/** An error response in the envelope. */
export const errorResponse = (description: string) => ({ description, content: jsonContent("Error") });
export const jobIdParam = {
  name: "job_id",
  in: "path",
  required: true,
  schema: { type: "string", pattern: "^[a-z0-9]{12}$" },
};
/** The operation needs `X-SVC-API-Token`. */
export const secured = [{ ApiToken: [] }];
export const unauthorized = { "401": errorResponse("token missing or wrong") };
export const validationFailed = {
  "422": { description: "ValidationError: each failing field as loc, msg, type", content: jsonContent("Error") },
};
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
};

/**
 * The job API's OpenAPI 3.1 document: each path's operation comes from its route definition, the
 * components from the same zod schemas that validate requests, so the description and the
 * behaviour cannot drift apart.
 */
export function buildOpenApiDocument(routes: readonly JobApiRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    if (!route.openapi) continue;
    paths[route.path] ??= {};
    (paths[route.path] as Record<string, unknown>)[route.method.toLowerCase()] = route.openapi;
  }
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
    paths,
  };
}
