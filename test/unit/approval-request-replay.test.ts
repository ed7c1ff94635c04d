import { beforeAll, describe, expect, it } from "vitest";
import {
  ApprovalOrchestration,
  type ApprovalPlan,
  REDELIVER_SECONDS,
} from "../../shared/console/approvals/approval-activities.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/**
 * The approval orchestration replayed through the real durable-functions library against
 * hand-built histories: each test is one branch of `functions/orchestrations/approval-request.ts`.
 */
const MODULE = "functions/orchestrations/approval-request.ts";
const START = new Date("2026-01-05T10:00:00.000Z");
const INPUT = { approval_id: "apr_0123456789abcdef01234567", request_id: "req-1" };
const TTL = 3600;

let replayer: OrchestrationReplayer;
beforeAll(async () => {
  replayer = await loadOrchestrations([MODULE]);
});

const iso = (secondsAfterStart: number) => new Date(START.getTime() + secondsAfterStart * 1000).toISOString();

/** The plan of an item filed at START with a one-hour TTL and reminders 30 and 5 minutes before it. */
function plan(overrides: Partial<ApprovalPlan> = {}): ApprovalPlan {
  return {
    state: "pending",
    policy: "send_now",
    send_at: iso(0),
    expires_at: iso(TTL),
    reminder_times: [iso(TTL - 1800), iso(TTL - 300)],
    ...overrides,
  };
}

function started(): OrchestrationHistory {
  return new OrchestrationHistory(ApprovalOrchestration.name, INPUT, START);
}

/** Seconds from the history's clock to `target` (what the next timer waits). */
function until(history: OrchestrationHistory, target: string): number {
  return (Date.parse(target) - history.now.getTime()) / 1000;
}

function call(functionName: string, input: unknown) {
  return { actionType: ActionType.CallActivity, functionName, input };
}
const deliver = (p: ApprovalPlan) =>
  call(ApprovalOrchestration.deliver, { ...INPUT, policy: p.policy, send_at: p.send_at });
const remind = (index: number) => call(ApprovalOrchestration.remind, { ...INPUT, index });

/** The `Task.any([timer, approval_decided])` every wait of the orchestration yields. */
function waitUntil(fireAt: string) {
  return {
    actionType: ActionType.WhenAny,
    compoundActions: [
      { actionType: ActionType.CreateTimer, fireAt, isCanceled: false },
      {
        actionType: ActionType.WaitForExternalEvent,
        externalEventName: ApprovalOrchestration.decidedEvent,
        reason: "ExternalEvent",
      },
    ],
  };
}

describe("approvalRequest replay: planning and delivery", () => {
  it("the item is parked before the orchestration starts; its first act is the plan activity, before any policy or delivery", async () => {
    const state = await replayer.replay(started());
    expect(state.isDone).toBe(false);
    expect(state.newActions).toEqual([call(ApprovalOrchestration.plan, INPUT)]);
  });

  it("C-282: a critical request planned send_now is delivered at once, then waits for the first reminder or a decision", async () => {
    const p = plan();
    const history = started().activityCompleted(ApprovalOrchestration.plan, p);
    const delivering = await replayer.replay(history);
    expect(delivering.customStatus).toEqual({ phase: "pending", policy: "send_now" });
    expect(delivering.newActions).toEqual([deliver(p)]);

    history.activityCompleted(ApprovalOrchestration.deliver, "sent");
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.reminder_times[0] as string)]);
  });

  it("C-279: a request deferred to the end of quiet hours waits on a durable timer until then, then delivers", async () => {
    const p = plan({ policy: "deferred", send_at: iso(1200), expires_at: iso(7200), reminder_times: [iso(3600)] });
    const history = started().activityCompleted(ApprovalOrchestration.plan, p);
    const waiting = await replayer.replay(history);
    expect(waiting.customStatus).toEqual({ phase: "pending", policy: "deferred" });
    expect(waiting.newActions).toEqual([waitUntil(p.send_at)]);

    history.timerFired(until(history, p.send_at));
    expect((await replayer.replay(history)).newActions).toEqual([deliver(p)]);
  });

  it("C-280: a grouped request waits for its group boundary and delivers with the group's send time, which names its digest", async () => {
    const p = plan({ policy: "grouped", send_at: iso(900) });
    const history = started().activityCompleted(ApprovalOrchestration.plan, p);
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.send_at)]);
    history.timerFired(until(history, p.send_at));
    const delivering = await replayer.replay(history);
    expect(delivering.newActions).toEqual([deliver(p)]);
    // Covered by the group's digest counts as delivered: the next wait is for the first reminder.
    history.activityCompleted(ApprovalOrchestration.deliver, "in_digest");
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.reminder_times[0] as string)]);
  });

  it("an item no longer pending when planned (decided before the orchestration ran) settles and ends without delivering", async () => {
    const history = started().activityCompleted(ApprovalOrchestration.plan, plan({ state: "approved" }));
    expect((await replayer.replay(history)).newActions).toEqual([call(ApprovalOrchestration.settle, INPUT)]);
    history.activityCompleted(ApprovalOrchestration.settle, {
      approval_id: INPUT.approval_id,
      state: "approved",
      execution: { status: "succeeded" },
    });
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({
      approval_id: INPUT.approval_id,
      state: "approved",
      execution: { status: "succeeded" },
    });
  });
});

describe("approvalRequest replay: reminders, expiry and decisions", () => {
  it("C-304 C-309: reminders go out at their planned times, one remind activity each with its index, and never more than declared", async () => {
    const p = plan();
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history.timerFired(until(history, p.reminder_times[0] as string));
    expect((await replayer.replay(history)).newActions).toEqual([remind(0)]);

    history.activityCompleted(ApprovalOrchestration.remind, "sent");
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.reminder_times[1] as string)]);
    history.timerFired(until(history, p.reminder_times[1] as string));
    expect((await replayer.replay(history)).newActions).toEqual([remind(1)]);

    // After the last declared reminder the only thing left to wait for is the TTL.
    history.activityCompleted(ApprovalOrchestration.remind, "sent");
    const waiting = await replayer.replay(history);
    expect(waiting.newActions).toEqual([waitUntil(p.expires_at)]);
    expect(waiting.actions.filter((a) => a.functionName === ApprovalOrchestration.remind)).toHaveLength(2);
  });

  it("C-307: reminders never move the TTL: the expiry timer stays at the planned expiry after each reminder", async () => {
    const p = plan({ reminder_times: [iso(TTL - 600)] });
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history
      .timerFired(until(history, p.reminder_times[0] as string))
      .activityCompleted(ApprovalOrchestration.remind, "sent");
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.expires_at)]);
  });

  it("C-284 C-285: the TTL timer firing calls the expire activity once and ends with the timeout; nothing is settled or executed", async () => {
    const p = plan({ reminder_times: [] });
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history.timerFired(until(history, p.expires_at));
    const expiring = await replayer.replay(history);
    expect(expiring.newActions).toEqual([call(ApprovalOrchestration.expire, INPUT)]);

    const timedOut = { approval_id: INPUT.approval_id, state: "timeout", execution: null };
    history.activityCompleted(ApprovalOrchestration.expire, timedOut);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual(timedOut);
    expect(done.customStatus).toEqual({ phase: "timeout" });
    const called = done.actions.filter((a) => a.actionType === ActionType.CallActivity).map((a) => a.functionName);
    expect(called).toEqual([ApprovalOrchestration.plan, ApprovalOrchestration.deliver, ApprovalOrchestration.expire]);
  });

  it("an item still undelivered at its TTL (deferred past it) times out without being delivered", async () => {
    const p = plan({ policy: "deferred", send_at: iso(TTL + 600), reminder_times: [] });
    const history = started().activityCompleted(ApprovalOrchestration.plan, p);
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.expires_at)]);
    history.timerFired(until(history, p.expires_at));
    expect((await replayer.replay(history)).newActions).toEqual([call(ApprovalOrchestration.expire, INPUT)]);
  });

  it("the approval_decided event before the TTL cancels the timer, settles the decision and ends with it", async () => {
    const p = plan();
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history.eventWonOverTimer(until(history, p.reminder_times[0] as string), ApprovalOrchestration.decidedEvent, {
      approval_id: INPUT.approval_id,
    });
    const settling = await replayer.replay(history);
    expect(settling.newActions).toEqual([call(ApprovalOrchestration.settle, INPUT)]);
    const cancelled = settling.actions.find((a) => a.actionType === ActionType.WhenAny) as unknown as {
      compoundActions: { isCanceled?: boolean }[];
    };
    expect(cancelled.compoundActions[0]?.isCanceled).toBe(true);

    const approved = {
      approval_id: INPUT.approval_id,
      state: "approved",
      execution: { status: "succeeded", result: {} },
    };
    history.activityCompleted(ApprovalOrchestration.settle, approved);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual(approved);
    expect(done.customStatus).toEqual({ phase: "approved" });
    expect(
      done.actions.some(
        (a) => a.functionName === ApprovalOrchestration.expire || a.functionName === ApprovalOrchestration.remind,
      ),
    ).toBe(false);
  });

  it("a rejection arriving as the event ends the orchestration rejected, with nothing executed", async () => {
    const p = plan();
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history.eventWonOverTimer(until(history, p.reminder_times[0] as string), ApprovalOrchestration.decidedEvent, {
      approval_id: INPUT.approval_id,
    });
    const rejected = { approval_id: INPUT.approval_id, state: "rejected", execution: null };
    history.activityCompleted(ApprovalOrchestration.settle, rejected);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual(rejected);
    expect(done.newActions).toEqual([]);
  });

  it("an event for a decision that was refused (the item still pending) goes back to waiting for the same reminder", async () => {
    const p = plan();
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history.eventWonOverTimer(until(history, p.reminder_times[0] as string), ApprovalOrchestration.decidedEvent, {
      approval_id: INPUT.approval_id,
    });
    history.activityCompleted(ApprovalOrchestration.settle, {
      approval_id: INPUT.approval_id,
      state: "pending",
      execution: null,
    });
    const state = await replayer.replay(history);
    expect(state.isDone).toBe(false);
    expect(state.newActions).toEqual([waitUntil(p.reminder_times[0] as string)]);
  });
});

describe("approvalRequest replay: the kill switch", () => {
  it("a delivery held by the kill switch is offered again on a durable timer, and delivery resumes once it is off", async () => {
    const p = plan();
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "held");
    const holding = await replayer.replay(history);
    expect(holding.isDone).toBe(false);
    expect(holding.newActions).toEqual([waitUntil(history.fireAt(REDELIVER_SECONDS - 1))]);

    history.timerFired(REDELIVER_SECONDS - 1);
    expect((await replayer.replay(history)).newActions).toEqual([deliver(p)]);
    history.activityCompleted(ApprovalOrchestration.deliver, "sent");
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(p.reminder_times[0] as string)]);
  });

  it("a reminder held by the kill switch is retried later with the same index; one held past the next sends only the latest", async () => {
    const p = plan({ reminder_times: [iso(TTL - 1800), iso(TTL - 1790)] });
    const history = started()
      .activityCompleted(ApprovalOrchestration.plan, p)
      .activityCompleted(ApprovalOrchestration.deliver, "sent");
    history
      .timerFired(until(history, p.reminder_times[0] as string))
      .activityCompleted(ApprovalOrchestration.remind, "held");
    // Reminder 0 was held at TTL-1799 s; it is offered again REDELIVER_SECONDS after that, past reminder 1's time.
    expect((await replayer.replay(history)).newActions).toEqual([waitUntil(history.fireAt(REDELIVER_SECONDS - 1))]);
    history.timerFired(REDELIVER_SECONDS - 1);
    expect((await replayer.replay(history)).newActions).toEqual([remind(1)]);
    history.activityCompleted(ApprovalOrchestration.remind, "sent");
    const waiting = await replayer.replay(history);
    expect(waiting.newActions).toEqual([waitUntil(p.expires_at)]);
    expect(waiting.actions.filter((a) => a.functionName === ApprovalOrchestration.remind)).toHaveLength(2);
  });
});

describe("approvalRequest replay: failed activities", () => {
  const timer = (fireAt: string) => ({ actionType: ActionType.CreateTimer, fireAt, isCanceled: false });

  it("C-299: a planner that fails mid-choice is retried on a durable timer: the parked item is planned again, then delivered", async () => {
    const history = started().activityFailed(ApprovalOrchestration.plan, "storage unavailable");
    const waiting = await replayer.replay(history);
    expect(waiting.isDone).toBe(false);
    expect(waiting.newActions).toEqual([timer(history.fireAt(15))]);

    history.timerFired(15);
    expect((await replayer.replay(history)).newActions).toEqual([call(ApprovalOrchestration.plan, INPUT)]);
    const p = plan();
    history.activityCompleted(ApprovalOrchestration.plan, p);
    expect((await replayer.replay(history)).newActions).toEqual([deliver(p)]);
  });

  it("a failed delivery is retried after 15, 60 and 240 s; when the fourth attempt fails too, the failure stands", async () => {
    const p = plan();
    const history = started().activityCompleted(ApprovalOrchestration.plan, p);
    for (const wait of [15, 60, 240]) {
      history.activityFailed(ApprovalOrchestration.deliver, "channel down");
      expect((await replayer.replay(history)).newActions).toEqual([timer(history.fireAt(wait))]);
      history.timerFired(wait);
      expect((await replayer.replay(history)).newActions).toEqual([deliver(p)]);
    }
    history.activityFailed(ApprovalOrchestration.deliver, "channel down");
    await expect(replayer.replay(history)).rejects.toThrow(/channel down/);
  });
});
