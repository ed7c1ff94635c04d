import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const DURABLE_TEST_APP = path.join(ROOT, "dist/test/durable-app.js");

export interface StackInfo {
  functions_url: string;
  idp_url: string;
  jobapi_url: string;
  durable_rpc_url: string;
  blob_endpoint: string;
  table_endpoint: string;
  pid: number;
  /** With BLASTPLANE_LOCAL_ARM=1: the local Resource Manager. */
  arm_url?: string;
  kubeconfig?: string;
}

export interface TestStack {
  info: StackInfo;
  dataDir: string;
  process: ChildProcess;
  /** Everything the stack printed so far. */
  output(): string;
  /** Asks for a clean stop (SIGTERM) and waits for the process to exit. */
  stop(): Promise<number | null>;
  /** SIGKILL: no clean-up runs. */
  kill(): Promise<void>;
  /**
   * A power cut: SIGKILL to every process of the stack at once (its process group: Azurite, the
   * job API, BLAST+), then waits until none is left. Needs `detached: true` at start.
   */
  cutPower(): Promise<void>;
  /** Removes the data folder (after stop). */
  cleanup(): void;
}

/**
 * Starts `dist/local/start.js` as `npm start` would, on free ports and a data folder of its own,
 * and waits until it has written its stack file.
 */
export async function startStack(
  options: {
    env?: Record<string, string>;
    dataDir?: string;
    inMemory?: boolean /** Its own process group (for cutPower). */;
    detached?: boolean;
  } = {},
): Promise<TestStack> {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), "bp-stack-"));
  const child = spawn(process.execPath, [path.join(ROOT, "dist/local/start.js")], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: "0",
      IDP_PORT: "0",
      JOBAPI_PORT: "0",
      BLASTPLANE_DATA_DIR: dataDir,
      BLASTPLANE_IN_MEMORY: options.inMemory === false ? "0" : "1",
      LOG_LEVEL: "info",
      // The local Resource Manager only where a test asks for it (BLASTPLANE_LOCAL_ARM: "1"): it
      // adds a TLS listener and a certificate to every start otherwise.
      BLASTPLANE_LOCAL_ARM: "0",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.detached ?? false,
  });
  let output = "";
  child.stdout?.on("data", (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    output += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    // 45 s, or STACK_START_TIMEOUT_SECONDS on a machine shared with other heavy work.
    const readyMs = Number(process.env.STACK_START_TIMEOUT_SECONDS ?? 45) * 1000;
    const deadline = setTimeout(
      () => reject(new Error(`stack did not start in ${readyMs / 1000} s:\n${output}`)),
      readyMs,
    );
    const poll = setInterval(() => {
      if (output.includes("local stack ready")) {
        clearInterval(poll);
        clearTimeout(deadline);
        resolve();
      }
    }, 50);
    void exited.then((code) => {
      clearInterval(poll);
      clearTimeout(deadline);
      reject(new Error(`stack exited with ${String(code)} before it was ready:\n${output}`));
    });
  });
  const info = JSON.parse(readFileSync(path.join(dataDir, "stack.json"), "utf8")) as StackInfo;
  return {
    info,
    dataDir,
    process: child,
    output: () => output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      return exited;
    },
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
    async cutPower() {
      if (!options.detached || child.pid === undefined)
        throw new Error("cutPower needs a stack started with detached: true");
      const group = -child.pid;
      process.kill(group, "SIGKILL");
      await exited;
      // The group exists while any member does (orphans are reaped by init within moments).
      for (;;) {
        try {
          process.kill(group, 0);
        } catch {
          return;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    cleanup() {
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Mints a token through the running stack's development identity provider. */
export async function mintToken(stack: TestStack, role: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await fetch(`${stack.info.idp_url}/dev/token`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ role, ...extra }),
  });
  if (res.status !== 200) throw new Error(`token mint failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Polls until `check` returns a value, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ""}`);
}
