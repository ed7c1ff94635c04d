import { existsSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";

const GIB = 1024 ** 3;

/** A search slow enough to observe (tblastx translates both sides), split over both partitions. */
const slowSearch = (skip: number) => ({
  program: "tblastx",
  db: DEMO_DB,
  query_fasta: demoQueries(4, 1500, skip),
  execution_profile: "sharded",
});

/** Command lines of the running `program` processes under `pid` (the stack), from /proc. */
function runningArgvs(pid: number, program: string): string[][] {
  const read = (file: string) => {
    try {
      return readFileSync(file, "utf8");
    } catch {
      return "";
    }
  };
  const out: string[][] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const p = queue.shift() as number;
    if (read(`/proc/${p}/comm`).trim() === program) out.push(read(`/proc/${p}/cmdline`).split("\0").filter(Boolean));
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      // The process ended between listing its parent's children and reading its threads.
    }
    for (const t of tasks)
      queue.push(...read(`/proc/${p}/task/${t}/children`).trim().split(/\s+/).filter(Boolean).map(Number));
  }
  return out;
}

function hitsByIteration(xml: string): string[][] {
  return xml
    .split("<Iteration>")
    .slice(1)
    .map((it) =>
      [
        ...it.matchAll(
          /<Hit_accession>([^<]*)<\/Hit_accession>[\s\S]*?<Hsp_bit-score>([^<]*)<\/Hsp_bit-score>[\s\S]*?<Hsp_evalue>([^<]*)<\/Hsp_evalue>/g,
        ),
      ].map((m) => `${m[1]} ${m[2]} ${m[3]}`),
    );
}

describe("job API lifecycle: admission, priority, guards, pre-flight", () => {
  let stack: TestStack;
  let api: ReturnType<typeof jobApi>;

  beforeAll(async () => {
    stack = await startStack({
      env: {
        JOBAPI_MAX_ACTIVE_JOBS: "1",
        JOBAPI_MAX_QUEUED_JOBS: "3",
        // Room for one partition of the demo database but not for all of it.
        JOBAPI_NODE_MEMORY_BYTES: String(2 * GIB + 160 * 1024),
      },
    });
    api = jobApi(stack, readApiToken(stack));
  });

  afterAll(async () => {
    await stack?.stop();
    stack?.cleanup();
  });

  it("B-244 B-245 fails the memory pre-flight of a standard search with the spec's message, while the sharded profile runs", async () => {
    const standard = await api.submit({ program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1) });
    const failed = await api.finished(standard.job_id);
    expect(failed.status).toBe("failed");
    expect(String(failed.error)).toMatch(/database memory requirements .* exceed the machine type's memory/);
    expect(String(failed.error)).toContain("sharded execution profile");
    expect(String(failed.error)).toContain("larger machine type");
    expect(String(failed.error)).toContain("smaller database");
    const sharded = await api.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1),
      execution_profile: "sharded",
    });
    const done = await api.finished(sharded.job_id);
    expect(done.status).toBe("completed");
    expect(done.kubernetes).toEqual({ summary: { total: 2, succeeded: 2, failed: 0, active: 0 } });
  });

  it("B-075 B-155 B-156 B-236 B-154 B-239 B-240 B-051 guards results while running, queues by priority and answers 429 when the queue is full", async () => {
    const blocker = await api.submit(slowSearch(20));
    // On one machine a sharded job searches its partitions one at a time: they never run side by side.
    let mostAtOnce = 0;
    const sampler = setInterval(() => {
      mostAtOnce = Math.max(mostAtOnce, runningArgvs(stack.info.pid, "tblastx").length);
    }, 10);
    const running = await eventually(
      async () => {
        const s = await api.status(blocker.job_id);
        return s.status === "running" ? s : undefined;
      },
      20_000,
      50,
    );
    expect(running.queue_position).toBeNull();
    // "auto" threads: a shard running alone gets every core.
    const argvs = await eventually(
      async () => {
        const found = runningArgvs(stack.info.pid, "tblastx");
        // A process just exec'd has its new name before its command line is readable.
        return found.length > 0 && found.every((argv) => argv.includes("-num_threads")) ? found : undefined;
      },
      20_000,
      20,
    );
    for (const argv of argvs) expect(argv[argv.indexOf("-num_threads") + 1]).toBe(String(os.availableParallelism()));
    expect((await api.get(`/v1/jobs/${blocker.job_id}/results?content=xml`)).status).toBe(404);
    expect((await api.get(`/v1/jobs/${blocker.job_id}/results?content=merged`)).status).toBe(404);
    const early = await api.get(`/api/v1/facade/jobs/${blocker.job_id}/files/merged-xml`);
    expect(early.status).toBe(409);
    expect(await early.json()).toMatchObject({
      detail: expect.stringContaining("success"),
      request_id: expect.any(String),
    });

    const low = await api.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 30),
      priority: "low",
      execution_profile: "sharded",
    });
    const normal = await api.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 31),
      priority: 50,
      execution_profile: "sharded",
    });
    const urgent = await api.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 32),
      priority: "urgent",
      execution_profile: "sharded",
    });
    // Each submit answers its place at that moment: higher priority goes ahead of the jobs waiting.
    expect([low.queue_position, normal.queue_position, urgent.queue_position]).toEqual([1, 1, 1]);
    expect((await api.status(urgent.job_id)).queue_position).toBe(1);
    expect((await api.status(normal.job_id)).queue_position).toBe(2);
    expect((await api.status(low.job_id)).queue_position).toBe(3);

    const full = await api.post("/v1/jobs", { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1, 300, 33) });
    expect(full.status).toBe(429);
    expect(Number(full.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await full.json()).toMatchObject({
      detail: expect.stringContaining("queue"),
      request_id: expect.any(String),
    });

    // Queued and running jobs hold their database release against pruning, and let go when done.
    const releaseHolds = (version: string) =>
      path.join(stack.dataDir, "jobapi", "databases", DEMO_DB, ".in-use", version);
    const held = (j: { job_id: string; [k: string]: unknown }) =>
      existsSync(path.join(releaseHolds(String(j.db_version)), j.job_id));
    for (const j of [blocker, urgent, normal, low]) expect(held(j)).toBe(true);

    const finished = await Promise.all([blocker, urgent, normal, low].map((j) => api.finished(j.job_id, 90_000)));
    expect(finished.map((s) => s.status)).toEqual(["completed", "completed", "completed", "completed"]);
    clearInterval(sampler);
    expect(mostAtOnce).toBe(1);
    // The hold is let go right after the final status is written (the dispatcher's finally), so wait briefly.
    await eventually(async () => ([blocker, urgent, normal, low].some(held) ? undefined : true), 5_000, 20);
    const jobs = (await (await api.get("/v1/jobs?limit=500")).json()) as {
      jobs: { job_id: string; updated_at: string }[];
    };
    const order = [urgent, normal, low].map((j) => jobs.jobs.find((x) => x.job_id === j.job_id)?.updated_at ?? "");
    // Higher priority first: the urgent job finished before the normal one, which finished before the low one.
    expect([...order].sort()).toEqual(order);
  }, 120_000);
});

/*
 * A second stack, with room for the standard profile, kept on disk with one job and one shard at a
 * time: the merge comparison runs on it first, then the kill -9 test kills its job API and restarts
 * it on the same data folder.
 */
describe("job API with room for a standard search, on disk, one job and one shard at a time; restart after kill -9 mid-search", () => {
  const oneAtATime = { JOBAPI_SHARD_CONCURRENCY: "1", JOBAPI_MAX_ACTIVE_JOBS: "1" };
  let first: TestStack;
  let second: TestStack | undefined;

  // The start was inside the kill test (300 s) before the merge comparison joined this stack.
  beforeAll(async () => {
    first = await startStack({ inMemory: false, env: oneAtATime });
  }, 120_000);

  afterAll(async () => {
    await second?.stop();
    await first?.stop();
    first?.cleanup();
  });

  it("the sharded profile merges to the same hits, e-values and bit scores as the standard search", async () => {
    // The standard profile cannot pass the first stack's pre-flight; this stack has room for it.
    const big = jobApi(first, readApiToken(first));
    const query = demoQueries(5, 900, 40);
    const options = { evalue: 10, max_target_seqs: 25 };
    const a = await big.submit({ program: "blastn", db: DEMO_DB, query_fasta: query, blast_options: options });
    const b = await big.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: query,
      blast_options: options,
      execution_profile: "sharded",
    });
    await big.finished(a.job_id);
    await big.finished(b.job_id);
    const xa = await (await big.get(`/v1/jobs/${a.job_id}/results?content=xml`)).text();
    const xb = await (await big.get(`/v1/jobs/${b.job_id}/results?content=xml`)).text();
    const ha = hitsByIteration(xa);
    const hb = hitsByIteration(xb);
    expect(ha).toHaveLength(5);
    expect(hb).toHaveLength(5);
    for (let i = 0; i < 5; i++) {
      expect(ha[i]?.length).toBeGreaterThan(0);
      expect([...(hb[i] ?? [])].sort()).toEqual([...(ha[i] ?? [])].sort());
    }
  }, 90_000);

  it("reconciles the job after the job API is killed: finished shards are kept, the rest run again, the job completes", async () => {
    const dataDir = first.dataDir;
    const api1 = jobApi(first, readApiToken(first));
    // Shards long enough that the second is mid-search, seconds from its end, at the kill.
    const { job_id } = await api1.submit(slowSearch(50));
    // A second job waits in the queue through the restart, its database release marked in use.
    const queued = await api1.submit({ program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1, 300, 70) });
    const marker = path.join(
      dataDir,
      "jobapi",
      "databases",
      DEMO_DB,
      ".in-use",
      String(queued.db_version),
      queued.job_id,
    );
    const markerPid = () => (JSON.parse(readFileSync(marker, "utf8")) as { pid: number }).pid;
    // Wait until one shard is done and the other still runs.
    await eventually(
      async () => {
        const s = (await api1.status(job_id)) as { kubernetes: { summary: { succeeded: number } } };
        return s.kubernetes.summary.succeeded >= 1 ? true : undefined;
      },
      60_000,
      50,
    );
    const pids = childPids(first.info.pid);
    const jobApiPid = pids.find(
      (pid) =>
        existsSync(`/proc/${pid}/cmdline`) && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("jobapi/server.js"),
    );
    expect(jobApiPid).toBeDefined();
    const searches = childPids(jobApiPid as number).filter(
      (pid) => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "tblastx",
    );
    expect(searches.length).toBe(1);
    const argv = readFileSync(`/proc/${searches[0]}/cmdline`, "utf8").split("\0");
    const output = argv[argv.indexOf("-out") + 1] as string;
    process.kill(jobApiPid as number, "SIGKILL");
    // The running search dies with the job API (parent-death signal), not left to race its rerun:
    // it ends at once, and its output never gets the document's closing tag.
    await eventually(async () => (searches.every((pid) => !alive(pid)) ? true : undefined), 5_000, 50);
    expect(readFileSync(output, "utf8")).not.toContain("</BlastOutput>");
    await first.stop();
    expect(alive(markerPid())).toBe(false);

    second = await startStack({ dataDir, inMemory: false, env: oneAtATime });
    const api2 = jobApi(second, readApiToken(second));
    // The restarted job API marks the queued job's release again, so pruning keeps it.
    expect(((await api2.status(queued.job_id)) as { status: string }).status).toBe("queued");
    expect(alive(markerPid())).toBe(true);
    const done = (await api2.finished(job_id, 90_000)) as {
      status: string;
      error: string;
      kubernetes: { summary: Record<string, number> };
    };
    expect(done.status).toBe("completed");
    expect(done.error).toBe("");
    expect(done.kubernetes.summary).toEqual({ total: 2, succeeded: 2, failed: 0, active: 0 });
    const xml = await (await api2.get(`/v1/jobs/${job_id}/results?content=xml`)).text();
    expect((xml.match(/<Iteration>/g) ?? []).length).toBe(4);
    expect(((await api2.finished(queued.job_id, 60_000)) as { status: string }).status).toBe("completed");
    // Let go right after the final status is written.
    await eventually(async () => (existsSync(marker) ? undefined : true), 5_000, 20);
  }, 300_000);
});
