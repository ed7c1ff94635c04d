import * as df from "durable-functions";
import { z } from "zod";
import { jsonResult } from "../shared/http/envelope.js";
import { QueueFullError, NotFoundError } from "../shared/errors.js";
import { parsePath, parseQuery } from "../shared/http/validation.js";
import { computeQueueDiagnostics, taskState } from "../shared/ops/diagnostics.js";
import { Orchestrations } from "../shared/ops/queue-labels.js";
import { appContext } from "./app-context.js";
import { route } from "./http-route.js";

const ACTIVE = [df.OrchestrationRuntimeStatus.Pending, df.OrchestrationRuntimeStatus.Running];

async function diagnostics(client: df.DurableClient) {
  const instances = await client.getStatusBy({ runtimeStatus: ACTIVE });
  return computeQueueDiagnostics({
    taskHubName: appContext.config.taskHubName,
    instances: instances.map((i) => ({ name: i.name, instanceId: i.instanceId, runtimeStatus: String(i.runtimeStatus) })),
  });
}

const enqueueQuery = z.object({ message: z.string().min(1).max(1024) });
const resultPath = z.object({ task_id: z.string().regex(/^[A-Za-z0-9-]{1,64}$/, "malformed task id") });

route("queueDiagnostics", { methods: ["GET"], route: "health/queue", durable: true }, async (_req, { requestId, durable }) =>
  jsonResult(200, await diagnostics(durable()), requestId),
);

route(
  "enqueueNoop",
  { methods: ["POST"], route: "health/queue/enqueue-noop", durable: true },
  async (request, { requestId, durable, logger }) => {
    const { message } = parseQuery(request, enqueueQuery);
    const waitSeconds = appContext.noopLimiter.take();
    if (waitSeconds > 0) throw new QueueFullError("too many no-op diagnostics; try again later", waitSeconds);
    const client = durable();
    const taskId = await client.startNew(Orchestrations.noop, { input: { message } });
    logger.info("no-op diagnostic enqueued", { task_id: taskId });
    return jsonResult(200, { task_id: taskId, status: "PENDING", ...(await diagnostics(client)) }, requestId);
  },
);

route(
  "noopResult",
  { methods: ["GET"], route: "health/queue/result/{task_id}", durable: true },
  async (request, { requestId, durable }) => {
    const { task_id } = parsePath(request, resultPath);
    const status = await durable()
      .getStatus(task_id)
      .catch((error: unknown) => {
        // The client reports a missing instance as an error mentioning the 404 it received.
        if (error instanceof Error && / 404 /.test(error.message)) return undefined;
        throw error;
      });
    // Only no-op diagnostics are visible here; other orchestrations are not this route's business.
    if (!status || status.name !== Orchestrations.noop) throw new NotFoundError(`no task with id '${task_id}'`);
    const state = taskState(String(status.runtimeStatus));
    const output = status.output as { message?: unknown } | null;
    return jsonResult(
      200,
      {
        task_id,
        status: state,
        result: state === "SUCCESS" ? { message: output?.message ?? null } : null,
        ...(state === "FAILURE" ? { error: String(status.output ?? "") } : {}),
      },
      requestId,
    );
  },
);
