// The benchmark's view of a running local stack: starting and stopping `dist/local/start.js` the
// way test/support/local-stack.ts does, a small job API client, and /proc probes of the stack's
// processes (RSS, CPU time, BLAST child processes).
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { TableClient } from "@azure/data-tables";

export const ROOT = path.resolve(import.meta.dirname, "..");

/** Azurite's well-known development account (public, documented by Microsoft; see local/azurite.ts). */
const DEV_ACCOUNT = "devstoreaccount1";
const DEV_ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts the local stack on free ports with its data in `dataDir` and persistent Azurite (a 1 GB
 * blob would sit in the memory of an in-memory Azurite). Its output goes to `logPath`.
 */
/** How long a stack may take to say it is ready (BENCH_STACK_START_SECONDS, default 60). */
const STACK_START_SECONDS = Number(process.env.BENCH_STACK_START_SECONDS ?? 60);

/**
 * Starts the local stack built in `root` (this checkout by default; BENCH_COMPARE names another
 * checkout's build to run beside it).
 */
export async function startStack({ dataDir, logPath, env = {}, root = ROOT }) {
  const log = createWriteStream(logPath);
  const child = spawn(process.execPath, [path.join(root, "dist/local/start.js")], {
    cwd: root,
    env: {
      ...process.env,
      PORT: "0",
      IDP_PORT: "0",
      JOBAPI_PORT: "0",
      BLASTPLANE_DATA_DIR: dataDir,
      BLASTPLANE_IN_MEMORY: "0",
      BLASTPLANE_SKIP_DEMO_DB: "1",
      LOG_LEVEL: "info",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let tail = "";
  let ready = false;
  const onOutput = (chunk) => {
    log.write(chunk);
    tail = (tail + chunk.toString()).slice(-8000);
    if (tail.includes("local stack ready")) ready = true;
  };
  child.stdout.on("data", onOutput);
  child.stderr.on("data", onOutput);
  let stopRequested = false;
  let unexpectedExit;
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  // The stack stops only when told to; note when something else ends it, so a failure says why.
  child.once("exit", (code, signal) => {
    if (!stopRequested)
      unexpectedExit = `the stack (pid ${child.pid}) exited at ${new Date().toISOString()} with ${signal ?? `code ${code}`} before the benchmark stopped it`;
  });
  const deadline = Date.now() + STACK_START_SECONDS * 1000;
  while (!ready) {
    if (child.exitCode !== null) throw new Error(`stack exited with ${child.exitCode} before it was ready:\n${tail}`);
    if (Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(`stack did not start in ${STACK_START_SECONDS} s:\n${tail}`);
    }
    await sleep(50);
  }
  const info = JSON.parse(readFileSync(path.join(dataDir, "stack.json"), "utf8"));
  const token = JSON.parse(readFileSync(path.join(dataDir, "jobapi", "secrets", "jobapi-api-token"), "utf8")).current
    .value;
  const connectionString =
    `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};` +
    `BlobEndpoint=${info.blob_endpoint};TableEndpoint=${info.table_endpoint};`;
  return {
    info,
    token,
    dataDir,
    connectionString,
    tail: () => tail,
    /** Why the stack is gone, if it went without being stopped. */
    unexpectedExit: () => unexpectedExit,
    /** SIGTERM, then SIGKILL if the stack has not gone after `graceMs`. */
    async stop(graceMs = 30_000) {
      stopRequested = true;
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
        await exited;
        clearTimeout(timer);
      }
      await new Promise((resolve) => log.end(resolve));
    },
  };
}

/** Runs the blastplane CLI against the stack in `dataDir`; throws with its output on failure. */
export function cli(dataDir, args, root = ROOT) {
  const r = spawnSync(process.execPath, [path.join(root, "bin/blastplane.mjs"), ...args], {
    cwd: root,
    env: { ...process.env, BLASTPLANE_DATA_DIR: dataDir },
    encoding: "utf8",
  });
  if (r.status !== 0) throw new Error(`blastplane ${args.join(" ")} failed (${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/**
 * A minimal job API client. `get`/`post` return parsed JSON and throw on an unexpected status.
 * A GET that fails at the network level is retried (twice) like a polling client would, and
 * noted in `networkErrors` so the report shows it.
 */
export function jobApiClient(stack) {
  const base = stack.info.jobapi_url;
  const headers = { "X-SVC-API-Token": stack.token };
  const networkErrors = [];
  async function request(method, p, body, expect, extraHeaders = {}, attempt = 1) {
    let res;
    try {
      res = await fetch(`${base}${p}`, {
        method,
        headers: { ...headers, ...extraHeaders, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      networkErrors.push(
        `${method} ${p}: ${error.message}${error.cause ? ` (${error.cause.code ?? error.cause.message})` : ""}`,
      );
      if (method !== "GET" || attempt >= 3) throw error;
      await sleep(50);
      return request(method, p, body, expect, extraHeaders, attempt + 1);
    }
    const text = await res.text();
    if (!expect.includes(res.status)) throw new Error(`${method} ${p} answered ${res.status}: ${text.slice(0, 500)}`);
    return { status: res.status, etag: res.headers.get("etag"), body: text ? JSON.parse(text) : undefined };
  }
  const call = async (...args) => (await request(...args)).body;
  return {
    networkErrors,
    get: (p) => call("GET", p, undefined, [200]),
    /** A long-polling status read: held by the server until the status differs from `etag`. */
    watch: (p, etag, waitSeconds) =>
      etag
        ? request("GET", `${p}?wait=${waitSeconds}`, undefined, [200, 304], { "If-None-Match": etag })
        : request("GET", p, undefined, [200]),
    post: (p, body) => call("POST", p, body, [200, 202]),
    /** A streamed GET through node:http (lighter than fetch for big bodies). */
    stream(p) {
      return new Promise((resolve, reject) => {
        http
          .get(`${base}${p}`, { headers }, (res) => {
            if (res.statusCode !== 200) {
              let text = "";
              res.on("data", (c) => {
                text += c;
              });
              res.on("end", () => reject(new Error(`GET ${p} answered ${res.statusCode}: ${text.slice(0, 500)}`)));
              return;
            }
            resolve(res);
          })
          .on("error", reject);
      });
    },
  };
}

/** Reads a job record straight from the job API's table, for its exact timestamps. */
export function jobRecordReader(stack) {
  const table = TableClient.fromConnectionString(stack.connectionString, "jobapijobs", {
    allowInsecureConnection: true,
  });
  return async (jobId) => {
    const e = await table.getEntity("job", jobId);
    let doc = "";
    for (let i = 0; i < Number(e.doc_n ?? 0); i++) doc += String(e[`doc_${i}`] ?? "");
    return JSON.parse(doc);
  };
}

// ---- /proc probes ------------------------------------------------------------------------------

const CLOCK_TICKS = 100; // USER_HZ; `getconf CLK_TCK` is 100 on Linux

function readText(file) {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** Fields of /proc/<pid>/stat after the command name (index 0 is the state). */
function statFields(pid) {
  const text = readText(`/proc/${pid}/stat`);
  if (!text) return undefined;
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/** Direct children of `pid`, over all its threads. */
export function childPids(pid) {
  const out = [];
  let tasks = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tasks) {
    const text = readText(`/proc/${pid}/task/${tid}/children`);
    if (text) for (const c of text.trim().split(/\s+/)) if (c) out.push(Number(c));
  }
  return out;
}

export function descendantPids(pid) {
  const out = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift();
    out.push(p);
    queue.push(...childPids(p));
  }
  return out;
}

/** The job API process: the stack's child whose command line runs jobapi/server.js. */
export function findJobApiPid(stackPid) {
  for (const pid of childPids(stackPid)) {
    if ((readText(`/proc/${pid}/cmdline`) ?? "").includes("jobapi/server.js")) return pid;
  }
  throw new Error(`no jobapi/server.js child under stack pid ${stackPid}`);
}

export function rssBytes(pid) {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readText(`/proc/${pid}/status`) ?? "")?.[1];
  return kb === undefined ? undefined : Number(kb) * 1024;
}

/** User + system CPU seconds used so far by `pids` (alive ones). */
export function cpuSeconds(pids) {
  let ticks = 0;
  for (const pid of pids) {
    const f = statFields(pid);
    // utime and stime are fields 14 and 15 of stat, i.e. 11 and 12 after the state.
    if (f) ticks += Number(f[11]) + Number(f[12]);
  }
  return ticks / CLOCK_TICKS;
}

/** Busy CPU seconds of the whole machine so far (all cores), from the first line of /proc/stat. */
function machineBusySeconds() {
  const [user, nice, system, , , irq, softirq, steal = 0] = readFileSync("/proc/stat", "utf8")
    .split("\n")[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS;
}

/** CPU seconds of `pid` and its descendants, including children already reaped (cutime, cstime). */
function treeCpuSeconds(pid) {
  let ticks = 0;
  for (const p of descendantPids(pid)) {
    const f = statFields(p);
    if (f) ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  }
  return ticks / CLOCK_TICKS;
}

/**
 * Measures CPU the benchmark did not cause: busy time of the machine minus this process tree's
 * (which holds the stack, the job API's BLAST runs and the bare baselines). The machine may be
 * shared; a run taken under foreign load shows it. Returns a function giving cores used so far.
 */
/**
 * A run during which other processes used more than this many cores is marked disturbed (issue
 * 24): its figures say more about the machine than about blastplane.
 */
export const DISTURBED_CORES = 0.25;

/** A metric's foreign-load record: cores per run, and which runs were disturbed. */
export function foreignLoadOf(cores) {
  const runs = cores.map((c) => Number(c.toFixed(2)));
  const disturbed = runs.flatMap((c, i) => (c > DISTURBED_CORES ? [i + 1] : []));
  return { runs_foreign_load_cores: runs, disturbed_runs: disturbed, quiet: disturbed.length === 0 };
}

/** "0.05 0.31* 0.02": cores per run, a disturbed run starred. */
export function formatForeignLoad(cores) {
  return cores.map((c) => `${c.toFixed(2)}${c > DISTURBED_CORES ? "*" : ""}`).join(" ");
}

export function foreignLoadMeter() {
  const started = performance.now();
  const busy0 = machineBusySeconds();
  const ours0 = treeCpuSeconds(process.pid);
  return () => {
    const seconds = (performance.now() - started) / 1000;
    return Math.max(0, machineBusySeconds() - busy0 - (treeCpuSeconds(process.pid) - ours0)) / seconds;
  };
}

/**
 * Samples `pid`'s RSS every `intervalMs` until stopped; returns the peak. Started just before a
 * download so the peak reflects what streaming it costs.
 */
export function sampleRss(pid, intervalMs = 100) {
  let peak = rssBytes(pid) ?? 0;
  let samples = 1;
  const timer = setInterval(() => {
    const rss = rssBytes(pid);
    if (rss !== undefined) {
      peak = Math.max(peak, rss);
      samples++;
    }
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      const rss = rssBytes(pid);
      if (rss !== undefined) peak = Math.max(peak, rss);
      return { peak, samples };
    },
  };
}

/**
 * Watches the BLAST processes the job API starts (its children named `program`), so a job's wall
 * time can be split into BLAST itself and everything around it. Start and end are the first poll
 * that finds the process alive and gone (or a zombie), so both are within `intervalMs`.
 */
export function watchBlastProcesses(jobApiPid, program = "blastn", intervalMs = 50) {
  const seen = new Map();
  // Node starts child processes from its main thread, so its children list is the one to read;
  // walking every thread's list every 20 ms cost ~3% of a core, taken from the job being measured
  // (the baseline runs unwatched). Polls are 50 ms apart for the same reason.
  const mainThreadChildren = `/proc/${jobApiPid}/task/${jobApiPid}/children`;
  const poll = () => {
    const now = Date.now();
    const alive = new Set();
    for (const pid of (readText(mainThreadChildren) ?? "").trim().split(/\s+/).filter(Boolean).map(Number)) {
      const comm = readText(`/proc/${pid}/comm`)?.trim();
      if (comm !== program) continue;
      const f = statFields(pid);
      if (!f || f[0] === "Z") continue;
      alive.add(pid);
      if (!seen.has(pid)) {
        const argv = (readText(`/proc/${pid}/cmdline`) ?? "").split("\0").filter(Boolean);
        // Only searches: the job API also runs `blastn -version` once to learn the BLAST version.
        if (!argv.includes("-query")) continue;
        seen.set(pid, { pid, argv, firstSeen: now, endedAt: undefined, lastSeen: now });
      } else {
        seen.get(pid).lastSeen = now;
      }
    }
    for (const p of seen.values()) if (p.endedAt === undefined && !alive.has(p.pid)) p.endedAt = now;
  };
  const timer = setInterval(poll, intervalMs);
  poll();
  return {
    /** Processes seen so far, oldest first. */
    stop() {
      clearInterval(timer);
      poll();
      return [...seen.values()].sort((a, b) => a.firstSeen - b.firstSeen);
    },
  };
}
