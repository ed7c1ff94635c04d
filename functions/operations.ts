import { z } from "zod";
import { jsonResult } from "../shared/http/envelope.js";
import { errorResponse, ok, parametersOf } from "../shared/http/openapi.js";
import { parsePath } from "../shared/http/validation.js";
import { getOperation, OPERATION_ID } from "../shared/orchestrations/operations.js";
import { appContext } from "./composition/app-context.js";
import { liveOperationProgress } from "./composition/dashboard-deps.js";
import { route } from "./composition/http-route.js";

const operationPath = z.object({ operation_id: z.string().regex(OPERATION_ID, "malformed operation id") });

route(
  "getOperation",
  {
    methods: ["GET"],
    route: "operations/{operation_id}",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "An operation's state (poll after poll_after_seconds until it is terminal)",
      parameters: parametersOf(operationPath, "path"),
      responses: {
        ...ok("the operation", "Operation"),
        "400": errorResponse("malformed operation id"),
        "404": errorResponse("unknown operation"),
      },
    },
  },
  async (request, scope) => {
    const { operation_id } = parsePath(request, operationPath);
    const operation = await getOperation(scope.durable(), operation_id, {
      pollAfterSeconds: appContext.config.jobPollIntervalSeconds,
      liveProgress: liveOperationProgress(),
    });
    return jsonResult(200, { ...operation, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);
