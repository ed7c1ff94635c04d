import { describe, expect, it } from "vitest";
import { computeQueueDiagnostics, taskState } from "../../shared/orchestrations/diagnostics.js";
import { ORCHESTRATION_QUEUES, QUEUE_NAMES } from "../../shared/orchestrations/queue-labels.js";
import { createFixedWindowLimiter } from "../../shared/http/rate-limiter.js";

describe("queue diagnostics from the task hub", () => {
  it("B-128 B-129 B-134 B-135 reports equal integer app ids and per-label counts of pending and running work", () => {
    const d = computeQueueDiagnostics({
      taskHubName: "blastplane",
      instances: [
        { name: "noop", instanceId: "a", runtimeStatus: "Running" },
        { name: "submitBlastJob", instanceId: "b", runtimeStatus: "Pending" },
        { name: "submitBlastJob", instanceId: "c", runtimeStatus: "Completed" },
        { name: "prepareDatabase", instanceId: "d", runtimeStatus: "Running" },
      ],
    });
    expect(Number.isInteger(d.task_app_id)).toBe(true);
    expect(d.celery_app_id).toBe(d.task_app_id);
    expect(d.current_app_id).toBe(d.task_app_id);
    expect(d.queues).toEqual({ default: 0, cloud: 1, blast: 1, storage: 1, fallback: 0 });
    expect(d.redis_keys_db0).toEqual([]);
    expect(d.resolved_route).toEqual({ queue: "cloud" });
  });

  it("B-137 B-138 routes every orchestration to one of the four queues; an unlabelled one counts as fallback and is named", () => {
    for (const queue of Object.values(ORCHESTRATION_QUEUES)) expect(QUEUE_NAMES).toContain(queue);
    const d = computeQueueDiagnostics({
      taskHubName: "hub",
      instances: [{ name: "mystery", instanceId: "z", runtimeStatus: "Pending" }],
    });
    expect(d.queues.fallback).toBe(1);
    expect(d.redis_keys_db0).toEqual(["mystery:z"]);
  });

  it("gives a different app id to a different task hub", () => {
    const a = computeQueueDiagnostics({ taskHubName: "one", instances: [] });
    const b = computeQueueDiagnostics({ taskHubName: "two", instances: [] });
    expect(a.task_app_id).not.toBe(b.task_app_id);
  });

  it("maps runtime statuses to task states", () => {
    expect(taskState("Completed")).toBe("SUCCESS");
    expect(taskState("Failed")).toBe("FAILURE");
    expect(taskState("Terminated")).toBe("REVOKED");
    expect(taskState("Running")).toBe("STARTED");
    expect(taskState("Pending")).toBe("PENDING");
  });

  it("limits calls per window and says how long to wait", () => {
    let t = 0;
    const limiter = createFixedWindowLimiter(2, 60_000, () => t);
    expect(limiter.take()).toBe(0);
    expect(limiter.take()).toBe(0);
    t = 15_000;
    expect(limiter.take()).toBe(45);
    t = 60_000;
    expect(limiter.take()).toBe(0);
  });
});
