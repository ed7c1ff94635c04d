import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TableClient } from "@azure/data-tables";
import { DispatchLease } from "../../jobapi/jobs/dispatch-lease.js";
import type { RunningAzurite } from "../../local/azurite.js";
import { publishDatabase } from "../../shared/databases/database-catalog.js";
import { createLogger } from "../../shared/logging/logger.js";
import { DEMO_DB, demoQueries } from "../support/jobapi-client.js";
import { eventually, ROOT } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";
import { startTestAzurite } from "../support/service-fakes.js";

/** Short, so takeovers happen within the test; the default is 60 s. */
const LEASE_SECONDS = 3;

let azurite: RunningAzurite;
let dataDir: string;

beforeAll(async () => {
  azurite = await startTestAzurite();
  dataDir = mkdtempSync(path.join(os.tmpdir(), "bp-lease-"));
  await publishDatabase(path.join(dataDir, "databases"), {
    name: DEMO_DB,
    fastaPath: path.join(ROOT, "local/demo/16s-rrna-demo.fasta"),
    type: "nucl",
    partitions: 2,
  });
}, 60_000);

afterAll(async () => {
  await azurite?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

interface JobApiProcess {
  pid: number;
  url: string;
  child: ChildProcess;
  /** Its JSON log lines so far. */
  logs(): Record<string, unknown>[];
  /** The first log line matching `msg` (waits for it). */
  logged(msg: RegExp, timeoutMs?: number): Promise<Record<string, unknown>>;
  get(p: string): Promise<Response>;
  /** BLAST processes it runs now. */
  searches(): number[];
}

/** A process's name, or "" once it is gone. */
function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

const started: JobApiProcess[] = [];
afterEach(async () => {
  for (const p of started.splice(0)) {
    for (const pid of [p.pid, ...p.searches()]) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // already gone
      }
    }
    if (p.child.exitCode === null && p.child.signalCode === null) {
      const exited = new Promise((resolve) => p.child.once("exit", resolve));
      p.child.kill("SIGTERM");
      await exited;
    }
  }
});

/** A job-API process on the shared data folder and storage account, as a second replica would run. */
async function startJobApi(): Promise<JobApiProcess> {
  const child = spawn(
    process.execPath,
    ["--require", path.join(ROOT, "local/parent-watchdog.cjs"), path.join(ROOT, "dist/jobapi/server.js")],
    {
      env: {
        ...process.env,
        JOBAPI_PORT: "0",
        JOBAPI_STORAGE_CONNECTION_STRING: azurite.connectionString,
        JOBAPI_DATA_DIR: dataDir,
        JOBAPI_DISPATCH_LEASE_SECONDS: String(LEASE_SECONDS),
        JOBAPI_MAX_ACTIVE_JOBS: "1",
        JOBAPI_SHARD_CONCURRENCY: "1",
        LOG_LEVEL: "info",
      },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  const lines: Record<string, unknown>[] = [];
  let pending = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split("\n");
    pending = parts.pop() ?? "";
    for (const line of parts) {
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // not a log line
      }
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const logged = (msg: RegExp, timeoutMs = 60_000) =>
    eventually(async () => lines.find((l) => msg.test(String(l.msg))), timeoutMs, 20);
  const ready = await logged(/^job API ready$/, 30_000).catch((error: unknown) => {
    throw new Error(`job API did not start: ${String(error)}\n${stderr}`);
  });
  const token = (
    JSON.parse(readFileSync(path.join(dataDir, "secrets", "jobapi-api-token"), "utf8")) as {
      current: { value: string };
    }
  ).current.value;
  const url = String(ready.url);
  const pid = child.pid as number;
  const proc: JobApiProcess = {
    pid,
    url,
    child,
    logs: () => lines,
    logged,
    get: (p) => fetch(`${url}${p}`, { headers: { "X-SVC-API-Token": token } }),
    searches: () => childPids(pid).filter((c) => commOf(c) === "tblastx"),
  };
  started.push(proc);
  return proc;
}

async function submit(via: JobApiProcess, skip: number): Promise<string> {
  const token = (
    JSON.parse(readFileSync(path.join(dataDir, "secrets", "jobapi-api-token"), "utf8")) as {
      current: { value: string };
    }
  ).current.value;
  const res = await fetch(`${via.url}/v1/jobs`, {
    method: "POST",
    headers: { "X-SVC-API-Token": token, "Content-Type": "application/json" },
    // Slow enough to observe: tblastx translates both sides.
    body: JSON.stringify({ program: "tblastx", db: DEMO_DB, query_fasta: demoQueries(3, 1500, skip) }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { job_id: string }).job_id;
}

async function dispatchRole(p: JobApiProcess): Promise<string> {
  return String(((await (await p.get("/v1/cluster")).json()) as { dispatch: string }).dispatch);
}

async function statusOf(
  p: JobApiProcess,
  jobId: string,
): Promise<{ status: string; updated_at: string; error: string }> {
  return (await (await p.get(`/v1/jobs/${jobId}/status`)).json()) as {
    status: string;
    updated_at: string;
    error: string;
  };
}

/**
 * Watches both processes' BLAST children until stopped; `both` is set if they ever ran at once.
 * `sample()` looks now (and counts what it sees), returning each one's searches.
 */
function watchSearches(a: JobApiProcess, b: JobApiProcess) {
  const seen = { a: false, b: false, both: false };
  const sample = () => {
    const inA = a.searches();
    const inB = b.searches();
    seen.a ||= inA.length > 0;
    seen.b ||= inB.length > 0;
    seen.both ||= inA.length > 0 && inB.length > 0;
    return { inA, inB };
  };
  const timer = setInterval(sample, 20);
  return { seen, sample, stop: () => clearInterval(timer) };
}

describe("job API dispatch lease: two processes on one data folder and storage account", () => {
  it("only the holder runs a job; after the holder is killed (SIGKILL) the other takes over and completes it", async () => {
    const first = await startJobApi();
    const second = await startJobApi();
    expect(await dispatchRole(first)).toBe("active");
    expect(await dispatchRole(second)).toBe("standby");
    // Submitted through the standby: any replica takes submits; the holder runs them.
    const jobId = await submit(second, 100);
    const watch = watchSearches(first, second);
    try {
      const searches = await eventually(
        async () => {
          const { inA } = watch.sample();
          return inA.length > 0 ? inA : undefined;
        },
        60_000,
        20,
      );
      expect(watch.sample().inB).toEqual([]);
      process.kill(first.pid, "SIGKILL");
      // Its search dies with it (parent-death signal); the survivor sees its holder gone on this
      // host and takes over without waiting for the lease to run out.
      await eventually(async () => (searches.every((pid) => !alive(pid)) ? true : undefined), 10_000, 20);
      await second.logged(/^dispatch lease taken over$/);
      const done = await eventually(
        async () => {
          const s = await statusOf(second, jobId);
          return ["completed", "failed", "cancelled"].includes(s.status) ? s : undefined;
        },
        120_000,
        100,
      );
      expect(done).toMatchObject({ status: "completed", error: "" });
      expect(watch.seen).toEqual({ a: true, b: true, both: false });
      expect(await dispatchRole(second)).toBe("active");
      const xml = await (await second.get(`/v1/jobs/${jobId}/results?content=xml`)).text();
      expect((xml.match(/<Iteration>/g) ?? []).length).toBe(3);
    } finally {
      watch.stop();
    }
  }, 240_000);

  it("a paused holder loses the lease once it expires; the other completes the job, and the old holder, resumed, stops without writing", async () => {
    const first = await startJobApi();
    const second = await startJobApi();
    // Either may hold the lease after the previous test; find out which.
    const [holder, standby] = (await dispatchRole(first)) === "active" ? [first, second] : [second, first];
    expect(await dispatchRole(standby)).toBe("standby");
    const jobId = await submit(standby, 120);
    const frozen = await eventually(
      async () => (holder.searches().length > 0 ? holder.searches() : undefined),
      60_000,
      20,
    );
    // A hung node: the holder and its search stop without dying.
    for (const pid of [holder.pid, ...frozen]) process.kill(pid, "SIGSTOP");
    const pausedAt = Date.now();
    const takeover = await standby.logged(/^dispatch lease taken over$/, 60_000);
    // Not at once, as for a holder that is gone: the paused one is alive, so its lease had to run
    // out (counted from its last renewal, which came up to a renewal interval before the pause).
    expect(Date.parse(String(takeover.ts)) - pausedAt).toBeGreaterThanOrEqual((LEASE_SECONDS * 1000) / 2);
    await eventually(async () => (standby.searches().length > 0 ? true : undefined), 60_000, 20);
    // The old holder wakes up while the new one is running the job: it must stand down.
    for (const pid of [holder.pid, ...frozen]) process.kill(pid, "SIGCONT");
    await holder.logged(/^dispatch lease (taken over by another process|expired before it could be renewed)/, 30_000);
    await eventually(async () => (frozen.every((pid) => !alive(pid)) ? true : undefined), 10_000, 20);
    expect(await dispatchRole(holder)).toBe("standby");
    const done = await eventually(
      async () => {
        const s = await statusOf(standby, jobId);
        return ["completed", "failed", "cancelled"].includes(s.status) ? s : undefined;
      },
      120_000,
      100,
    );
    expect(done).toMatchObject({ status: "completed", error: "" });
    const xml = await (await standby.get(`/v1/jobs/${jobId}/results?content=xml`)).text();
    expect((xml.match(/<Iteration>/g) ?? []).length).toBe(3);
    // Nothing the old holder did after waking reached the job (no "job failed", no rewrite).
    expect(holder.logs().filter((l) => l.job_id === jobId && /failed/.test(String(l.msg)))).toEqual([]);
    expect(await statusOf(holder, jobId)).toEqual(await statusOf(standby, jobId));
  }, 240_000);
});

describe("dispatch lease protocol, on a clock the test drives", () => {
  const DURATION_MS = 60_000;

  /** A lease as a process on `host` would hold it; `events` records what it was told. */
  async function contender(table: string, host: string, clock: { now: number }) {
    const events: string[] = [];
    const lease = new DispatchLease({
      table: TableClient.fromConnectionString(azurite.connectionString, table, { allowInsecureConnection: true }),
      leaseDurationMs: DURATION_MS,
      logger: createLogger({ level: "error" }),
      now: () => clock.now,
      host,
      pid: 4242,
    });
    await lease.init();
    await lease.start({ acquired: () => events.push("acquired"), lost: () => events.push("lost") });
    return { lease, events };
  }

  it("a holder on another host is taken over only after its row stayed unchanged for the whole duration; it stops first, on its own clock", async () => {
    const clock = { now: 0 };
    const a = await contender("leaseprotocol", "node-a", clock);
    expect(a.events).toEqual(["acquired"]);
    const b = await contender("leaseprotocol", "node-b", clock);
    expect(b.events).toEqual([]);
    // A renews while B watches: B never takes over, however long it watches.
    for (let i = 0; i < 8; i++) {
      clock.now += DURATION_MS / 4;
      await a.lease.tick();
      await b.lease.tick();
    }
    expect(b.events).toEqual([]);
    expect(a.lease.isHeld()).toBe(true);
    // A stops renewing (hung). Two thirds of the duration later it no longer counts itself holder...
    const lastRenewal = clock.now;
    clock.now = lastRenewal + (DURATION_MS * 2) / 3;
    expect(a.lease.isHeld()).toBe(false);
    await b.lease.tick();
    expect(b.events).toEqual([]);
    // ...and B takes over once it has seen the same row for the whole duration.
    clock.now = lastRenewal + DURATION_MS - 1;
    await b.lease.tick();
    expect(b.events).toEqual([]);
    clock.now = lastRenewal + DURATION_MS;
    await b.lease.tick();
    expect(b.events).toEqual(["acquired"]);
    expect(b.lease.isHeld()).toBe(true);
    // A wakes up: its renewal finds the row changed; it reports the loss and stays off.
    await a.lease.tick();
    expect(a.events).toEqual(["acquired", "lost"]);
    expect(a.lease.isHeld()).toBe(false);
    // B gives the lease up on a clean stop; A takes it at once, without waiting for a duration.
    await b.lease.stop();
    await a.lease.tick();
    expect(a.events).toEqual(["acquired", "lost", "acquired"]);
    await a.lease.stop();
  });
});
