import { createRequire } from "node:module";
import { beforeAll, describe, expect, it } from "vitest";
import { PRIVATE_FIELD_MOVED } from "../../local/durable/host-invoker.js";
import {
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

const NOOP = "functions/orchestrations/noop.ts";
let replayer: OrchestrationReplayer;

beforeAll(async () => {
  replayer = await loadOrchestrations([NOOP]);
});

describe("the durable-functions internals the local durable backend reads", () => {
  it("durable-functions is the minor version the backend was written against (package.json pins ~3.5.0)", () => {
    const { version } = createRequire(import.meta.url)("durable-functions/package.json") as { version: string };
    expect(version, `durable-functions ${version} is installed; ${PRIVATE_FIELD_MOVED}`).toMatch(/^3\.5\./);
  });

  it("an episode's open tasks are on context.df.taskOrchestratorExecutor, with the fields the backend reads", async () => {
    const outcome = await replayer.run(new OrchestrationHistory("noop", { message: "hello" }));
    // The invoker refuses an orchestration context without the field, naming it.
    expect(outcome.kind === "failed" ? outcome.message : "", PRIVATE_FIELD_MOVED).not.toContain(PRIVATE_FIELD_MOVED);
    expect(outcome.kind, PRIVATE_FIELD_MOVED).toBe("ok");
    if (outcome.kind !== "ok") return;
    const tasks = Object.entries(outcome.executor.openTasks);
    expect(tasks.length, PRIVATE_FIELD_MOVED).toBe(1);
    const [key, task] = tasks[0] ?? [];
    // The engine keys new work by the task id and reads the scheduled action from actionObj.
    expect(key, PRIVATE_FIELD_MOVED).toBe("0");
    expect(task?.id, PRIVATE_FIELD_MOVED).toBe(0);
    expect(task?.actionObj, PRIVATE_FIELD_MOVED).toMatchObject({
      functionName: "noopEcho",
      input: { message: "hello" },
    });
  });
});
