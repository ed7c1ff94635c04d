import { errorResponse, ok, parametersOf, retryLater } from "../shared/http/openapi.js";
import { z } from "zod";
import { DATABASE_NAME } from "../shared/blast/database-builder.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parsePath } from "../shared/http/validation.js";
import { databaseService } from "./composition/dashboard-deps.js";
import { callerOf, type RouteScope, route } from "./composition/http-route.js";

const namePath = z.object({ name: z.string().regex(DATABASE_NAME, "malformed database name") });
const nameRefused = {
  "400": errorResponse("malformed database name"),
  "404": errorResponse("unknown database"),
  "503": retryLater("no database store is configured"),
};

route(
  "databasesList",
  {
    methods: ["GET"],
    route: "databases",
    role: "Reader",
    openapi: {
      summary: "Prepared databases with their warm-up and update state",
      responses: { ...ok("databases", "DatabaseList"), "503": retryLater("no database store is configured") },
    },
  },
  async (_request, scope) => {
    const databases = await databaseService(scope).list();
    return jsonResult(200, { databases, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

/** An operation the route started (200 on start, per spec §1 item 3). */
function startedResult(operation: OperationView, scope: RouteScope) {
  return jsonResult(
    200,
    { operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } },
    scope.requestId,
  );
}

route(
  "databasesPrepare",
  {
    methods: ["POST"],
    route: "databases/{name}/prepare",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Prepare (download and format) a database's latest release, as an operation",
      parameters: parametersOf(namePath, "path"),
      responses: { ...ok("the operation started", "OperationStarted"), ...nameRefused },
    },
  },
  async (request, scope) => {
    const { name } = parsePath(request, namePath);
    return startedResult(
      await databaseService(scope).prepare(callerOf(scope), name, { requestId: scope.requestId }),
      scope,
    );
  },
);

route(
  "databasesWarmup",
  {
    methods: ["POST"],
    route: "databases/{name}/warmup",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Warm a database's current release into the nodes' caches, as an operation",
      parameters: parametersOf(namePath, "path"),
      responses: { ...ok("the operation started", "OperationStarted"), ...nameRefused },
    },
  },
  async (request, scope) => {
    const { name } = parsePath(request, namePath);
    return startedResult(
      await databaseService(scope).warmUp(callerOf(scope), name, { requestId: scope.requestId }),
      scope,
    );
  },
);
