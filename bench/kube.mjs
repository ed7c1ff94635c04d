// Benchmark (f): a sharded job of 8 shards through the Kubernetes executor on the local cluster
// (BLASTPLANE_EXECUTOR=kubernetes), against the same 8 partition searches run bare side by side
// with the job's -num_threads; and the API calls the job API made per shard, counted by the local
// API server (`/metrics`) between submit and completion.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import https from "node:https";
import path from "node:path";
import { generateData } from "./generate.mjs";
import { cli, foreignLoadMeter, foreignLoadOf, jobApiClient, startStack } from "./stack.mjs";

const SHARDS = 8;
const DB_NAME = "benchkube";
const BLAST_ARGS = ["-task", "blastn", "-evalue", "0.00001"];
const TARGET_RATIO = 1.1;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, digits = 3) => Number(x.toFixed(digits));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The job API's `shard timings` lines of one job (jobapi/jobs/shard-timings.ts), from the stack's
 * log: per shard, ms from its Job's creation to each phase and the phases' durations.
 */
function shardTimingsOf(logPath, jobId) {
  const rows = [];
  for (const line of readFileSync(logPath, "utf8").split("\n")) {
    if (!line.includes('"shard timings"') || !line.includes(jobId)) continue;
    try {
      const entry = JSON.parse(line.slice(line.indexOf("{")));
      if (entry.msg === "shard timings" && entry.job_id === jobId) rows.push(entry);
    } catch {
      // another line
    }
  }
  return rows;
}

/** Phases of a shard's time, in order (shard-timings.ts), printed as medians over every shard of every measured run. */
const PHASES = [
  "pod_start_ms",
  "import_ms",
  "cache_ms",
  "query_ms",
  "blast_ms",
  "upload_and_exit_ms",
  "record_ms",
  "overhead_ms",
];
const MARKS = [
  "scheduled_ms",
  "container_running_ms",
  "worker_started_ms",
  "worker_imported_ms",
  "cache_ready_ms",
  "blast_started_ms",
  "blast_ended_ms",
  "upload_started_ms",
  "completed_observed_ms",
  "recorded_ms",
];

/** GET on the local API server with the kubeconfig's CA and token. */
function kubeGet(kubeconfig, p) {
  const cluster = kubeconfig.clusters[0].cluster;
  const url = new URL(p, cluster.server);
  return new Promise((resolve, reject) => {
    https
      .get(
        url,
        {
          ca: Buffer.from(cluster["certificate-authority-data"], "base64"),
          headers: { Authorization: `Bearer ${kubeconfig.users[0].user.token}` },
        },
        (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () =>
            res.statusCode === 200
              ? resolve(text)
              : reject(new Error(`GET ${p} answered ${res.statusCode}: ${text.slice(0, 300)}`)),
          );
        },
      )
      .on("error", reject);
  });
}

/** Requests the API server has served so far (all clients; the bench reads only between jobs). */
async function apiRequests(kubeconfig) {
  const text = await kubeGet(kubeconfig, "/metrics");
  return text
    .split("\n")
    .filter((l) => l.startsWith("apiserver_request_total"))
    .reduce((n, l) => n + Number(l.split(" ").at(-1)), 0);
}

function runBare(args, cwd) {
  return new Promise((resolve, reject) => {
    const child = spawn("blastn", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (c) => {
      stderr += c;
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`blastn exited ${code}: ${stderr.slice(-300)}`)),
    );
  });
}

/**
 * Runs (f) in its own stack and data folder under `tmp`; returns its results. `runs` measured
 * pairs after one warm-up; which side goes first alternates.
 */
export async function benchKubernetes({ tmp, runs, log, mbases = Number(process.env.BENCH_F_MBASES ?? 64) }) {
  const dbFasta = path.join(tmp, "f-db.fa");
  const queryPath = path.join(tmp, "f-queries.fa");
  log(`(f) generating ${mbases} Mbases for ${SHARDS} partitions`);
  const gen = await generateData({
    seed: 20_261_123,
    totalLetters: mbases * 1_000_000,
    families: 200,
    membersPerFamily: 20,
    memberLength: 2000,
    backgroundLength: 50_000,
    relatedQueries: 16,
    unrelatedQueries: 4,
    queryLength: 2000,
    dbPath: dbFasta,
    queryPath,
  });
  const dataDir = path.join(tmp, "f-stack");
  const stackLog = path.join(tmp, "f-stack.log");
  const stack = await startStack({
    dataDir,
    logPath: stackLog,
    env: {
      BLASTPLANE_EXECUTOR: "kubernetes",
      BLASTPLANE_KUBE_NODES: String(SHARDS),
      BLASTPLANE_KUBE_NODE_MEMORY_BYTES: String(4 * 1024 ** 3),
      JOBAPI_K8S_MAX_JOBS_PER_SEARCH: String(SHARDS),
    },
  });
  try {
    const api = jobApiClient(stack);
    const kubeconfig = JSON.parse(readFileSync(stack.info.kubeconfig, "utf8"));
    log(`  ${cli(dataDir, ["db", "add", DB_NAME, dbFasta, "--type", "nucl", "--partitions", String(SHARDS)]).trim()}`);
    const dbDir = path.join(dataDir, "jobapi", "databases", DB_NAME);
    const release = path.join(dbDir, readFileSync(path.join(dbDir, "current"), "utf8").trim());
    const manifest = JSON.parse(readFileSync(path.join(release, "manifest.json"), "utf8"));
    const queryFasta = readFileSync(queryPath, "utf8");
    let threads;
    const runJob = async () => {
      const before = await apiRequests(kubeconfig);
      const started = performance.now();
      const accepted = await api.post("/v1/jobs", {
        program: "blastn",
        db: DB_NAME,
        query_fasta: queryFasta,
        blast_options: { task: "blastn", evalue: 1e-5 },
        execution_profile: "sharded",
      });
      let etag;
      for (;;) {
        const res = await api.watch(`/v1/jobs/${accepted.job_id}/status`, etag, 30);
        if (res.status === 200) {
          etag = res.etag;
          if (res.body.status === "completed") break;
          if (res.body.status === "failed" || res.body.status === "cancelled")
            throw new Error(`job ${accepted.job_id} ${res.body.status}: ${res.body.error}`);
        }
      }
      const wall = (performance.now() - started) / 1000;
      const calls = (await apiRequests(kubeconfig)) - before;
      // The shards' own argv: the bare runs use the same -num_threads.
      const pods = JSON.parse(
        await kubeGet(
          kubeconfig,
          `/api/v1/namespaces/blastplane/pods?labelSelector=blastplane.io%2Fjob-id%3D${accepted.job_id}`,
        ),
      ).items;
      const args = pods[0].spec.containers[0].args;
      threads = Number(args[args.indexOf("-num_threads") + 1]);
      if (pods.length !== SHARDS) throw new Error(`expected ${SHARDS} shard pods, found ${pods.length}`);
      // The stack's log is written through a pipe: its last lines may trail the job's completion by a moment.
      let timings = shardTimingsOf(stackLog, accepted.job_id);
      for (let i = 0; i < 20 && timings.length < SHARDS; i++) {
        await sleep(100);
        timings = shardTimingsOf(stackLog, accepted.job_id);
      }
      return { wall, callsPerShard: calls / SHARDS, timings };
    };
    const runBareShards = async () => {
      const started = performance.now();
      await Promise.all(
        manifest.partitions.map((p) =>
          runBare(
            [
              ...BLAST_ARGS,
              "-query",
              queryPath,
              "-db",
              p.path,
              "-outfmt",
              "5",
              "-out",
              path.join(tmp, `f-p${p.index}.xml`),
              "-num_threads",
              String(threads),
            ],
            release,
          ),
        ),
      );
      return (performance.now() - started) / 1000;
    };
    const ours = [];
    const bare = [];
    const calls = [];
    const foreign = [];
    const timings = [];
    for (let i = 0; i <= runs; i++) {
      const meter = foreignLoadMeter();
      let job;
      let b;
      if (i % 2 === 1) {
        b = await runBareShards();
        job = await runJob();
      } else {
        job = await runJob();
        b = await runBareShards();
      }
      const foreignCores = meter();
      log(
        `  ${i === 0 ? "warm-up" : `run ${i}`}: job ${job.wall.toFixed(2)} s, bare shards ${b.toFixed(2)} s, API calls per shard ${job.callsPerShard}, foreign load ${foreignCores.toFixed(2)} cores`,
      );
      if (i === 0) continue;
      foreign.push(foreignCores);
      ours.push(job.wall);
      bare.push(b);
      calls.push(job.callsPerShard);
      timings.push(...job.timings);
      await sleep(100);
    }
    const ratios = ours.map((x, i) => x / bare[i]);
    const medianOf = (names) =>
      Object.fromEntries(
        names
          .map((n) => [n, timings.map((t) => t[n]).filter((x) => typeof x === "number")])
          .filter(([, xs]) => xs.length > 0)
          .map(([n, xs]) => [n, Math.round(median(xs))]),
      );
    const phases = medianOf(PHASES);
    const marks = medianOf(MARKS);
    log(
      `  (f) per shard, median ms over ${timings.length} shards: ${Object.entries(phases)
        .map(([n, x]) => `${n.replace(/_ms$/, "")} ${x}`)
        .join(", ")}`,
    );
    log(
      `  (f) per shard, median ms from the Job's creation: ${Object.entries(marks)
        .map(([n, x]) => `${n.replace(/_ms$/, "")} ${x}`)
        .join(", ")}`,
    );
    return {
      shards: SHARDS,
      letters: gen.letters,
      queries: gen.queries,
      threads_per_shard: threads,
      ours_s: round(median(ours)),
      baseline_s: round(median(bare)),
      ratio: round(median(ours) / median(bare)),
      median_pair_ratio: round(median(ratios)),
      pair_ratio_range: [round(Math.min(...ratios)), round(Math.max(...ratios))],
      target: TARGET_RATIO,
      pass: median(ours) / median(bare) <= TARGET_RATIO,
      api_calls_per_shard: calls,
      shard_phases_ms: phases,
      shard_marks_ms: marks,
      runs_ours_s: ours.map((x) => round(x)),
      runs_baseline_s: bare.map((x) => round(x)),
      ...foreignLoadOf(foreign),
    };
  } finally {
    await stack.stop();
  }
}
