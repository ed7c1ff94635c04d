import { z } from "zod";
import { DATABASE_NAME } from "../../shared/blast/database-name.js";
import { ConflictError } from "../../shared/errors.js";
import { jsonResult } from "../../shared/http/envelope.js";
import { parsePath } from "../../shared/http/validation.js";
import type { KubernetesWarmup } from "../executors/kubernetes-warmup.js";
import type { JobApiRoute } from "../http.js";
import { errorResponse, jsonContent, secured } from "../openapi.js";

const pathSchema = z.object({ name: z.string().regex(DATABASE_NAME) });
const nameParam = [
  { name: "name", in: "path", required: true, schema: { type: "string", pattern: DATABASE_NAME.source } },
];

/**
 * `POST/GET /v1/databases/{name}/warmup`: fill every BLAST node's cache with the current release,
 * and read its progress node by node. Only the Kubernetes executor has nodes to warm; with the
 * local executor both answer 409 (the dashboard then warms this machine's copy itself).
 */
export function createWarmupRoutes(warmup: KubernetesWarmup | undefined): JobApiRoute[] {
  const cluster = () => {
    if (!warmup)
      throw new ConflictError("warm-up fills the cluster's nodes; this job API runs shards with the local executor");
    return warmup;
  };
  const responses = {
    "400": errorResponse("malformed database name"),
    "404": errorResponse("unknown database, or no warm-up started"),
    "409": errorResponse("not running shards on a cluster"),
  };
  return [
    {
      method: "POST",
      path: "/v1/databases/{name}/warmup",
      openapi: {
        operationId: "startDatabaseWarmup",
        summary: "Warm a database's current release on every BLAST node",
        security: secured,
        parameters: nameParam,
        responses: { "202": { description: "the warm-up, started", content: jsonContent("Warmup") }, ...responses },
      },
      handler: async (req, { requestId }) =>
        jsonResult(202, await cluster().start(parsePath(req, pathSchema).name), requestId),
    },
    {
      method: "GET",
      path: "/v1/databases/{name}/warmup",
      openapi: {
        operationId: "getDatabaseWarmup",
        summary: "Progress of a database's warm-up, node by node",
        security: secured,
        parameters: nameParam,
        responses: { "200": { description: "the warm-up's progress", content: jsonContent("Warmup") }, ...responses },
      },
      handler: async (req, { requestId }) =>
        jsonResult(200, await cluster().status(parsePath(req, pathSchema).name), requestId),
    },
  ];
}
