import { describe, expect, it } from "vitest";
import { describeOperation } from "../../shared/orchestrations/operations.js";
import type { OrchestrationClient, OrchestrationInstance } from "../../shared/orchestrations/orchestration-client.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";

/** An orchestration client that knows one instance (only `getInstance` is read here). */
function oneInstance(instance: OrchestrationInstance): OrchestrationClient {
  return {
    getInstance: async (id: string) => (id === instance.instanceId ? instance : undefined),
  } as unknown as OrchestrationClient;
}

const at = new Date("2026-11-26T03:00:00.000Z");
const submit = (output: unknown): OrchestrationInstance => ({
  name: Orchestrations.submitBlastJob,
  instanceId: "op-1",
  runtimeStatus: "Completed",
  input: { dashboard_job_id: "0b6e2d38-5f4c-8a51-9c8e-3f1e2d4c5b6a" },
  output,
  createdAt: at,
  lastUpdatedAt: at,
});

describe("an operation's error (issue 11 item 6)", () => {
  it("a refused submit's field issues are structured (loc, msg, type) beside the detail, never a JSON string inside the detail", async () => {
    const issues = [{ loc: ["body", "db"], msg: "database 'x' does not exist", type: "value_error" }];
    const view = await describeOperation(
      oneInstance(submit({ outcome: "failed", error: "body.db: database 'x' does not exist", issues })),
      "op-1",
      { pollAfterSeconds: 5 },
    );
    expect(view?.state).toBe("failed");
    expect(view?.error).toEqual({ detail: "body.db: database 'x' does not exist", issues });
    expect(() => JSON.parse(String(view?.error?.detail))).toThrow();
  });

  it("a failure without field issues has its detail alone", async () => {
    const view = await describeOperation(
      oneInstance(submit({ outcome: "failed", error: "the job API did not accept the job after 20 attempts" })),
      "op-1",
      { pollAfterSeconds: 5 },
    );
    expect(view?.error).toEqual({ detail: "the job API did not accept the job after 20 attempts" });
  });
});
