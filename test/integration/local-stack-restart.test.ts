import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DURABLE_TEST_APP, eventually, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";

const stacks: TestStack[] = [];

afterAll(async () => {
  for (const s of stacks) await s.stop();
  stacks[0]?.cleanup();
});

describe("local stack: kill -9 mid-orchestration, then restart", () => {
  it("resumes the instance from its history, keeps finished activity results and re-runs the interrupted one", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-restart-"));
    const log = path.join(dataDir, "activity.log");
    const env = {
      BLASTPLANE_FUNCTIONS_ENTRY: DURABLE_TEST_APP,
      DURABLE_TEST_LOG: log,
      TEST_TIMER_SCHEDULE: "0 0 0 1 1 *",
    };
    const first = await startStack({ dataDir, inMemory: false, env });
    stacks.push(first);
    const children = childPids(first.info.pid);
    expect(children.length).toBeGreaterThan(0);

    const res = await fetch(`${first.info.durable_rpc_url}orchestrators/longRunning`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ms: 1500 }),
    });
    const { id } = (await res.json()) as { id: string };
    // Kill while the second activity runs: the first has a recorded result, the second none.
    await eventually(
      async () => (existsSync(log) && readFileSync(log, "utf8").includes("slow start 2") ? true : undefined),
      20_000,
      20,
    );
    await first.kill();
    // The Azurite child notices its parent is gone and shuts down cleanly on its own.
    await eventually(async () => (children.every((pid) => !alive(pid)) ? true : undefined), 15_000);

    const second = await startStack({ dataDir, inMemory: false, env });
    stacks.push(second);
    const done = await eventually(async () => {
      const s = (await (await fetch(`${second.info.durable_rpc_url}instances/${id}`)).json()) as {
        runtimeStatus: string;
        output: unknown;
      };
      return s.runtimeStatus === "Completed" ? s : undefined;
    }, 30_000);
    expect(done.output).toEqual([10, 20, 30]);

    const lines = readFileSync(log, "utf8").split("\n");
    const count = (line: string) => lines.filter((l) => l === line).length;
    expect(count("slow start 1")).toBe(1);
    expect(count("slow done 1")).toBe(1);
    expect(count("slow start 2")).toBe(2);
    expect(count("slow done 2")).toBe(1);
    expect(count("slow start 3")).toBe(1);
  }, 120_000);
});

describe("local stack start-up", () => {
  it("names the busy port and the setting to change when a listener's port is taken", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as AddressInfo).port;
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-busy-"));
    try {
      const child = spawn(process.execPath, [path.join(ROOT, "dist/local/start.js")], {
        cwd: ROOT,
        env: {
          ...process.env,
          BLASTPLANE_DATA_DIR: dataDir,
          BLASTPLANE_SKIP_DEMO_DB: "1",
          PORT: "0",
          IDP_PORT: "0",
          JOBAPI_PORT: String(port),
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c) => {
        stderr += c;
      });
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(1);
      expect(stderr).toContain(`Port ${port} is already in use`);
      expect(stderr).toContain(`JOBAPI_PORT=${port + 100} npm start`);
    } finally {
      blocker.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
