import {
  errorResponse,
  ok,
  parametersOf,
  refusedBeforeRouting,
  retryLater,
  validationFailed,
} from "../shared/http/openapi.js";
import { z } from "zod";
import { clientAddress } from "../shared/http/client-address.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parsePath, parseQuery } from "../shared/http/validation.js";
import { diagnosticsService } from "./composition/dashboard-deps.js";
import { route } from "./composition/http-route.js";

const enqueueQuery = z.object({ message: z.string().min(1).max(1024) });
const resultPath = z.object({ task_id: z.string().regex(/^[A-Za-z0-9-]{1,64}$/, "malformed task id") });

route(
  "queueDiagnostics",
  {
    methods: ["GET"],
    route: "health/queue",
    durable: true,
    openapi: {
      summary: "Task-queue diagnostics (public)",
      responses: { ...ok("the queues and their depths", "QueueDiagnostics"), ...refusedBeforeRouting },
    },
  },
  async (_request, scope) => jsonResult(200, await diagnosticsService(scope).getQueueDiagnostics(), scope.requestId),
);

route(
  "enqueueNoop",
  {
    methods: ["POST"],
    route: "health/queue/enqueue-noop",
    durable: true,
    openapi: {
      summary: "Enqueue a no-op task that proves the queue reaches a consumer (public, rate-limited per client)",
      parameters: parametersOf(enqueueQuery, "query"),
      responses: {
        ...ok("the task, pending", "NoopEnqueued"),
        "400": errorResponse("message longer than 1024 characters"),
        ...validationFailed,
        "429": retryLater("rate limited: wait Retry-After seconds"),
      },
    },
  },
  async (request, scope) => {
    const { message } = parseQuery(request, enqueueQuery);
    return jsonResult(
      200,
      await diagnosticsService(scope).enqueueNoop(message, clientAddress(request.headers)),
      scope.requestId,
    );
  },
);

route(
  "noopResult",
  {
    methods: ["GET"],
    route: "health/queue/result/{task_id}",
    durable: true,
    openapi: {
      summary: "A no-op task's state (public)",
      parameters: parametersOf(resultPath, "path"),
      responses: {
        ...ok("the task's state", "NoopResult"),
        "400": errorResponse("malformed task id"),
        "404": errorResponse("unknown task"),
      },
    },
  },
  async (request, scope) => {
    const { task_id } = parsePath(request, resultPath);
    return jsonResult(200, await diagnosticsService(scope).getNoopResult(task_id), scope.requestId);
  },
);
