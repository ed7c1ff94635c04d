import { z } from "zod";
import { DATABASE_NAME } from "../shared/blast/database-builder.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parsePath } from "../shared/http/validation.js";
import { databaseService } from "./composition/dashboard-deps.js";
import { callerOf, type RouteScope, route } from "./composition/http-route.js";

const namePath = z.object({ name: z.string().regex(DATABASE_NAME, "malformed database name") });

route("databasesList", { methods: ["GET"], route: "databases", role: "Reader" }, async (_request, scope) => {
  const databases = await databaseService(scope).list();
  return jsonResult(200, { databases, meta: { request_id: scope.requestId } }, scope.requestId);
});

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
  { methods: ["POST"], route: "databases/{name}/prepare", role: "Contributor", durable: true },
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
  { methods: ["POST"], route: "databases/{name}/warmup", role: "Contributor", durable: true },
  async (request, scope) => {
    const { name } = parsePath(request, namePath);
    return startedResult(
      await databaseService(scope).warmUp(callerOf(scope), name, { requestId: scope.requestId }),
      scope,
    );
  },
);
