import { type ChildProcess, spawn } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { inject } from "vitest";

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
  /** The Bot Service–shaped issuer (and the bot's Entra stand-in) of the Teams bot endpoint. */
  bot_service_url?: string;
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
  // A fresh data folder gets the demo database the run's first stack built (the same FASTA, the
  // same makeblastdb): building it costs seconds per stack. The stack then finds it, as `npm start`
  // does on its second start. A test that passes its own folder keeps the stack's own build.
  const demo = demoDatabases(options.dataDir === undefined && !options.env?.BLASTPLANE_SKIP_DEMO_DB);
  demo.seed(dataDir);
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
  if (output.includes("adding the demo database")) demo.keep(dataDir);
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

/** The run's shared copy of the demo database folder (test/support/global-setup.ts). */
function demoDatabases(enabled: boolean) {
  let template: string | undefined;
  try {
    template = enabled ? path.join(inject("demoDatabaseTemplate"), "databases") : undefined;
  } catch {
    template = undefined; // outside a vitest run
  }
  const target = (dataDir: string) => path.join(dataDir, "jobapi", "databases");
  return {
    seed(dataDir: string) {
      if (!template || !existsSync(template)) return;
      mkdirSync(path.dirname(target(dataDir)), { recursive: true, mode: 0o700 });
      copyTree(template, target(dataDir));
    },
    keep(dataDir: string) {
      if (!template || existsSync(template)) return;
      const staging = `${template}.${process.pid}`;
      // Copied right after start-up, before any job marks a release in use.
      copyTree(target(dataDir), staging);
      try {
        renameSync(staging, template);
      } catch {
        rmSync(staging, { recursive: true, force: true }); // another worker's copy won
      }
    },
  };
}

/** Copies a folder with each entry's mode (the data folder is private: 0700/0600), without `.in-use` marks. */
function copyTree(from: string, to: string): void {
  mkdirSync(to, { mode: statSync(from).mode & 0o777 });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (entry.name === ".in-use") continue;
    const [src, dst] = [path.join(from, entry.name), path.join(to, entry.name)];
    if (entry.isDirectory()) copyTree(src, dst);
    else copyFileSync(src, dst);
  }
  chmodSync(to, statSync(from).mode & 0o777);
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
