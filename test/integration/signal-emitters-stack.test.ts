import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createEventLog, type OpsEvent } from "../../shared/ops/events.js";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, startStack, type TestStack } from "../support/local-stack.js";
import { opsWorld } from "../support/ops-world.js";
import { jobApiPidOf } from "../support/processes.js";
import { prefixedTables } from "../support/service-fakes.js";

/**
 * The control plane's own signals on a running local stack (real Azurite, the real job API
 * process, the Functions app): the signal happens for real, one event lands in the stack's event
 * log, a repeat adds none, and the operations loop gives the rule's verdict.
 */
const STREAK = 3;
let stack: TestStack;
let events: ReturnType<typeof createEventLog>;
let world: ReturnType<typeof opsWorld>;

beforeAll(async () => {
  stack = await startStack({
    env: {
      // A long first backoff, so the window while the job API is down is wide enough to probe.
      BLASTPLANE_RESTART_BACKOFF_MS: "4000",
      JOBAPI_MAX_ACTIVE_JOBS: "1",
      JOBAPI_MAX_QUEUED_JOBS: "2",
      JOBAPI_SATURATION_STREAK: String(STREAK),
      JOBAPI_SATURATION_WINDOW_SECONDS: "600",
    },
  });
  const connection = `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;
  events = createEventLog(connection);
  world = opsWorld(prefixedTables(connection, ""));
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

const linesWith = (text: string) =>
  stack
    .output()
    .split("\n")
    .filter((line) => line.includes(text)).length;
const ofType = async (eventType: string): Promise<OpsEvent[]> => events.list({ event_type: eventType });

describe("the job API's health", () => {
  it("a killed job API is one jobapi.unhealthy event however often the readiness check sees it down; the loop proposes a redeploy (R-API-001)", async () => {
    const ready = await fetch(`${stack.info.functions_url}/api/health/ready`);
    expect(ready.status).toBe(200);
    const pid = jobApiPidOf(stack.info.pid);
    expect(pid).toBeDefined();
    const restartsBefore = linesWith("job API restarted");
    process.kill(pid as number, "SIGKILL");
    await eventually(async () => (linesWith("job API exited unexpectedly; restarting") > 0 ? true : undefined));
    // The supervisor and the readiness check both see it down: one transition, one event. The
    // reads go at once, so all of them land inside the restart backoff however loaded the machine.
    const whileDown = await Promise.all(
      Array.from({ length: 3 }, () => fetch(`${stack.info.functions_url}/api/health/ready`)),
    );
    expect(jobApiPidOf(stack.info.pid), "the job API was restarted before the reads answered").toBeUndefined();
    expect(whileDown.map((r) => r.status)).toEqual([503, 503, 503]);
    const [event, ...more] = await eventually(async () => {
      const found = await ofType("jobapi.unhealthy");
      return found.length > 0 ? found : undefined;
    });
    expect(more).toEqual([]);
    expect(event).toMatchObject({
      event_type: "jobapi.unhealthy",
      resource_ref: "job_api/jobapi",
      mode: "shadow",
      idempotency_key: expect.stringMatching(/^jobapi\.unhealthy\/job_api\/jobapi\/after\//),
    });
    expect(["local.supervisor", "functions.readiness"]).toContain(event?.source);
    expect(JSON.stringify(event?.payload)).not.toMatch(/https?:\/\//);
    expect(await world.verdictOf(event as OpsEvent)).toEqual({
      decision: "propose_action",
      severity: "high",
      rule_ids: ["R-API-001"],
      proposed_action: "redeploy_job_api",
    });

    // Back up and ready: healthy again without an event; killed again: a second transition, a second event.
    await eventually(async () => (linesWith("job API restarted") > restartsBefore ? true : undefined), 30_000);
    // "Restarted" means listening; its first readiness check (storage, BLAST+, token) may still run.
    await eventually(
      async () => ((await fetch(`${stack.info.functions_url}/api/health/ready`)).status === 200 ? true : undefined),
      30_000,
    );
    expect(await ofType("jobapi.unhealthy")).toHaveLength(1);
    process.kill(jobApiPidOf(stack.info.pid) as number, "SIGKILL");
    await eventually(async () => ((await ofType("jobapi.unhealthy")).length === 2 ? true : undefined));
    await eventually(async () => (linesWith("job API restarted") > restartsBefore + 1 ? true : undefined), 30_000);
    await eventually(
      async () => ((await fetch(`${stack.info.functions_url}/api/health/ready`)).status === 200 ? true : undefined),
      30_000,
    );
  });
});

describe("queue saturated", () => {
  it("a streak of 429s from the job API at its queue limit is one queue.saturated event, not one per 429; the loop escalates with a scale-out (R-ADM-001)", async () => {
    const api = jobApi(stack, readApiToken(stack));
    // One slow search running and two waiting: the queue is at its limit for as long as the first runs.
    const slow = (skip: number) => ({
      program: "tblastx",
      db: DEMO_DB,
      query_fasta: demoQueries(4, 1500, skip),
      execution_profile: "sharded",
    });
    // The first must be running (out of the queue) before two more fill the queue to its limit.
    const first = await api.submit(slow(20));
    await eventually(async () => ((await api.status(first.job_id)).status === "running" ? true : undefined), 30_000);
    const held = [first, await api.submit(slow(24)), await api.submit(slow(28))];
    try {
      const burst = await Promise.all(Array.from({ length: STREAK + 2 }, (_, i) => api.post("/v1/jobs", slow(32 + i))));
      expect(burst.map((r) => r.status)).toEqual(Array(STREAK + 2).fill(429));
      const [event, ...more] = await eventually(async () => {
        const found = await ofType("queue.saturated");
        return found.length > 0 ? found : undefined;
      });
      expect(more).toEqual([]);
      expect(event).toMatchObject({
        source: "jobapi.admission",
        resource_ref: "admission_queue/jobapi",
        payload: { refusals: STREAK, window_seconds: 600, queued: 2 },
      });
      // The streak goes on: more 429s, no second event (the watch decides before each 429 is answered).
      const again = await Promise.all([api.post("/v1/jobs", slow(40)), api.post("/v1/jobs", slow(41))]);
      expect(again.map((r) => r.status)).toEqual([429, 429]);
      expect(linesWith('"queue saturated"')).toBe(1);
      expect(await ofType("queue.saturated")).toHaveLength(1);
      expect(await world.verdictOf(event as OpsEvent)).toEqual({
        decision: "escalate",
        severity: "high",
        rule_ids: ["R-ADM-001"],
        proposed_action: "scale_node_pool",
      });
    } finally {
      await Promise.all(held.map((job) => api.del(`/v1/jobs/${job.job_id}`)));
    }
  });
});
