import { beforeAll, describe, expect, it } from "vitest";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/**
 * The database orchestrations (prepare, warm-up on this machine or across the cluster's nodes, update check) and the no-op, replayed through the
 * real durable-functions library against hand-built histories.
 */
const DATABASES = "functions/orchestrations/database-ops.ts";
const NOOP = "functions/orchestrations/noop.ts";

let replayer: OrchestrationReplayer;
let activities: {
  prepare: string;
  warm: string;
  startClusterWarm: string;
  readClusterWarm: string;
  checkUpdates: string;
};
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
      const history = new OrchestrationHistory(c.orchestration, c.input).activityFailed(
        c.activity(),
        "database 16s_demo is not prepared",
      );
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.output).toEqual({ outcome: "failed", error: "database 16s_demo is not prepared" });
    });
  }

  describe("warmDatabase", () => {
    const input = { name: "16s_demo" };
    // Each activity also gets the warm-up's id (the instance id), which keys its failure event.
    const activityInput = { ...input, operation_id: "replay-test-instance" };
    const node = (name: string, state: string, bytesDone: number, error?: string) => ({
      node: name,
      state,
      bytes_done: bytesDone,
      bytes_total: 1000,
      files_done: bytesDone === 1000 ? 4 : 1,
      files_total: 4,
      ...(error ? { error } : {}),
    });
    const view = (state: string, nodes: ReturnType<typeof node>[]) => ({
      database: "16s_demo",
      release: "2026-01-02-01-05-01",
      state,
      nodes,
    });

    it("reports its phase with its input, then asks the job API to warm the cluster", async () => {
      const state = await replayer.replay(new OrchestrationHistory(Orchestrations.warmDatabase, input));
      expect(state.isDone).toBe(false);
      expect(state.customStatus).toEqual({ phase: "warming", ...input });
      expect(state.newActions).toEqual([callActivity(activities.startClusterWarm, activityInput)]);
    });

    it("with the local executor, warms this machine's copy and ends succeeded with that activity's result", async () => {
      const history = new OrchestrationHistory(Orchestrations.warmDatabase, input).activityCompleted(
        activities.startClusterWarm,
        { mode: "local" },
      );
      expect((await replayer.replay(history)).newActions).toEqual([callActivity(activities.warm, activityInput)]);
      const result = { name: "16s_demo", version: "2026-01-02-01-05-01", bytes: 123_456 };
      history.activityCompleted(activities.warm, result);
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.output).toEqual({ outcome: "succeeded", ...result });
    });

    it("on a cluster, reports each node's progress, polls on a durable timer of the job API's poll interval, and ends succeeded with the nodes", async () => {
      const running = view("running", [node("node-a", "succeeded", 1000), node("node-b", "running", 250)]);
      const history = new OrchestrationHistory(Orchestrations.warmDatabase, input).activityCompleted(
        activities.startClusterWarm,
        { mode: "cluster", view: running, poll_seconds: 7 },
      );
      const waiting = await replayer.replay(history);
      expect(waiting.customStatus).toEqual({
        phase: "warming",
        name: "16s_demo",
        release: "2026-01-02-01-05-01",
        nodes: running.nodes,
      });
      expect(waiting.newActions).toEqual([
        { actionType: ActionType.CreateTimer, fireAt: history.fireAt(7), isCanceled: false },
      ]);

      history.timerFired(7);
      expect((await replayer.replay(history)).newActions).toEqual([
        callActivity(activities.readClusterWarm, activityInput),
      ]);
      const finished = view("succeeded", [node("node-a", "succeeded", 1000), node("node-b", "succeeded", 1000)]);
      history.activityCompleted(activities.readClusterWarm, finished);
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.customStatus).toEqual({
        phase: "succeeded",
        name: "16s_demo",
        release: "2026-01-02-01-05-01",
        nodes: finished.nodes,
      });
      expect(done.output).toEqual({
        outcome: "succeeded",
        name: "16s_demo",
        version: "2026-01-02-01-05-01",
        nodes: finished.nodes,
      });
    });

    it("on a cluster, ends failed naming each failed node and the last line of its error", async () => {
      const failed = view("failed", [
        node("node-a", "succeeded", 1000),
        node("node-b", "failed", 10, "reading manifest\nMD5 mismatch for nt.00.nsq"),
      ]);
      const history = new OrchestrationHistory(Orchestrations.warmDatabase, input).activityCompleted(
        activities.startClusterWarm,
        { mode: "cluster", view: failed, poll_seconds: 7 },
      );
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.output).toEqual({
        outcome: "failed",
        error: "warm-up failed on node-b (MD5 mismatch for nt.00.nsq)",
        nodes: failed.nodes,
      });
    });

    it("turns a refused start into a failed operation with the error's first line (not a failed instance)", async () => {
      const history = new OrchestrationHistory(Orchestrations.warmDatabase, input).activityFailed(
        activities.startClusterWarm,
        "database 16s_demo is not prepared",
      );
      const done = await replayer.replay(history);
      expect(done.isDone).toBe(true);
      expect(done.output).toEqual({ outcome: "failed", error: "database 16s_demo is not prepared" });
    });
  });

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
    const history = new OrchestrationHistory(Orchestrations.checkDatabaseUpdates, null).activityFailed(
      activities.checkUpdates,
      "DATABASE_SOURCE_URL is not configured",
    );
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
