import { beforeAll, describe, expect, it } from "vitest";
import { Orchestrations } from "../../shared/ops/queue-labels.js";
import { ActionType, loadOrchestrations, OrchestrationHistory, type OrchestrationReplayer } from "../support/orchestration-replay.js";

/**
 * The database orchestrations (prepare, warm-up, update check) and the no-op, replayed through the
 * real durable-functions library against hand-built histories.
 */
const DATABASES = "functions/orchestrations/database-ops.ts";
const NOOP = "functions/orchestrations/noop.ts";

let replayer: OrchestrationReplayer;
let activities: { prepare: string; warm: string; checkUpdates: string };
let noopEcho: string;

beforeAll(async () => {
  replayer = await loadOrchestrations([NOOP, DATABASES]);
  activities = replayer.modules[DATABASES]?.DatabaseActivities as typeof activities;
  noopEcho = replayer.modules[NOOP]?.NOOP_ECHO_ACTIVITY as string;
});

function callActivity(functionName: string, input: unknown) {
  return { actionType: ActionType.CallActivity, functionName, input };
}

const cases = [
  {
    orchestration: Orchestrations.prepareDatabase,
    activity: () => activities.prepare,
    input: { name: "16s_demo", partitions: 2 },
    phase: "preparing",
    result: { name: "16s_demo", version: "2026-01-02-01-05-01", sequences: 40, letters: 58_000, partitions: 2 },
  },
  {
    orchestration: Orchestrations.warmDatabase,
    activity: () => activities.warm,
    input: { name: "16s_demo" },
    phase: "warming",
    result: { name: "16s_demo", version: "2026-01-02-01-05-01", bytes: 123_456 },
  },
];

describe("database orchestrations replay", () => {
  for (const c of cases) {
    it(`${c.orchestration} reports its phase with its input, then calls its activity with that input`, async () => {
      const state = await replayer.replay(new OrchestrationHistory(c.orchestration, c.input));
      expect(state.isDone).toBe(false);
      expect(state.customStatus).toEqual({ phase: c.phase, ...c.input });
      expect(state.newActions).toEqual([callActivity(c.activity(), c.input)]);
    });

    it(`${c.orchestration} ends succeeded with the activity's result`, async () => {
      const history = new OrchestrationHistory(c.orchestration, c.input).activityCompleted(c.activity(), c.result);
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.newActions).toEqual([]);
      expect(done.output).toEqual({ outcome: "succeeded", ...c.result });
    });

    it(`${c.orchestration} turns a failed activity into a failed operation with the error's first line (not a failed instance)`, async () => {
      const history = new OrchestrationHistory(c.orchestration, c.input).activityFailed(c.activity(), "database 16s_demo is not prepared");
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.output).toEqual({ outcome: "failed", error: "database 16s_demo is not prepared" });
    });
  }

  it("checkDatabaseUpdates calls the update check with no input and reports the databases it checked", async () => {
    const history = new OrchestrationHistory(Orchestrations.checkDatabaseUpdates, null);
    const started = await replayer.replay(history);
    expect(started.customStatus).toEqual({ phase: "checking" });
    expect(started.newActions).toEqual([callActivity(activities.checkUpdates, null)]);

    const checked = [
      { name: "16s_demo", update_available: true, latest_release: "2026-02-01-01-05-01" },
      { name: "nt_demo", update_available: false, latest_release: "2026-01-02-01-05-01" },
    ];
    history.activityCompleted(activities.checkUpdates, checked);
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "succeeded", databases: checked });
  });

  it("checkDatabaseUpdates ends failed with the reason when the release source cannot be read", async () => {
    const history = new OrchestrationHistory(Orchestrations.checkDatabaseUpdates, null).activityFailed(activities.checkUpdates, "DATABASE_SOURCE_URL is not configured");
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ outcome: "failed", error: "DATABASE_SOURCE_URL is not configured" });
  });
});

describe("noop orchestration replay", () => {
  it("calls the echo activity with its message and returns what came back", async () => {
    const history = new OrchestrationHistory(Orchestrations.noop, { message: "ping 42" });
    expect((await replayer.replay(history)).newActions).toEqual([callActivity(noopEcho, { message: "ping 42" })]);

    // A reply unlike the request, so the output provably comes back from the activity.
    history.activityCompleted(noopEcho, { message: "echo of ping 42" });
    const done = await replayer.replay(history);
    expect(done.isDone).toBe(true);
    expect(done.output).toEqual({ message: "echo of ping 42" });
  });
});
