import { createHash } from "node:crypto";
import { FALLBACK_QUEUE, ORCHESTRATION_QUEUES, QUEUE_NAMES, queueOf } from "./queue-labels.js";

/** One instance of the task hub, as the durable client lists it. */
export interface HubInstance {
  name: string;
  instanceId: string;
  runtimeStatus: string;
}

/** The fields of spec §2.9, computed from the task hub. */
export interface QueueDiagnostics {
  task_app_id: number;
  celery_app_id: number;
  current_app_id: number;
  task_app_main: string;
  task_app_routes: Record<string, { queue: string }>;
  task_app_default_queue: string;
  resolved_route: { queue: string };
  queues: Record<string, number>;
  redis_keys_db0: string[];
}

/** Statuses of work that is waiting or running (the spec's queue depth). */
const ACTIVE_STATUSES = new Set(["Pending", "Running"]);

/**
 * A stable integer identity of the task-queue application: the task hub every function in this
 * app registers with. One app, one hub, so the three ids of §2.9 are the same number by design.
 */
export function taskAppId(taskHubName: string): number {
  return Number.parseInt(createHash("sha256").update(taskHubName).digest("hex").slice(0, 12), 16);
}

/**
 * Computes the diagnostics of §2.9 from the task hub: counts of pending and running instances per
 * queue label, `fallback` for instances of orchestrations with no label (never consumed by design,
 * so it must be 0), and `redis_keys_db0` naming those orphaned instances.
 */
export function computeQueueDiagnostics(input: {
  taskHubName: string;
  instances: readonly HubInstance[];
  /** The orchestration whose route is reported in `resolved_route` (the no-op by default). */
  resolvedFor?: string;
}): QueueDiagnostics {
  const id = taskAppId(input.taskHubName);
  const queues: Record<string, number> = Object.fromEntries([...QUEUE_NAMES, FALLBACK_QUEUE].map((q) => [q, 0]));
  const orphans: string[] = [];
  for (const inst of input.instances) {
    if (!ACTIVE_STATUSES.has(inst.runtimeStatus)) continue;
    const queue = queueOf(inst.name);
    queues[queue] = (queues[queue] ?? 0) + 1;
    if (queue === FALLBACK_QUEUE) orphans.push(`${inst.name}:${inst.instanceId}`);
  }
  return {
    task_app_id: id,
    celery_app_id: id,
    current_app_id: id,
    task_app_main: input.taskHubName,
    task_app_routes: Object.fromEntries(Object.entries(ORCHESTRATION_QUEUES).map(([name, queue]) => [name, { queue }])),
    task_app_default_queue: "default",
    resolved_route: { queue: queueOf(input.resolvedFor ?? "noop") },
    queues,
    redis_keys_db0: orphans,
  };
}

/** Maps a durable runtime status to the task states the diagnostics report (Celery's vocabulary). */
export function taskState(runtimeStatus: string): "PENDING" | "STARTED" | "SUCCESS" | "FAILURE" | "REVOKED" {
  switch (runtimeStatus) {
    case "Completed":
      return "SUCCESS";
    case "Failed":
      return "FAILURE";
    case "Terminated":
      return "REVOKED";
    case "Running":
    case "Suspended":
    case "ContinuedAsNew":
      return "STARTED";
    default:
      return "PENDING";
  }
}
