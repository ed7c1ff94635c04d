import { ApprovalOrchestration } from "../../shared/console/approvals/approval-activities.js";
import type { TurnHooks } from "../../shared/console/coordinator/coordinator.js";
import type { RouteScope } from "./http-route.js";

/**
 * The coordinator's hooks over a route's durable client: a filed approval starts its orchestration
 * (one per item: the instance id is the approval id, so a repeat finds the first), a decided one
 * raises its decision event. Shared by `POST /api/chat` and the chat-channel routes.
 */
export function approvalHooks(scope: Pick<RouteScope, "durable" | "logger">): TurnHooks {
  return {
    async approvalFiled(approvalId, requestId) {
      if (await scope.durable().getInstance(approvalId)) return;
      await scope.durable().startNew(ApprovalOrchestration.name, {
        instanceId: approvalId,
        input: { approval_id: approvalId, request_id: requestId },
      });
    },
    async approvalDecided(approvalId) {
      await scope
        .durable()
        .raiseEvent(approvalId, ApprovalOrchestration.decidedEvent, { approval_id: approvalId })
        .catch((error: unknown) => {
          // The decision is recorded and executed already; the orchestration also ends at its TTL.
          scope.logger.warn("approval decision event not delivered", {
            approval_id: approvalId,
            error: error instanceof Error ? error.message : String(error),
          });
        });
    },
  };
}
