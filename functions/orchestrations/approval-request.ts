import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler, Task } from "durable-functions";
import {
  type ApprovalDeliverInput,
  type ApprovalPlan,
  type ApprovalRequestInput,
  type ApprovalSettlement,
  ApprovalOrchestration,
  REDELIVER_SECONDS,
} from "../../shared/console/approvals/approval-activities.js";
import { consoleParts } from "../composition/console-deps.js";
import { orchestrationClient, withInvocationDurable } from "../composition/http-route.js";

const activities = async () => (await consoleParts()).approvalActivities;

df.app.activity(ApprovalOrchestration.plan, {
  handler: (input: ApprovalRequestInput) => activities().then((a) => a.plan(input)),
});
df.app.activity(ApprovalOrchestration.deliver, {
  handler: (input: ApprovalDeliverInput) => activities().then((a) => a.deliver(input)),
});
df.app.activity(ApprovalOrchestration.remind, {
  handler: (input: ApprovalRequestInput & { index: number }) => activities().then((a) => a.remind(input)),
});
df.app.activity(ApprovalOrchestration.expire, {
  handler: (input: ApprovalRequestInput) => activities().then((a) => a.expire(input)),
});
// Settling may execute the approved action, whose executor may start or signal an orchestration: it gets a durable client.
df.app.activity(ApprovalOrchestration.settle, {
  extraInputs: [df.input.durableClient()],
  handler: (input: ApprovalRequestInput, context) =>
    withInvocationDurable(orchestrationClient(context), () => activities().then((a) => a.settle(input))),
});

/**
 * Waits before each new attempt of a failed activity (a storage or channel hiccup): an item must not
 * be left parked with no orchestration to deliver or time it out. After the last, the failure stands.
 */
const ACTIVITY_RETRY_SECONDS = [15, 60, 240] as const;

/** Calls `name`, retrying a failure on durable timers (deterministic: the waits are in the history). */
function* callReliably<T>(context: OrchestrationContext, name: string, input: unknown): Generator<Task, T, unknown> {
  for (let attempt = 0; ; attempt++) {
    try {
      return (yield context.df.callActivity(name, input)) as T;
    } catch (error) {
      const wait = ACTIVITY_RETRY_SECONDS[attempt];
      if (wait === undefined) throw error;
      yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + wait * 1000));
    }
  }
}

/**
 * One human approval (A1): the item is already parked when this starts. Plans the delivery (load
 * policy), sends the request (alone, or in its group's one digest), sends reminders at their
 * fixed times, and ends on the first of a recorded decision (the `approval_decided` event; the
 * approved action runs exactly once) or the TTL (a durable timer; `timeout` is final). While the
 * kill switch holds A1 delivery, a held send is offered again every REDELIVER_SECONDS, so delivery
 * resumes within that long of the switch going off. Deterministic: only context.df calls.
 */
export const approvalRequest: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<ApprovalRequestInput>();
  const plan: ApprovalPlan = yield* callReliably<ApprovalPlan>(context, ApprovalOrchestration.plan, input);
  if (plan.state !== "pending")
    return yield* callReliably<ApprovalSettlement>(context, ApprovalOrchestration.settle, input);
  const at = (iso: string) => new Date(iso);
  const later = (from: Date) => new Date(from.getTime() + REDELIVER_SECONDS * 1000);
  const expiresAt = at(plan.expires_at);
  const reminders = plan.reminder_times.map(at);
  let delivered = false;
  let deliverAt = at(plan.send_at);
  let reminder = reminders.findIndex((t) => t > context.df.currentUtcDateTime);
  if (reminder < 0) reminder = reminders.length;
  let remindAt = reminders[reminder];
  context.df.setCustomStatus({ phase: "pending", policy: plan.policy });
  for (;;) {
    const now = context.df.currentUtcDateTime;
    if (now >= expiresAt) {
      const expired = yield* callReliably<ApprovalSettlement>(context, ApprovalOrchestration.expire, input);
      context.df.setCustomStatus({ phase: expired.state });
      return expired;
    }
    if (!delivered && deliverAt <= now) {
      const deliver: ApprovalDeliverInput = { ...input, policy: plan.policy, send_at: plan.send_at };
      const outcome = yield* callReliably<string>(context, ApprovalOrchestration.deliver, deliver);
      delivered = outcome !== "held";
      if (!delivered) deliverAt = later(now);
      continue;
    }
    if (delivered && remindAt && remindAt <= now) {
      // A reminder held past the next one's time is not sent twice: only the latest due one goes out.
      while (reminder + 1 < reminders.length && (reminders[reminder + 1] as Date) <= now) reminder++;
      const outcome = yield* callReliably<string>(context, ApprovalOrchestration.remind, { ...input, index: reminder });
      if (outcome === "held") remindAt = later(now);
      else remindAt = reminders[++reminder];
      continue;
    }
    const wakeAt = !delivered ? deliverAt : remindAt;
    const next = wakeAt && wakeAt < expiresAt ? wakeAt : expiresAt;
    const timer = context.df.createTimer(next);
    const decided = context.df.waitForExternalEvent(ApprovalOrchestration.decidedEvent);
    const winner: unknown = yield context.df.Task.any([timer, decided]);
    if (winner === decided) {
      timer.cancel();
      const settled = yield* callReliably<ApprovalSettlement>(context, ApprovalOrchestration.settle, input);
      if (settled.state !== "pending") {
        context.df.setCustomStatus({ phase: settled.state });
        return settled;
      }
    }
  }
};

df.app.orchestration(ApprovalOrchestration.name, approvalRequest);
