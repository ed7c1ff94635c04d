import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import type { ShardExecutor, ShardSpec } from "../../jobapi/executors/executor.js";
import { JobDispatcher } from "../../jobapi/jobs/dispatcher.js";
import { statusView } from "../../jobapi/routes/job-views.js";
import { mergeBlastXml } from "../../shared/blast/xml-merge.js";
import { type JobRecord, newJobId } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { demoDatabase, submitDemoJob, testStores, useDispatcherFixture } from "../support/dispatcher-harness.js";
import { eventually } from "../support/local-stack.js";

/**
 * The dispatcher's handling of what BLAST wrote, against real storage (Azurite) and real BLAST+
 * output. The executor here only places a given output file where the shard's BLAST would have
 * written it: a malformed BLAST output cannot be had from BLAST+ itself.
 */
const fixture = useDispatcherFixture("blastplane-dispatch-");

const TRUNCATED = () => {
  const file = path.join(fixture.dir, "truncated.xml");
  const text = readFileSync(fixture.blastXml, "latin1");
  writeFileSync(file, text.slice(0, text.lastIndexOf("<Hit>") + 40), "latin1");
  return file;
};

/**
 * A valid-looking one-shard output of over `bytes` (the fixture's iterations repeated) whose last hit
 * has an e-value that is not a number: only a reader that reads every hit to the end finds it.
 */
const LATE_BAD_EVALUE = (bytes: number) => {
  const file = path.join(fixture.dir, "late-bad-evalue.xml");
  const text = readFileSync(fixture.blastXml, "latin1");
  const first = text.indexOf("<Iteration>");
  const end = text.lastIndexOf("</BlastOutput_iterations>");
  const iterations = text.slice(first, end);
  const body = iterations.repeat(Math.ceil(bytes / iterations.length));
  const last = body.lastIndexOf("<Hsp_evalue>") + "<Hsp_evalue>".length;
  const bad = `${body.slice(0, last)}not-a-number${body.slice(body.indexOf("</Hsp_evalue>", last))}`;
  writeFileSync(file, text.slice(0, first) + bad + text.slice(end), "latin1");
  return file;
};

function setup(
  outputFor: (spec: ShardSpec) => string,
  partitions = 0,
  beforeOutput: (spec: ShardSpec) => Promise<void> = async () => {},
) {
  const logged: string[] = [];
  const logger = createLogger({ level: "error", write: (line) => logged.push(line) });
  const prefix = `d${newJobId().slice(0, 6)}`;
  const stores = testStores(fixture, prefix);
  const { jobs, artifacts } = stores;
  // The whole database's counts, as BLAST reported them (each partition's output here is the whole one).
  const { entry, catalog } = demoDatabase(fixture, partitions);
  const executor: ShardExecutor = {
    name: "fixture",
    oneNode: true,
    async run(spec) {
      await beforeOutput(spec);
      copyFileSync(outputFor(spec), spec.outputPath);
    },
  };
  const dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor,
    logger,
    workDir: path.join(fixture.dir, `${prefix}-work`),
    maxActiveJobs: 2,
    nodeMemoryBytes: 64 * 1024 ** 3,
    memoryMarginBytes: 0,
    threadsPerShard: "auto",
    shardSlots: 2,
    shardAttempts: 1,
    pollIntervalMs: 50,
  });
  const submit = async (profile: "standard" | "sharded"): Promise<string> => {
    const jobId = await submitDemoJob(fixture, stores, entry, profile);
    dispatcher.wake();
    return jobId;
  };
  const finished = (jobId: string) =>
    eventually(
      async () => {
        const j = await jobs.get(jobId);
        return j && ["completed", "failed", "cancelled"].includes(j.status) ? j : undefined;
      },
      30_000,
      50,
    );
  const blob = async (jobId: string, name: string): Promise<Buffer | undefined> => {
    const stream = await artifacts.open(jobId, name);
    if (!stream) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  };
  return {
    jobs,
    artifacts,
    dispatcher,
    submit,
    finished,
    blob,
    logged,
    init: stores.init,
  };
}

async function mergedByTheMerge(files: string[], database: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const output = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  await mergeBlastXml({
    shards: files.map((p, i) => ({ batchIndex: 0, partitionIndex: i, path: p })),
    maxTargetSeqs: 20,
    database,
    output,
  });
  return Buffer.concat(chunks);
}

describe("dispatcher: publishing what BLAST wrote", () => {
  it("stores a one-shard job's output as BLAST wrote it, and its merged document as the merge writes it", async () => {
    const t = setup(() => fixture.blastXml);
    await t.init();
    await t.dispatcher.start();
    try {
      const jobId = await t.submit("standard");
      const done = (await t.finished(jobId)) as JobRecord;
      expect(done.status).toBe("completed");
      const shardGz = (await t.blob(jobId, "shards/b0.out.gz")) as Buffer;
      const mergedGz = (await t.blob(jobId, "merged_results.out.gz")) as Buffer;
      expect(gunzipSync(shardGz).equals(readFileSync(fixture.blastXml))).toBe(true);
      const merged = gunzipSync(mergedGz);
      expect(merged.equals(await mergedByTheMerge([fixture.blastXml], "demo"))).toBe(true);
      expect(done.shards).toEqual([expect.objectContaining({ state: "succeeded", output_bytes: shardGz.length })]);
      expect(done).toMatchObject({ merged_bytes: mergedGz.length, merged_xml_bytes: merged.length });
    } finally {
      await t.dispatcher.stop();
    }
  });

  it("fails a one-shard job whose output is truncated, and commits neither of its files", async () => {
    const t = setup(() => TRUNCATED());
    await t.init();
    await t.dispatcher.start();
    try {
      const jobId = await t.submit("standard");
      const done = (await t.finished(jobId)) as JobRecord;
      expect(done.status).toBe("failed");
      expect(done.error).toMatch(/not valid BLAST XML/);
      expect(await t.artifacts.size(jobId, "merged_results.out.gz")).toBeUndefined();
      expect(await t.artifacts.size(jobId, "shards/b0.out.gz")).toBeUndefined();
      expect(t.logged.join("\n")).toContain("truncated BLAST XML");
    } finally {
      await t.dispatcher.stop();
    }
  });

  it("fails a one-shard job whose output is malformed after megabytes of valid iterations (a hit's e-value is not a number), committing neither file", async () => {
    // Past the bytes the reader may lag behind the compression: the check reads the whole output.
    const t = setup(() => LATE_BAD_EVALUE(6 * 1024 * 1024));
    await t.init();
    await t.dispatcher.start();
    try {
      const jobId = await t.submit("standard");
      const done = (await t.finished(jobId)) as JobRecord;
      expect(done.status).toBe("failed");
      expect(done.error).toMatch(/not valid BLAST XML/);
      expect(await t.artifacts.size(jobId, "merged_results.out.gz")).toBeUndefined();
      expect(await t.artifacts.size(jobId, "shards/b0.out.gz")).toBeUndefined();
      expect(t.logged.join("\n")).toContain("Hsp_evalue of hit");
    } finally {
      await t.dispatcher.stop();
    }
  });

  it("fails a partitioned job when one partition's output is truncated, publishing no merged file", async () => {
    const t = setup((spec) => (spec.args.includes("parts/p2/demo") ? TRUNCATED() : fixture.blastXml), 2);
    await t.init();
    await t.dispatcher.start();
    try {
      const jobId = await t.submit("sharded");
      const done = (await t.finished(jobId)) as JobRecord;
      expect(done.status).toBe("failed");
      expect(done.error).toMatch(/not valid BLAST XML/);
      expect(await t.artifacts.size(jobId, "merged_results.out.gz")).toBeUndefined();
      expect(t.logged.join("\n")).toContain("truncated BLAST XML");
      // The intact partition's output is kept (content=full serves it).
      expect(await t.artifacts.size(jobId, "shards/b0-p1.out.gz")).toBeGreaterThan(0);
    } finally {
      await t.dispatcher.stop();
    }
  });

  it("B-144 B-145 B-146 B-147 a sharded job goes queued → dispatching → submitting → running → completed, and its kubernetes.summary counts shards as they start and finish", async () => {
    // Each shard's output is held until the test releases it, so every state is observed, never raced.
    const started: string[] = [];
    const release = new Map<string, () => void>();
    const t = setup(
      () => fixture.blastXml,
      2,
      (spec) =>
        new Promise<void>((resolve) => {
          started.push(spec.shardId);
          release.set(spec.shardId, resolve);
        }),
    );
    await t.init();
    await t.dispatcher.start();
    try {
      const seen: { status: string; summary: ReturnType<typeof statusView>["kubernetes"]["summary"] }[] = [];
      const record = (job: JobRecord | undefined) => {
        if (!job) return;
        const view = statusView(job, null);
        const last = seen.at(-1);
        if (last?.status !== view.status || JSON.stringify(last.summary) !== JSON.stringify(view.kubernetes.summary))
          seen.push({ status: view.status, summary: view.kubernetes.summary });
      };
      const jobId = await submitDemoJob(
        fixture,
        { jobs: t.jobs, artifacts: t.artifacts },
        demoDatabase(fixture, 2).entry,
        "sharded",
      );
      record(await t.jobs.get(jobId));
      const unsubscribe = t.jobs.onChange(jobId, record);
      t.dispatcher.wake();

      // Both shards are marked running when the job starts; the executor may run them one after
      // the other (its slots), so each is released as it starts.
      await eventually(async () => started.length >= 1 || undefined, 30_000, 20);
      const summaryNow = async () => statusView((await t.jobs.get(jobId)) as JobRecord, null).kubernetes.summary;
      expect((await t.jobs.get(jobId))?.status).toBe("running");
      expect(await summaryNow()).toEqual({ total: 2, succeeded: 0, failed: 0, active: 2 });
      release.get(started[0] ?? "")?.();
      await eventually(
        async () => ((await summaryNow()).succeeded === 1 && started.length === 2) || undefined,
        30_000,
        20,
      );
      expect(statusView((await t.jobs.get(jobId)) as JobRecord, null)).toMatchObject({
        status: "running",
        kubernetes: { summary: { total: 2, succeeded: 1, failed: 0, active: 1 } },
      });
      release.get(started[1] ?? "")?.();
      const done = await t.finished(jobId);
      unsubscribe();
      expect(done.status).toBe("completed");

      // The order of states as written, each once; and the counters' path through the run.
      const statuses = seen.map((s) => s.status).filter((s, i, all) => s !== all[i - 1]);
      expect(statuses).toEqual(["queued", "dispatching", "submitting", "running", "completed"]);
      const counters = seen.filter((s) => s.status === "running" || s.status === "completed").map((s) => s.summary);
      expect(counters[0]).toEqual({ total: 2, succeeded: 0, failed: 0, active: 2 });
      expect(counters).toContainEqual({ total: 2, succeeded: 1, failed: 0, active: 1 });
      expect(counters.at(-1)).toEqual({ total: 2, succeeded: 2, failed: 0, active: 0 });
    } finally {
      for (const free of release.values()) free();
      await t.dispatcher.stop();
    }
  });
});
