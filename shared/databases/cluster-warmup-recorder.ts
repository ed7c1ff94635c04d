import type { ClusterWarmup } from "../jobs/cluster-warmup.js";
import type { Logger } from "../logging/logger.js";
import { recordSignal, warmupFailedEvent } from "../ops/emitters/signal-events.js";
import type { EventLog } from "../ops/events.js";
import type { DatabaseState } from "./database-state.js";

/** The one line a failed cluster warm-up reports: each failed node with the last line of its error. */
export function clusterWarmupFailure(view: ClusterWarmup): string {
  const failed = view.nodes.filter((n) => n.state === "failed");
  return `warm-up failed on ${failed.map((n) => `${n.node}${n.error ? ` (${n.error.split("\n").pop()})` : ""}`).join(", ")}`;
}

/**
 * Records a finished cluster warm-up (the job API's view of it) in the database's state; a failed
 * one also as a `database.warmup_failed` event, once per warm-up (`operationId`) however often the
 * view is read.
 */
export function createClusterWarmupRecorder(deps: {
  state: { patch(name: string, change: Partial<DatabaseState>): Promise<unknown> };
  events: Pick<EventLog, "record">;
  logger: Pick<Logger, "warn">;
  now?: () => Date;
}) {
  const now = deps.now ?? (() => new Date());
  return async (view: ClusterWarmup, operationId: string | undefined): Promise<void> => {
    if (view.state === "succeeded")
      await deps.state.patch(view.database, {
        warm_state: "warm",
        warmed_version: view.release,
        warmed_at: now().toISOString(),
      });
    else if (view.state === "failed") {
      await deps.state.patch(view.database, { warm_state: "failed" });
      const failedNodes = view.nodes.filter((n) => n.state === "failed").map((n) => n.node);
      const event = warmupFailedEvent({
        database: view.database,
        release: view.release,
        attempt: operationId ?? "unnamed",
        mode: "cluster",
        reason: clusterWarmupFailure(view),
        failedNodes,
      });
      await recordSignal(deps.events, event, deps.logger);
    }
  };
}
