import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import { type ApprovalPlan, type ApprovalRequestInput, type ApprovalSettlement, ApprovalOrchestration } from "../../shared/console/approvals/approval-activities.js";
import { consoleParts } from "../console-deps.js";
import { orchestrationClient, withInvocationDurable } from "../http-route.js";

const activities = async () => (await consoleParts()).approvalActivities;

df.app.activity(ApprovalOrchestration.plan, { handler: (input: ApprovalRequestInput) => activities().then((a) => a.plan(input)) });
df.app.activity(ApprovalOrchestration.deliver, { handler: (input: ApprovalRequestInput) => activities().then((a) => a.deliver(input)) });
df.app.activity(ApprovalOrchestration.remind, { handler: (input: ApprovalRequestInput & { index: number }) => activities().then((a) => a.remind(input)) });
df.app.activity(ApprovalOrchestration.expire, { handler: (input: ApprovalRequestInput) => activities().then((a) => a.expire(input)) });
// Settling may execute the approved action, whose executor may start or signal an orchestration: it gets a durable client.
df.app.activity(ApprovalOrchestration.settle, {
  extraInputs: [df.input.durableClient()],
  handler: (input: ApprovalRequestInput, context) => withInvocationDurable(orchestrationClient(context), () => activities().then((a) => a.settle(input))),
});

/** While the kill switch holds A1 delivery, the request is offered again after this long. */
const REDELIVER_SECONDS = 60;

/**
 * One human approval (A1): the item is already parked when this starts. Plans the delivery (load
 * policy), sends the request, sends reminders at their fixed times, and ends on the first of a
 * recorded decision (the `approval_decided` event; the approved action runs exactly once) or the
 * TTL (a durable timer; `timeout` is final). Deterministic: only context.df calls.
 */
export const approvalRequest: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<ApprovalRequestInput>();
  const plan: ApprovalPlan = yield context.df.callActivity(ApprovalOrchestration.plan, input);
  if (plan.state !== "pending") return (yield context.df.callActivity(ApprovalOrchestration.settle, input)) as ApprovalSettlement;
  const at = (iso: string) => new Date(iso);
  let delivered = false;
  let deliverAt = at(plan.send_at);
  let reminder = plan.reminder_times.findIndex((t) => at(t) > context.df.currentUtcDateTime);
  if (reminder < 0) reminder = plan.reminder_times.length;
  context.df.setCustomStatus({ phase: "pending", policy: plan.policy });
  for (;;) {
    const now = context.df.currentUtcDateTime;
    if (!delivered && deliverAt <= now) {
      const outcome: string = yield context.df.callActivity(ApprovalOrchestration.deliver, input);
      delivered = outcome !== "held";
      if (!delivered) deliverAt = new Date(now.getTime() + REDELIVER_SECONDS * 1000);
      continue;
    }
    const candidates = [at(plan.expires_at)];
    if (!delivered) candidates.push(deliverAt);
    if (delivered && reminder < plan.reminder_times.length) candidates.push(at(plan.reminder_times[reminder] as string));
    const next = new Date(Math.min(...candidates.map((d) => d.getTime())));
    const timer = context.df.createTimer(next);
    const decided = context.df.waitForExternalEvent(ApprovalOrchestration.decidedEvent);
    const winner: unknown = yield context.df.Task.any([timer, decided]);
    if (winner === decided) {
      timer.cancel();
      const settled: ApprovalSettlement = yield context.df.callActivity(ApprovalOrchestration.settle, input);
      if (settled.state !== "pending") {
        context.df.setCustomStatus({ phase: settled.state });
        return settled;
      }
      continue;
    }
    if (next.getTime() >= at(plan.expires_at).getTime()) {
      const expired: ApprovalSettlement = yield context.df.callActivity(ApprovalOrchestration.expire, input);
      context.df.setCustomStatus({ phase: expired.state });
      return expired;
    }
    if (delivered && reminder < plan.reminder_times.length && next.getTime() === at(plan.reminder_times[reminder] as string).getTime()) {
      yield context.df.callActivity(ApprovalOrchestration.remind, { ...input, index: reminder });
      reminder++;
    }
  }
};

df.app.orchestration(ApprovalOrchestration.name, approvalRequest);
