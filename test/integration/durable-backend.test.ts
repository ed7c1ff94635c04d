import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DURABLE_TEST_APP, eventually, startStack, type TestStack } from "../support/local-stack.js";

interface Status {
  runtimeStatus: string;
  output: unknown;
  customStatus: unknown;
  history?: { EventType: number; EventId: number; TaskScheduledId?: number; TimerId?: number; Name?: string }[];
}

let stack: TestStack;
let rpc: string;
let log: string;

async function startOrchestration(name: string, input?: unknown, instanceId?: string): Promise<string> {
  const res = await fetch(`${rpc}orchestrators/${name}${instanceId ? `/${instanceId}` : ""}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: input === undefined ? "" : JSON.stringify(input),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

async function status(id: string, showHistory = false): Promise<Status> {
  const res = await fetch(`${rpc}instances/${id}${showHistory ? "?showHistory=true" : ""}`);
  return (await res.json()) as Status;
}

async function finished(id: string, timeoutMs = 15_000): Promise<Status> {
  return eventually(async () => {
    const s = await status(id, true);
    return ["Completed", "Failed", "Terminated"].includes(s.runtimeStatus) ? s : undefined;
  }, timeoutMs);
}

async function raise(id: string, event: string, data: unknown): Promise<number> {
  const res = await fetch(`${rpc}instances/${id}/raiseEvent/${event}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(data),
  });
  return res.status;
}

beforeAll(async () => {
  log = path.join(mkdtempSync(path.join(tmpdir(), "bp-durable-")), "activity.log");
  stack = await startStack({
    env: { BLASTPLANE_FUNCTIONS_ENTRY: DURABLE_TEST_APP, DURABLE_TEST_LOG: log, TEST_TIMER_SCHEDULE: "0 0 0 1 1 *" },
  });
  rpc = stack.info.durable_rpc_url;
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("local durable backend: the Durable Task protocol through the library's own replay", () => {
  it("runs a sequence of activities, acting on each cumulative action once", async () => {
    const id = await startOrchestration("sequence");
    const done = await finished(id);
    expect(done.runtimeStatus).toBe("Completed");
    expect(done.output).toEqual(["a", "b", "c"]);
    const scheduled = done.history?.filter((e) => e.EventType === 4) ?? [];
    // Each replay returns every action so far; only new ones may be scheduled.
    expect(scheduled.map((e) => e.EventId)).toEqual([0, 1, 2]);
    // Every episode starts with OrchestratorStarted and ends with OrchestratorCompleted.
    const started = done.history?.filter((e) => e.EventType === 12).length ?? 0;
    const completed = done.history?.filter((e) => e.EventType === 13).length ?? 0;
    expect(started).toBeGreaterThanOrEqual(4);
    expect(started).toBe(completed);
  });

  it("fans out with Task.all and completes each task by its sequence number", async () => {
    const id = await startOrchestration("fanOut", 10);
    const done = await finished(id);
    expect(done.output).toBe(45);
    expect(done.history?.filter((e) => e.EventType === 4).map((e) => e.EventId)).toEqual([
      0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
    ]);
  });

  it("retries callActivityWithRetry with a timer id and a new task id per failed attempt", async () => {
    const id = await startOrchestration("retrying", { key: "r1", failTimes: 2, maxAttempts: 4 });
    const done = await finished(id);
    expect(done.output).toEqual({ attempts: 3, after: "after" });
    const h = done.history ?? [];
    // attempt 1 = task 0, retry timer 1, attempt 2 = task 2, timer 3, attempt 3 = task 4, then "after" = 5.
    expect(h.filter((e) => e.EventType === 4).map((e) => e.EventId)).toEqual([0, 2, 4, 5]);
    expect(h.filter((e) => e.EventType === 10).map((e) => e.EventId)).toEqual([1, 3]);
    expect(h.filter((e) => e.EventType === 6).map((e) => e.TaskScheduledId)).toEqual([0, 2]);
    // Backoff: 200 ms then 400 ms between attempts.
    const times = readFileSync(log, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("flaky r1 "))
      .map((l) => Number(l.split(" at ")[1]));
    expect(times).toHaveLength(3);
    expect((times[1] ?? 0) - (times[0] ?? 0)).toBeGreaterThanOrEqual(190);
    expect((times[2] ?? 0) - (times[1] ?? 0)).toBeGreaterThanOrEqual(390);
  });

  it("surfaces the last failure once every retry attempt has failed", async () => {
    const id = await startOrchestration("retrying", { key: "r2", failTimes: 10, maxAttempts: 2 });
    const done = await finished(id);
    expect(done.runtimeStatus).toBe("Completed");
    expect(done.output).toMatchObject({ gaveUp: true });
    expect(String((done.output as { message: string }).message)).toContain("flaky failure 2");
  });

  it("Task.any: an external event beats the durable timer", async () => {
    const id = await startOrchestration("raceTimer", { timeoutMs: 60_000 });
    await eventually(async () => ((await status(id)).customStatus === "waiting" ? true : undefined));
    expect(await raise(id, "approve", { user: "alice" })).toBe(202);
    const done = await finished(id);
    expect(done.output).toEqual({ outcome: "approved", by: { user: "alice" } });
  });

  it("Task.any: the durable timer fires when no event arrives", async () => {
    const id = await startOrchestration("raceTimer", { timeoutMs: 300 });
    const done = await finished(id);
    expect(done.output).toEqual({ outcome: "timed-out" });
    expect(done.history?.some((e) => e.EventType === 11 && e.TimerId === 0)).toBe(true);
  });

  it("buffers an external event raised before the orchestration waits for it", async () => {
    const id = await startOrchestration("twoEvents");
    await eventually(async () => ((await status(id)).runtimeStatus === "Running" ? true : undefined));
    expect(await raise(id, "second", 2)).toBe(202);
    expect(await raise(id, "first", 1)).toBe(202);
    const done = await finished(id);
    expect(done.output).toEqual([1, 2]);
  });

  it("runs sub-orchestrations and returns their outputs to the parent", async () => {
    const id = await startOrchestration("parent");
    const done = await finished(id);
    expect(done.output).toEqual({ child: ["a", "b", "c"], doubled: 6 });
  });

  it("continueAsNew restarts with the new input and a fresh history", async () => {
    const id = await startOrchestration("counter", 0);
    const done = await finished(id);
    expect(done.output).toBe(3);
    expect(done.history?.filter((e) => e.EventType === 0)).toHaveLength(1);
  });

  it("records a failed orchestration with its error", async () => {
    const id = await startOrchestration("failing");
    const done = await finished(id);
    expect(done.runtimeStatus).toBe("Failed");
    expect(String(done.output)).toContain("orchestrator gave up on purpose");
  });

  it("terminates, suspends, resumes and purges instances", async () => {
    const a = await startOrchestration("twoEvents");
    await eventually(async () => ((await status(a)).runtimeStatus === "Running" ? true : undefined));
    expect((await fetch(`${rpc}instances/${a}/terminate?reason=stop`, { method: "POST" })).status).toBe(202);
    expect((await status(a)).runtimeStatus).toBe("Terminated");
    expect((await status(a)).output).toBe("stop");
    expect(await raise(a, "first", 1)).toBe(410);

    const b = await startOrchestration("twoEvents");
    await eventually(async () => ((await status(b)).runtimeStatus === "Running" ? true : undefined));
    expect((await fetch(`${rpc}instances/${b}/suspend?reason=hold`, { method: "POST" })).status).toBe(202);
    expect((await status(b)).runtimeStatus).toBe("Suspended");
    await raise(b, "first", 1);
    await raise(b, "second", 2);
    // The backend handles an instance's work in arrival order, so once a second suspend is answered
    // the episodes the two events signalled have run: they must have left the instance as it was.
    expect((await fetch(`${rpc}instances/${b}/suspend?reason=hold`, { method: "POST" })).status).toBe(202);
    const held = await status(b, true);
    expect(held.runtimeStatus).toBe("Suspended");
    expect(held.history?.filter((e) => e.EventType === 15)).toEqual([]);
    expect((await fetch(`${rpc}instances/${b}/resume?reason=go`, { method: "POST" })).status).toBe(202);
    expect((await finished(b)).output).toEqual([1, 2]);

    expect((await fetch(`${rpc}instances/${b}`, { method: "DELETE" })).status).toBe(200);
    expect((await fetch(`${rpc}instances/${b}`)).status).toBe(404);
  });

  it("refuses a second start of a running instance id, an unknown orchestrator, and an unknown instance", async () => {
    const id = await startOrchestration("twoEvents", undefined, "fixed-id-1");
    expect(id).toBe("fixed-id-1");
    const again = await fetch(`${rpc}orchestrators/twoEvents/fixed-id-1`, { method: "POST", body: "" });
    expect(again.status).toBe(409);
    expect((await fetch(`${rpc}orchestrators/doesNotExist`, { method: "POST", body: "" })).status).toBe(400);
    expect((await fetch(`${rpc}instances/nope-nope`)).status).toBe(404);
    expect((await fetch(`${rpc}orchestrators/twoEvents`, { method: "POST", body: "{not json" })).status).toBe(400);
  });

  it("lists instances filtered by runtime status", async () => {
    const res = await fetch(`${rpc}instances/?runtimeStatus=Completed`);
    expect(res.status).toBe(200);
    const list = (await res.json()) as { runtimeStatus: string }[];
    expect(list.length).toBeGreaterThan(3);
    expect(list.every((i) => i.runtimeStatus === "Completed")).toBe(true);
    expect((await fetch(`${rpc}instances/?runtimeStatus=Bogus`)).status).toBe(400);
  });
});
