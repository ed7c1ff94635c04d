import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, startStack, type TestStack } from "../support/local-stack.js";
import { jobApiPidOf } from "../support/processes.js";

let stack: TestStack;

beforeAll(async () => {
  // A long first backoff, so the window while the job API is down is wide enough to observe.
  stack = await startStack({ env: { BLASTPLANE_RESTART_BACKOFF_MS: "4000" } });
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

function jobApiPid(): number | undefined {
  return jobApiPidOf(stack.info.pid);
}

function countLines(text: string): number {
  return stack
    .output()
    .split("\n")
    .filter((line) => line.includes(text)).length;
}

describe("the local stack supervises the job API", () => {
  it("B-161 B-241 restarts a killed job API with backoff, logged at warn, and is not ready, naming it, until it is back", async () => {
    const first = jobApiPid();
    expect(first).toBeDefined();
    const restartsBefore = countLines("job API restarted");
    process.kill(first as number, "SIGKILL");
    const exitLine = await eventually(async () =>
      stack
        .output()
        .split("\n")
        .find((line) => line.includes("job API exited unexpectedly; restarting")),
    );
    const logged = JSON.parse(exitLine) as { level: string; signal: string; restart_in_ms: number };
    expect(logged).toMatchObject({ level: "warn", signal: "SIGKILL", restart_in_ms: 4000 });

    const down = await fetch(`${stack.info.functions_url}/api/health/ready`);
    expect(down.status).toBe(503);
    const body = (await down.json()) as { detail: string; request_id: string };
    // The job API is named; on a loaded machine a slow storage probe may be named beside it.
    expect(body.detail).toMatch(/^not ready: (.+ and )?job API unreachable$/);
    expect(body.request_id).toEqual(expect.any(String));

    await eventually(async () => (countLines("job API restarted") > restartsBefore ? true : undefined), 30_000);
    // "Restarted" means listening; its first readiness check (storage, BLAST+, token) may still run.
    const back = await eventually(async () => {
      const answer = await fetch(`${stack.info.functions_url}/api/health/ready`);
      return answer.status === 200 ? answer : void (await answer.body?.cancel());
    }, 30_000);
    expect(await back.json()).toMatchObject({ status: "ready", checks: { job_api: "ok" } });
    // Same address as before: the dashboard and the stack file still point at it.
    expect((await fetch(`${stack.info.jobapi_url}/v1/health`)).status).toBe(200);
    expect(jobApiPid()).not.toBe(first);
  });
});
