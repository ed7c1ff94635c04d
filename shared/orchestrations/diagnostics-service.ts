import { NotFoundError, QueueFullError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import { computeQueueDiagnostics, type HubInstance, type QueueDiagnostics, taskState } from "./diagnostics.js";
import type { OrchestrationClient } from "./orchestration-client.js";
import { Orchestrations } from "./queue-labels.js";

/** What the task-queue diagnostics are built from. */
export interface DiagnosticsServiceDependencies {
  /** The durable client port: the task hub whose instances are the queues. */
  orchestrations: OrchestrationClient;
  taskHubName: string;
  /** The no-op's rate limit, per client: takes a slot and answers the seconds to wait (0: go ahead). */
  noopLimiter: { take(client: string): number };
  /** The request's logger. */
  logger: Logger;
}

/** The no-op diagnostic's state (spec §2.9), in Celery's state names. */
export interface NoopResult {
  task_id: string;
  status: ReturnType<typeof taskState>;
  result: { message: unknown } | null;
  error?: string;
}

/** Runtime statuses of work waiting or running: what the queues count. */
const ACTIVE_RUNTIME_STATUSES = ["Pending", "Running"];

/**
 * The task-queue diagnostics of spec §2.9, computed from the task hub: the queues, the
 * (rate-limited) no-op that proves an enqueue reaches a consumer, and the no-op's result.
 */
export function createDiagnosticsService(dependencies: DiagnosticsServiceDependencies) {
  const { orchestrations, taskHubName, noopLimiter, logger } = dependencies;

  async function getQueueDiagnostics(): Promise<QueueDiagnostics> {
    const instances: HubInstance[] = [];
    for await (const instance of orchestrations.listInstances({ runtimeStatus: ACTIVE_RUNTIME_STATUSES }))
      instances.push(instance);
    return computeQueueDiagnostics({ taskHubName, instances });
  }

  return {
    getQueueDiagnostics,

    /**
     * Enqueues a no-op carrying `message`; QueueFullError (with the wait) beyond `client`'s rate
     * limit (its address: one caller's flood leaves the others their share).
     */
    async enqueueNoop(
      message: string,
      client = "unknown",
    ): Promise<QueueDiagnostics & { task_id: string; status: "PENDING" }> {
      const waitSeconds = noopLimiter.take(client);
      if (waitSeconds > 0) throw new QueueFullError("too many no-op diagnostics; try again later", waitSeconds);
      const taskId = await orchestrations.startNew(Orchestrations.noop, { input: { message } });
      logger.info("no-op diagnostic enqueued", { task_id: taskId });
      return { task_id: taskId, status: "PENDING", ...(await getQueueDiagnostics()) };
    },

    /** The no-op's state and, once it succeeded, its echoed message; NotFoundError for any other id. */
    async getNoopResult(taskId: string): Promise<NoopResult> {
      const instance = await orchestrations.getInstance(taskId);
      // Only no-op diagnostics are visible here; other orchestrations are not this route's business.
      if (!instance || instance.name !== Orchestrations.noop) throw new NotFoundError(`no task with id '${taskId}'`);
      const status = taskState(instance.runtimeStatus);
      const output = instance.output as { message?: unknown } | null;
      return {
        task_id: taskId,
        status,
        result: status === "SUCCESS" ? { message: output?.message ?? null } : null,
        ...(status === "FAILURE" ? { error: String(instance.output ?? "") } : {}),
      };
    },
  };
}

/** The diagnostics service's interface. */
export type DiagnosticsService = ReturnType<typeof createDiagnosticsService>;
