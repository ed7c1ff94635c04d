import { Orchestrations } from "../ops/queue-labels.js";

/** Operation types the dashboard reports, by the orchestration that carries them out. */
export const OPERATION_TYPES: Readonly<Record<string, string>> = Object.freeze({
  [Orchestrations.submitBlastJob]: "blast.submit",
  [Orchestrations.prepareDatabase]: "database.prepare",
  [Orchestrations.warmDatabase]: "database.warmup",
  [Orchestrations.checkDatabaseUpdates]: "database.update_check",
  [Orchestrations.provisionCluster]: "cluster.provision",
});

export type OperationState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** Operation ids are the orchestration instance ids: `op-` and 32 hex digits. */
export const OPERATION_ID = /^op-[0-9a-f]{32}$/;

export function newOperationId(): string {
  return `op-${crypto.randomUUID().replaceAll("-", "")}`;
}

/**
 * The operation state from the orchestration's runtime status and, for a completed one, its
 * outcome (an orchestration may finish normally while reporting a failed or cancelled result).
 */
export function operationState(runtimeStatus: string, output: unknown): OperationState {
  switch (runtimeStatus) {
    case "Pending":
      return "queued";
    case "Running":
    case "Suspended":
    case "ContinuedAsNew":
      return "running";
    case "Failed":
      return "failed";
    case "Terminated":
      return "cancelled";
    case "Completed": {
      const outcome = (output as { outcome?: string } | null)?.outcome;
      return outcome === "failed" ? "failed" : outcome === "cancelled" ? "cancelled" : "succeeded";
    }
    default:
      return "queued";
  }
}

export function operationView(input: {
  operationId: string;
  operationType: string;
  state: OperationState;
  createdAt: string;
  updatedAt: string;
  pollAfterSeconds: number;
  target?: Record<string, unknown>;
  targetLink?: string;
  error?: string;
}) {
  const terminal = input.state === "succeeded" || input.state === "failed" || input.state === "cancelled";
  return {
    operation_id: input.operationId,
    operation_type: input.operationType,
    state: input.state,
    created_at: input.createdAt,
    updated_at: input.updatedAt,
    poll_after_seconds: terminal ? 0 : input.pollAfterSeconds,
    links: { self: `/api/operations/${input.operationId}`, ...(input.targetLink ? { target: input.targetLink } : {}) },
    ...(input.target ? { target: input.target } : {}),
    ...(input.state === "failed" ? { error: { detail: input.error || "the operation failed" } } : {}),
  };
}
