import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { gunzipSync } from "node:zlib";
import { TableClient } from "@azure/data-tables";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import type { DatabaseManifest } from "../../shared/blast/database-builder.js";
import { mergeBlastXml } from "../../shared/blast/xml-merge.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import type { DatabaseCatalog, DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { JobDispatcher } from "../../jobapi/jobs/dispatcher.js";
import type { ShardExecutor, ShardSpec } from "../../jobapi/executors/executor.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import { type JobRecord, newJobId, newJobRecord } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { eventually } from "../support/local-stack.js";
import { startTestAzurite } from "../support/service-fakes.js";

/**
 * The dispatcher's handling of what BLAST wrote, against real storage (Azurite) and real BLAST+
 * output. The executor here only places a given output file where the shard's BLAST would have
 * written it: a malformed BLAST output cannot be had from BLAST+ itself.
 */
const root = path.resolve(import.meta.dirname, "../..");
let azurite: RunningAzurite;
let dir = "";
/** Real blastn XML output of two queries against a small database. */
let blastXml = "";

beforeAll(async () => {
  azurite = await startTestAzurite();
  dir = mkdtempSync(path.join(os.tmpdir(), "blastplane-dispatch-"));
  const fasta = readFileSync(path.join(root, "local/demo/16s-rrna-demo.fasta"), "utf8");
  const records = fasta.split(/(?=^>)/m);
  writeFileSync(path.join(dir, "db.fa"), records.slice(0, 60).join(""));
  writeFileSync(path.join(dir, "q.fa"), records.slice(0, 2).join(""));
  execFileSync("makeblastdb", ["-in", "db.fa", "-dbtype", "nucl", "-parse_seqids", "-out", "full/demo"], {
    cwd: dir,
    stdio: "pipe",
  });
  execFileSync(
    "blastn",
    ["-query", "q.fa", "-db", "full/demo", "-outfmt", "5", "-max_target_seqs", "20", "-out", "blast.xml"],
    { cwd: dir, stdio: "pipe" },
  );
  blastXml = path.join(dir, "blast.xml");
});

afterAll(async () => {
  await azurite?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const TRUNCATED = () => {
  const file = path.join(dir, "truncated.xml");
  const text = readFileSync(blastXml, "latin1");
  writeFileSync(file, text.slice(0, text.lastIndexOf("<Hit>") + 40), "latin1");
  return file;
};

function setup(outputFor: (spec: ShardSpec) => string, partitions = 0) {
  const logged: string[] = [];
  const logger = createLogger({ level: "error", write: (line) => logged.push(line) });
  const prefix = `d${newJobId().slice(0, 6)}`;
  const jobs = new JobStore(
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}jobs`, { allowInsecureConnection: true }),
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}keys`, { allowInsecureConnection: true }),
  );
  const container = new ContainerClient(azurite.connectionString, `${prefix}artifacts`);
  const artifacts = new ArtifactStore(container);
  // The whole database's counts, as BLAST reported them (each partition's output here is the whole one).
  const reported = (tag: string) =>
    Number(new RegExp(`<${tag}>(\\d+)</${tag}>`).exec(readFileSync(blastXml, "latin1"))?.[1]);
  const manifest: DatabaseManifest = {
    name: "demo",
    type: "nucl",
    version: "2026-01-01-00-00-00",
    letters: reported("Statistics_db-len"),
    sequences: reported("Statistics_db-num"),
    bytes: 1000,
    volumes: 1,
    bytes_to_cache: 1000,
    path: "full/demo",
    partitions: Array.from({ length: partitions }, (_, i) => ({
      index: i + 1,
      path: `parts/p${i + 1}/demo`,
      letters: 500,
      sequences: 30,
    })),
    created_at: new Date().toISOString(),
  };
  const entry: DatabaseEntry = { manifest, root: dir, location: "local://databases/demo/2026-01-01-00-00-00" };
  const catalog: DatabaseCatalog = {
    list: async () => [entry],
    get: async () => entry,
    hold: async () => {},
    release: async () => {},
  };
  const executor: ShardExecutor = {
    name: "fixture",
    oneNode: true,
    async run(spec) {
      copyFileSync(outputFor(spec), spec.outputPath);
    },
  };
  const dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor,
    logger,
    workDir: path.join(dir, `${prefix}-work`),
    maxActiveJobs: 2,
    nodeMemoryBytes: 64 * 1024 ** 3,
    memoryMarginBytes: 0,
    threadsPerShard: "auto",
    shardSlots: 2,
    shardAttempts: 1,
    pollIntervalMs: 50,
  });
  const submit = async (profile: "standard" | "sharded"): Promise<string> => {
    const job = newJobRecord({
      job_id: newJobId(),
      program: "blastn",
      db_name: "demo",
      db_version: manifest.version,
      db_location: entry.location,
      blast_version: "2.12.0+",
      blast_options: { max_target_seqs: 20 },
      priority: 50,
      execution_profile: profile,
      resource_profile: "",
      submission_source: "external_api",
      external_correlation_id: "",
      idempotency_key: "",
      fingerprint: "",
      query_count: 2,
      query_letters: 3000,
    });
    await artifacts.putText(job.job_id, "query.fa", readFileSync(path.join(dir, "q.fa"), "utf8"));
    await jobs.create(job);
    dispatcher.wake();
    return job.job_id;
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
    artifacts,
    dispatcher,
    submit,
    finished,
    blob,
    logged,
    init: () => Promise.all([jobs.init(), artifacts.init()]),
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
    const t = setup(() => blastXml);
    await t.init();
    await t.dispatcher.start();
    try {
      const jobId = await t.submit("standard");
      const done = (await t.finished(jobId)) as JobRecord;
      expect(done.status).toBe("completed");
      const shardGz = (await t.blob(jobId, "shards/b0.out.gz")) as Buffer;
      const mergedGz = (await t.blob(jobId, "merged_results.out.gz")) as Buffer;
      expect(gunzipSync(shardGz).equals(readFileSync(blastXml))).toBe(true);
      const merged = gunzipSync(mergedGz);
      expect(merged.equals(await mergedByTheMerge([blastXml], "demo"))).toBe(true);
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

  it("fails a partitioned job when one partition's output is truncated, publishing no merged file", async () => {
    const t = setup((spec) => (spec.args.includes("parts/p2/demo") ? TRUNCATED() : blastXml), 2);
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
});
