// (g) What durable storage writes cost (issue 15): the local stack with Azurite's durable writes
// (every acknowledged write fsynced before its answer; the default) against the same stack with
// them off (BLASTPLANE_AZURITE_DURABLE=0: Azurite's own 5 s autosave), both running side by side
// on their own data folders, measured alternately within each run so machine drift favours neither:
//   - job-API submit latency (POST /v1/jobs → 202), sequential
//   - dashboard submit latency (POST /api/blast/jobs → 200: a job row, a query blob, an orchestration)
//   - a burst of concurrent job-API submits (wall time: what coalesced saves buy)
//   - a small job end to end (submit → completed on the demo database)
import { mkdirSync } from "node:fs";
import path from "node:path";
import { foreignLoadMeter, foreignLoadOf, formatForeignLoad, startStack } from "./stack.mjs";

const SEQUENTIAL_SUBMITS = 8;
const DASHBOARD_SUBMITS = 4;
const BURST = 16;
const QUERY =
  ">q1 16S fragment\nAGAGTTTGATCCTGGCTCAGATTGAACGCTGGCGGCAGGCCTAACACATGCAAGTCGAACGGTAACAGGAAGAAGCTTGCTTCTTTGCTGACGAGTGGCGGACGGGTGAGTAATGTCTGGGAAACTGCCTGATGGAGGGGGATAACTACTGGAAACGGTAGCTAATACCGCATAACGTCGCAAGACCAAAGAGGGGGACCTTCGGGCCTCTTGCCATCGGATGTGCCCAGATGGGATTAGCTAGTAGGTGGGGTAACGGCTCACCTAGGCGACGATCCCTAGCTGGTCTGAGAGGATGACCAGCCACACTGGAACTGAGACACGGTCCAGACTCCTACGGGAGGCAGCAGTGGGGAATATTGCACAATGGGCGCAAGCCTGATGCAGCCATGCCGCGTGTATGAAGAAGGCCTTCGGGTTGTAAAGTACTTTCAGCGGGGAGGAAGGGAGTAAAGTTAATACCTTTGCTCATTGACGTTACCCGCAGAAGAAGCACCGGCTAACTCCGTGCCAGCAGCCGCGGTAATACGGAGGGTGCAAGCGTTAATCGGAATTACTGGGCGTAAAGCGCACGCAGGCGGTTTGTTAAGTCAGATGTGAAATCCCCGGGCTCAACCTGGGAACTGCATCTGATACTGGCAAGCTTGAGTCTCGTAGAGGGGGGTAGAATTCCAGGTGTAGCGGTGAAATGCGTAGAGATCTGGAGGAATACCGGTGGCGAAGGCGGCCCCCTGGACGAAGACTGACGCTCAGGTGCGAAAGCGTGGGGAGCAAACAGG\n";
const DB = "16s_rrna_demo";
const TERMINAL = new Set(["completed", "failed", "cancelled"]);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, digits = 1) => Number(x.toFixed(digits));

function client(stack, bearer) {
  const jobApi = async (method, p, body, headers = {}) => {
    const res = await fetch(`${stack.info.jobapi_url}${p}`, {
      method,
      headers: {
        "X-SVC-API-Token": stack.token,
        ...headers,
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return {
      status: res.status,
      etag: res.headers.get("etag"),
      body: res.status === 304 ? undefined : await res.json(),
    };
  };
  return {
    async submit() {
      const t0 = performance.now();
      const res = await jobApi("POST", "/v1/jobs", { program: "blastn", db: DB, query_fasta: QUERY });
      if (res.status !== 202) throw new Error(`job-API submit answered ${res.status}: ${JSON.stringify(res.body)}`);
      return { ms: performance.now() - t0, jobId: res.body.job_id };
    },
    async dashboardSubmit() {
      const t0 = performance.now();
      const res = await fetch(`${stack.info.functions_url}/api/blast/jobs`, {
        method: "POST",
        headers: { Authorization: `Bearer ${bearer}`, "Content-Type": "application/json" },
        body: JSON.stringify({ program: "blastn", db: DB, query_fasta: QUERY }),
      });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`dashboard submit answered ${res.status}: ${text}`);
      return performance.now() - t0;
    },
    /** Long-polls a job until it ends (the server answers when the status changes). */
    async finished(jobId) {
      let etag;
      for (;;) {
        const res = etag
          ? await jobApi("GET", `/v1/jobs/${jobId}/status?wait=30`, undefined, { "If-None-Match": etag })
          : await jobApi("GET", `/v1/jobs/${jobId}/status`);
        if (res.status === 304) continue;
        etag = res.etag;
        if (TERMINAL.has(res.body.status)) return res.body;
      }
    },
    /** Waits until nothing is queued or running, so one measurement's jobs do not load the next. */
    async drained() {
      for (;;) {
        const { body } = await jobApi("GET", "/v1/jobs?limit=500");
        if (body.jobs.every((j) => TERMINAL.has(j.status))) return;
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

async function mintToken(stack) {
  const res = await fetch(`${stack.info.idp_url}/dev/token`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ role: "Contributor" }),
  });
  if (res.status !== 200) throw new Error(`token mint failed: ${res.status}`);
  return (await res.json()).access_token;
}

async function measure(c) {
  await c.drained();
  const submits = [];
  for (let i = 0; i < SEQUENTIAL_SUBMITS; i++) submits.push((await c.submit()).ms);
  const dashboard = [];
  for (let i = 0; i < DASHBOARD_SUBMITS; i++) dashboard.push(await c.dashboardSubmit());
  await c.drained();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: BURST }, () => c.submit()));
  const burstMs = performance.now() - t0;
  await c.drained();
  const e0 = performance.now();
  const { jobId } = await c.submit();
  const end = await c.finished(jobId);
  if (end.status !== "completed") throw new Error(`the end-to-end job ended ${end.status}: ${end.error}`);
  return {
    submit_ms: median(submits),
    dashboard_submit_ms: median(dashboard),
    burst_ms: burstMs,
    job_ms: performance.now() - e0,
  };
}

/** Runs (g); returns its figures (medians over `runs`, durable writes on vs off). */
export async function benchDurability({ tmp, runs, log }) {
  log("(g) starting two local stacks: durable Azurite writes on, and off");
  const stacks = {};
  for (const mode of ["on", "off"]) {
    const dataDir = path.join(tmp, `durability-${mode}`);
    mkdirSync(dataDir, { recursive: true });
    stacks[mode] = await startStack({
      dataDir,
      logPath: path.join(tmp, `durability-${mode}.log`),
      env: { BLASTPLANE_SKIP_DEMO_DB: "0", BLASTPLANE_AZURITE_DURABLE: mode === "on" ? "1" : "0" },
    });
  }
  try {
    const clients = {
      on: client(stacks.on, await mintToken(stacks.on)),
      off: client(stacks.off, await mintToken(stacks.off)),
    };
    // One unmeasured round each: first-use costs (table creation, JIT) are not durability's.
    await measure(clients.on);
    await measure(clients.off);
    const samples = { on: [], off: [] };
    const foreign = [];
    for (let run = 0; run < runs; run++) {
      const meter = foreignLoadMeter();
      const order = run % 2 === 0 ? ["on", "off"] : ["off", "on"];
      for (const mode of order) samples[mode].push(await measure(clients[mode]));
      foreign.push(meter());
      log(
        `  (g) run ${run + 1}/${runs}: submit ms on ${round(samples.on.at(-1).submit_ms)} / off ${round(samples.off.at(-1).submit_ms)}, foreign load ${formatForeignLoad([foreign.at(-1)])} cores`,
      );
    }
    const figure = (key) => {
      const on = median(samples.on.map((s) => s[key]));
      const off = median(samples.off.map((s) => s[key]));
      return {
        on: round(on),
        off: round(off),
        added_ms: round(on - off),
        ratio: round(on / off, 3),
        runs_on: samples.on.map((s) => round(s[key])),
        runs_off: samples.off.map((s) => round(s[key])),
      };
    };
    const result = {
      job_api_submit_ms: figure("submit_ms"),
      dashboard_submit_ms: figure("dashboard_submit_ms"),
      burst_ms: { ...figure("burst_ms"), submits: BURST },
      small_job_ms: figure("job_ms"),
      ...foreignLoadOf(foreign),
    };
    return result;
  } finally {
    await Promise.all(Object.values(stacks).map((s) => s.stop()));
  }
}
