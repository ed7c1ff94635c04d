import { beforeAll, describe, expect, it } from "vitest";
import { CANCEL_EVENT, Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/**
 * The submit orchestration replayed through the real durable-functions library against hand-built
 * histories: each test is one branch of `functions/orchestrations/submit-blast-job.ts`.
 */
const MODULE = "functions/orchestrations/submit-blast-job.ts";
const JOB = "5f0c3a56-8d4e-4c1b-9a51-2a0f3b7c9d10";
const UPSTREAM = "job-0123456789abcdef";
const POLL_SECONDS = 7;

let replayer: OrchestrationReplayer;
let names: { submit: string; poll: string; cancel: string; fail: string };

beforeAll(async () => {
  replayer = await loadOrchestrations([MODULE]);
  names = replayer.modules[MODULE]?.SubmitActivities as typeof names;
});

const accepted = { kind: "accepted", job_id: UPSTREAM, status: "queued", replayed: false };
const running = { status: "running", terminal: false, cancel_requested: false, error: "" };

/** A fresh submission (no job-API id yet). */
function fresh(): OrchestrationHistory {
  return new OrchestrationHistory(Orchestrations.submitBlastJob, {
    dashboard_job_id: JOB,
    poll_interval_seconds: POLL_SECONDS,
  });
}

/** An execution that starts polling (continued-as-new, or accepted before): the job-API id is known. */
function polling(): OrchestrationHistory {
  return new OrchestrationHistory(Orchestrations.submitBlastJob, {
    dashboard_job_id: JOB,
    openapi_job_id: UPSTREAM,
    poll_interval_seconds: POLL_SECONDS,
  });
}

function callActivity(functionName: string, input: unknown) {
  return { actionType: ActionType.CallActivity, functionName, input };
}

/** The compound `Task.any([poll timer, cancel event])` the polling loop yields. */
function pollWait(history: OrchestrationHistory, isCanceled = false) {
  return {
    actionType: ActionType.WhenAny,
    compoundActions: [
      { actionType: ActionType.CreateTimer, fireAt: history.fireAt(POLL_SECONDS), isCanceled },
      { actionType: ActionType.WaitForExternalEvent, externalEventName: CANCEL_EVENT, reason: "ExternalEvent" },
    ],
  };
}

describe("submitBlastJob replay: submitting", () => {
  it("first calls the submit activity through its registered handle, with the dashboard job id", async () => {
    const state = await replayer.replay(fresh());
    expect(state.isDone).toBe(false);
    expect(state.customStatus).toEqual({ phase: "submitting" });
    expect(state.newActions).toEqual([callActivity(names.submit, { dashboard_job_id: JOB })]);
  });

  it("a 429 from the job API waits on a durable timer for its Retry-After, then submits again", async () => {
    const history = fresh().activityCompleted(names.submit, {
      kind: "retry",
      after_seconds: 17,
      reason: "job API answered 429: queue is full",
    });
    const waiting = await replayer.replay(history);
    expect(waiting.isDone).toBe(false);
    expect(waiting.newActions).toEqual([
      { actionType: ActionType.CreateTimer, fireAt: history.fireAt(17), isCanceled: false },
    ]);

    history.timerFired(17);
    const resubmitting = await replayer.replay(history);
    expect(resubmitting.newActions).toEqual([callActivity(names.submit, { dashboard_job_id: JOB })]);
  });

  it("without a usable Retry-After the retry backs off exponentially (2^attempt s), and never waits more than 300 s", async () => {
    const history = fresh().activityCompleted(names.submit, {
      kind: "retry",
      after_seconds: 0,
      reason: "job API unavailable",
    });
    expect((await replayer.replay(history)).newActions).toEqual([
      { actionType: ActionType.CreateTimer, fireAt: history.fireAt(2), isCanceled: false },
    ]);

    history
      .timerFired(2)
      .activityCompleted(names.submit, { kind: "retry", after_seconds: 1, reason: "job API unavailable" });
    expect((await replayer.replay(history)).newActions).toEqual([
      { actionType: ActionType.CreateTimer, fireAt: history.fireAt(4), isCanceled: false },
    ]);

    history.timerFired(4).activityCompleted(names.submit, {
      kind: "retry",
      after_seconds: 3600,
      reason: "job API answered 429: queue is full",
    });
    expect((await replayer.replay(history)).newActions).toEqual([
      { actionType: ActionType.CreateTimer, fireAt: history.fireAt(300), isCanceled: false },
    ]);
  });

  it("gives up after 20 attempts: the dashboard job is failed with the reason and the orchestration ends failed", async () => {
    const history = fresh();
    for (let attempt = 1; attempt <= 19; attempt++) {
      history
        .activityCompleted(names.submit, {
          kind: "retry",
          after_seconds: 5,
          reason: "job API answered 429: queue is full",
        })
        .timerFired(5);
    }
    // The 20th attempt is still made.
    expect((await replayer.replay(history)).newActions).toEqual([
      callActivity(names.submit, { dashboard_job_id: JOB }),
    ]);

    // The 20th answer is a retry too: no more waiting, the job fails at once.
    history.activityCompleted(names.submit, {
      kind: "retry",
      after_seconds: 5,
      reason: "job API answered 429: queue is full",
    });
    const error = "the job API did not accept the job after 20 attempts";
    const giving = await replayer.replay(history);
    expect(giving.isDone).toBe(false);
    expect(giving.newActions).toEqual([callActivity(names.fail, { dashboard_job_id: JOB, error })]);

    history.activityCompleted(names.fail, null);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.newActions).toEqual([]);
    expect(done.output).toEqual({ outcome: "failed", error });
  });

  it("a refusal (4xx) fails the dashboard job at once with the job API's detail, without retrying", async () => {
    const history = fresh().activityCompleted(names.submit, { kind: "rejected", detail: "db: unknown database" });
    expect((await replayer.replay(history)).newActions).toEqual([
      callActivity(names.fail, { dashboard_job_id: JOB, error: "db: unknown database" }),
    ]);
    history.activityCompleted(names.fail, null);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "failed", error: "db: unknown database" });
  });

  it("a refused submit's field issues stay structured in the orchestration's output (not a JSON string in the error)", async () => {
    const issues = [{ loc: ["body", "db"], msg: "database 'x' does not exist", type: "value_error" }];
    const history = fresh()
      .activityCompleted(names.submit, { kind: "rejected", detail: "body.db: database 'x' does not exist", issues })
      .activityCompleted(names.fail, null);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "failed", error: "body.db: database 'x' does not exist", issues });
  });

  it("once accepted, waits for the poll interval or the cancel event, whichever comes first", async () => {
    const history = fresh().activityCompleted(names.submit, accepted);
    const state = await replayer.replay(history);
    expect(state.customStatus).toEqual({ phase: "polling", openapi_job_id: UPSTREAM });
    expect(state.newActions).toEqual([pollWait(history)]);
  });
});

describe("submitBlastJob replay: polling", () => {
  it("polls the job API when the poll timer fires, and ends with the job's outcome once it is terminal", async () => {
    const history = polling().timerFired(POLL_SECONDS);
    expect((await replayer.replay(history)).newActions).toEqual([
      callActivity(names.poll, { dashboard_job_id: JOB, openapi_job_id: UPSTREAM }),
    ]);

    history.activityCompleted(names.poll, running);
    expect((await replayer.replay(history)).newActions).toEqual([pollWait(history)]);

    history
      .timerFired(POLL_SECONDS)
      .activityCompleted(names.poll, { status: "completed", terminal: true, cancel_requested: false, error: "" });
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.newActions).toEqual([]);
    expect(done.customStatus).toEqual({ phase: "done", openapi_job_id: UPSTREAM, job_status: "completed" });
    expect(done.output).toEqual({ outcome: "succeeded", openapi_job_id: UPSTREAM, job_status: "completed", error: "" });
  });

  it("continues as new after 50 polls, carrying the job-API id, so the history stays short", async () => {
    const history = polling();
    for (let poll = 1; poll <= 49; poll++) history.timerFired(POLL_SECONDS).activityCompleted(names.poll, running);
    // After 49 polls it still waits for the 50th.
    const before = await replayer.replay(history);
    expect(before.isDone).toBe(false);
    expect(before.newActions).toEqual([pollWait(history)]);

    history.timerFired(POLL_SECONDS).activityCompleted(names.poll, running);
    const continued = await replayer.replay(history);
    expect(continued.isDone).toBe(true);
    expect(continued.newActions).toEqual([
      {
        actionType: ActionType.ContinueAsNew,
        input: { dashboard_job_id: JOB, openapi_job_id: UPSTREAM, poll_interval_seconds: POLL_SECONDS },
      },
    ]);
  });

  it("the cancel event cancels the poll timer and the job-API job, and ends cancelled", async () => {
    const history = polling().timerFired(POLL_SECONDS).activityCompleted(names.poll, running);
    const waitedOn = pollWait(history, true);
    history.eventWonOverTimer(POLL_SECONDS, CANCEL_EVENT, null);
    const cancelling = await replayer.replay(history);
    // The timer the event beat is cancelled (so the backend drops it), and the job API is told.
    expect(cancelling.actions.at(-2)).toEqual(waitedOn);
    expect(cancelling.newActions).toEqual([
      callActivity(names.cancel, { dashboard_job_id: JOB, openapi_job_id: UPSTREAM }),
    ]);

    history.activityCompleted(names.cancel, { status: "cancelled" });
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "cancelled", openapi_job_id: UPSTREAM, job_status: "cancelled" });
  });

  it("a cancel recorded on the dashboard job (seen by a poll) cancels the job-API job too", async () => {
    const history = polling()
      .timerFired(POLL_SECONDS)
      .activityCompleted(names.poll, { ...running, cancel_requested: true });
    expect((await replayer.replay(history)).newActions).toEqual([
      callActivity(names.cancel, { dashboard_job_id: JOB, openapi_job_id: UPSTREAM }),
    ]);
  });

  it("a cancel that arrives after the job finished records how it ended, by one more poll", async () => {
    const history = polling()
      .eventWonOverTimer(POLL_SECONDS, CANCEL_EVENT, null)
      .activityCompleted(names.cancel, { status: "completed" });
    expect((await replayer.replay(history)).newActions).toEqual([
      callActivity(names.poll, { dashboard_job_id: JOB, openapi_job_id: UPSTREAM }),
    ]);

    history.activityCompleted(names.poll, { status: "completed", terminal: true, cancel_requested: true, error: "" });
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "succeeded", openapi_job_id: UPSTREAM, job_status: "completed", error: "" });
  });
});
