import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DURABLE_TEST_APP, eventually, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
let base: string;
let log: string;

beforeAll(async () => {
  log = path.join(mkdtempSync(path.join(tmpdir(), "bp-host-")), "activity.log");
  stack = await startStack({
    env: { BLASTPLANE_FUNCTIONS_ENTRY: DURABLE_TEST_APP, DURABLE_TEST_LOG: log, TEST_TIMER_SCHEDULE: "*/1 * * * * *" },
  });
  base = stack.info.functions_url;
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("local Functions host", () => {
  it("B-228 B-229 answers an unhandled function error with the catch-all 500 envelope and no internals", async () => {
    const res = await fetch(`${base}/api/boom`, { headers: { "X-Request-Id": "trace-abc-12345" } });
    expect(res.status).toBe(500);
    const body = (await res.json()) as { detail: string; request_id: string };
    expect(body).toEqual({ detail: "internal server error", request_id: "trace-abc-12345" });
    expect(res.headers.get("x-request-id")).toBe("trace-abc-12345");
    expect(JSON.stringify(body)).not.toContain("secret");
  });

  it("matches optional route parameters and constraints, and answers 404/405 in the error envelope", async () => {
    expect((await fetch(`${base}/api/boom/anything`)).status).toBe(500);
    expect((await fetch(`${base}/api/stream/ticks/abc`)).status).toBe(404);
    const notFound = await fetch(`${base}/api/no/such/route`);
    expect(notFound.status).toBe(404);
    expect(await notFound.json()).toMatchObject({ detail: "not found", request_id: expect.any(String) });
    const wrongMethod = await fetch(`${base}/api/stream/echo`);
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("POST");
    expect(await wrongMethod.json()).toMatchObject({ detail: "method not allowed" });
    // Outside the route prefix no function answers: those paths are the web app's (its page for an
    // app route, 404 for a file it does not have).
    const outside = await fetch(`${base}/boom`);
    expect(outside.status).toBe(200);
    expect(outside.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect((await fetch(`${base}/boom.js`)).status).toBe(404);
  });

  it("streams a request body through the function and back", async () => {
    const size = 8 * 1024 * 1024;
    const payload = Buffer.alloc(size, 7);
    const res = await fetch(`${base}/api/stream/echo`, { method: "POST", body: payload });
    expect(res.status).toBe(200);
    const back = Buffer.from(await res.arrayBuffer());
    expect(back.length).toBe(size);
    expect(back.equals(payload)).toBe(true);
  });

  it("streams a response produced over time, chunk by chunk", async () => {
    const res = await fetch(`${base}/api/stream/ticks/5`);
    expect(res.status).toBe(200);
    const reader = res.body?.getReader();
    const first = new TextDecoder().decode((await reader?.read())?.value);
    // The first chunk arrives before the function has produced the rest (ticks are 100 ms apart;
    // a busy machine may deliver the next one with it, never the last).
    expect(first.startsWith("tick 0\n")).toBe(true);
    expect(first).not.toContain("tick 4");
    let rest = "";
    for (;;) {
      const next = await reader?.read();
      if (!next || next.done) break;
      rest += new TextDecoder().decode(next.value);
    }
    expect(first + rest).toBe("tick 0\ntick 1\ntick 2\ntick 3\ntick 4\n");
  });

  it("runs a timer trigger on its six-field NCRONTAB schedule from an app setting", async () => {
    const lines = await eventually(async () => {
      if (!existsSync(log)) return undefined;
      const timerLines = readFileSync(log, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("timer "));
      return timerLines.length >= 2 ? timerLines : undefined;
    }, 10_000);
    for (const line of lines) {
      const [, , ranAt, scheduledFor] = line.split(" ");
      // Each firing is scheduled on a whole second (the schedule is every second) ...
      const scheduled = Date.parse(String(scheduledFor));
      expect(scheduled % 1000).toBe(0);
      // ... and runs at that moment: a timer may wake up to 5 ms early, and a run later than the
      // past-due tolerance (1 s) would say pastdue.
      expect(Number(ranAt) - scheduled).toBeGreaterThanOrEqual(-5);
      expect(Number(ranAt) - scheduled).toBeLessThan(1000);
    }
    expect(lines[0]).toContain("ontime");
  });
});
