import type { ApprovalService } from "./approval-service.js";
import type { ApprovalStore } from "./approval-store.js";
import { type DeliveryPolicy, type LoadPolicy, planDelivery } from "./load-policy.js";

/** Durable names of the approval orchestration and its activities. */
export const ApprovalOrchestration = {
  name: "approvalRequest",
  decidedEvent: "approval_decided",
  plan: "approvalPlan",
  deliver: "approvalDeliver",
  remind: "approvalRemind",
  expire: "approvalExpire",
  settle: "approvalSettle",
} as const;

/** The orchestration's input: the parked item's id (also the instance id) and the filing request. */
export interface ApprovalRequestInput {
  approval_id: string;
  request_id: string;
}

/** The deliver activity's input: the plan's policy and send time name the group a digest covers. */
export interface ApprovalDeliverInput extends ApprovalRequestInput {
  policy: string;
  send_at: string;
}

/** While the kill switch holds A1 delivery, a held request or reminder is offered again after this long. */
export const REDELIVER_SECONDS = 60;

/** What the plan activity tells the orchestrator; times are ISO strings so the history replays. */
export interface ApprovalPlan {
  state: string;
  policy: string;
  send_at: string;
  expires_at: string;
  reminder_times: string[];
}

/** How the orchestration ended (or, for a refused decision, that the item is still pending). */
export interface ApprovalSettlement {
  approval_id: string;
  state: string;
  execution: unknown;
}

/**
 * The approval orchestration's activities, as factories over the approval service (DESIGN §6):
 * each is safe to replay — delivery and reminders are claimed once, expiry and execution are
 * compare-and-swap on the item.
 */
export function createApprovalActivities(deps: {
  approvals: ApprovalService;
  store: ApprovalStore;
  loadPolicy: LoadPolicy;
  now?: () => Date;
}) {
  const now = deps.now ?? (() => new Date());
  const settlement = async (approvalId: string): Promise<ApprovalSettlement> => {
    const item = await deps.store.get(approvalId);
    return { approval_id: approvalId, state: item?.state ?? "missing", execution: item?.execution ?? null };
  };
  return {
    async plan(input: ApprovalRequestInput): Promise<ApprovalPlan> {
      const item = await deps.store.get(input.approval_id);
      if (!item)
        return {
          state: "missing",
          policy: "send_now",
          send_at: now().toISOString(),
          expires_at: now().toISOString(),
          reminder_times: [],
        };
      const planned = planDelivery(item.severity, new Date(item.created_at), deps.loadPolicy);
      return {
        state: item.state,
        ...planned,
        expires_at: item.expires_at,
        reminder_times: deps.approvals.reminderTimes(item).map((d) => d.toISOString()),
      };
    },
    deliver: (input: ApprovalDeliverInput) =>
      deps.approvals.deliverRequest(
        input.approval_id,
        input.request_id,
        now(),
        input.policy === "send_now" || !input.send_at
          ? undefined
          : { policy: input.policy as DeliveryPolicy, send_at: input.send_at },
      ),
    remind: (input: ApprovalRequestInput & { index: number }) =>
      deps.approvals.remind(input.approval_id, input.index, input.request_id, now()),
    async expire(input: ApprovalRequestInput): Promise<ApprovalSettlement> {
      await deps.approvals.expire(input.approval_id, input.request_id, now());
      // An approval recorded before the TTL whose deciding host died before executing it (and
      // before raising the decision event) is carried out here, once; a pending item timed out.
      await deps.approvals.executeApproved(input.approval_id, input.request_id, now());
      return settlement(input.approval_id);
    },
    /** After a decision event: executes an approved action if the deciding request did not finish it. */
    async settle(input: ApprovalRequestInput): Promise<ApprovalSettlement> {
      await deps.approvals.executeApproved(input.approval_id, input.request_id, now());
      return settlement(input.approval_id);
    },
  };
}
