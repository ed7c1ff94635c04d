import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobDispatcher } from "../../jobapi/jobs/dispatcher.js";
import { JobService, type Submission } from "../../jobapi/jobs/job-service.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { ShardSpec } from "../../jobapi/executors/executor.js";
import type { RunningAzurite } from "../../local/azurite.js";
import { blastVersion } from "../../shared/blast/blast-tools.js";
import {
  createFileDatabaseCatalog,
  type DatabaseCatalog,
  publishDatabase,
} from "../../shared/databases/database-catalog.js";
import { createLogger } from "../../shared/logging/logger.js";
import { demoQueries } from "../support/jobapi-client.js";
import { testAzurite } from "../support/service-fakes.js";

const logger = createLogger({ level: "error" });
const GIB = 1024 ** 3;
let azurite: RunningAzurite;
let dir: string;
let artifacts: ArtifactStore;
let catalog: DatabaseCatalog;
let tables = 0;

/** A shard executor whose shards run until the dispatcher stops; `started` resolves at the first shard. */
function heldExecutor() {
  let markStarted: (spec: ShardSpec) => void = () => {};
  const started = new Promise<ShardSpec>((resolve) => {
    markStarted = resolve;
  });
  const executor = {
    name: "held",
    oneNode: true,
    run: (spec: ShardSpec, signal: AbortSignal) =>
      new Promise<void>((_, reject) => {
        markStarted(spec);
        signal.addEventListener("abort", () => reject(signal.reason), { once: true });
      }),
  };
  return { started, executor };
}

/** A job API's submit path and dispatcher over tables of their own, one job running at a time. */
async function jobApiParts() {
  const jobs = JobStore.fromConnectionString(azurite.connectionString, `qpos${++tables}`);
  await jobs.init();
  const held = heldExecutor();
  const dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor: held.executor,
    logger,
    workDir: path.join(dir, "work"),
    maxActiveJobs: 1,
    nodeMemoryBytes: 64 * GIB,
    memoryMarginBytes: 0,
    threadsPerShard: "auto",
    shardSlots: 1,
    shardAttempts: 1,
  });
  const service = new JobService({
    jobs,
    artifacts,
    catalog,
    dispatcher,
    logger,
    blastVersion,
    maxQueuedJobs: 3,
    retryAfterSeconds: 5,
  });
  return { jobs, dispatcher, service, held };
}

const search = (skip: number, priority?: Submission["priority"]): Submission => ({
  program: "blastn",
  db: "qposdemo",
  query_fasta: demoQueries(1, 200, skip),
  source: "external_api",
  ...(priority === undefined ? {} : { priority }),
});

beforeAll(async () => {
  azurite = await testAzurite();
  dir = mkdtempSync(path.join(os.tmpdir(), "bp-qpos-"));
  const fasta = path.join(dir, "db.fa");
  writeFileSync(fasta, demoQueries(20, 800));
  const databasesDir = path.join(dir, "databases");
  await publishDatabase(databasesDir, { name: "qposdemo", fastaPath: fasta, type: "nucl", partitions: 0 });
  artifacts = ArtifactStore.fromConnectionString(azurite.connectionString, "qpos");
  await artifacts.init();
  catalog = createFileDatabaseCatalog(databasesDir);
});

afterEach(() => {
  vi.restoreAllMocks();
});

afterAll(async () => {
  await azurite?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("queue_position at submit", () => {
  it("counts only jobs still waiting: a job that started running since the last queue listing is not ahead of a new submit", async () => {
    const { jobs, dispatcher, service, held } = await jobApiParts();
    await dispatcher.start();
    try {
      // Submits within one second of a queue listing reuse it (a burst lists the queue once). The
      // clock stands still here, so the next submits are always within that second, however slow
      // the machine: the one listing is the blocker's, taken while it was still waiting.
      const frozen = Date.now();
      vi.spyOn(Date, "now").mockReturnValue(frozen);
      const blocker = await service.submit(search(1));
      expect(blocker.queuePosition).toBe(1);
      // The dispatcher took the blocker out of the queue and runs its shard.
      expect((await held.started).jobId).toBe(blocker.job.job_id);
      expect((await jobs.get(blocker.job.job_id))?.status).toBe("running");

      const low = await service.submit(search(2, "low"));
      const normal = await service.submit(search(3, 50));
      const urgent = await service.submit(search(4, "urgent"));
      // Each answers its place among the jobs waiting at that moment; the running blocker is none of them.
      expect([low.queuePosition, normal.queuePosition, urgent.queuePosition]).toEqual([1, 1, 1]);
      // The status route's position, from a fresh listing, agrees.
      expect(await Promise.all([urgent, normal, low].map((o) => service.queuePosition(o.job)))).toEqual([1, 2, 3]);
    } finally {
      await dispatcher.stop();
    }
  });

  it("counts only jobs still waiting: a job cancelled since the last queue listing is not ahead of a new submit", async () => {
    const { dispatcher, service } = await jobApiParts();
    try {
      vi.spyOn(Date, "now").mockReturnValue(Date.now());
      const first = await service.submit(search(5));
      expect(first.queuePosition).toBe(1);
      expect((await service.cancel(first.job.job_id)).status).toBe("cancelled");
      const next = await service.submit(search(6));
      expect(next.queuePosition).toBe(1);
    } finally {
      await dispatcher.stop();
    }
  });
});

describe("queue_position in status reads", () => {
  it("B-074 status reads at once share one queue listing, each position exact, and a job queued while a listing runs is counted", async () => {
    const { jobs, dispatcher, service } = await jobApiParts();
    try {
      // Nothing is dispatched here: every job stays queued. Submits reuse the first one's listing.
      vi.spyOn(Date, "now").mockReturnValue(Date.now());
      const a = await service.submit(search(7));
      const b = await service.submit(search(8));
      // The first queue listing from here on is held until released; each listing is counted.
      const list = jobs.list.bind(jobs);
      let listings = 0;
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let markListing: () => void = () => {};
      const listing = new Promise<void>((resolve) => {
        markListing = resolve;
      });
      vi.spyOn(jobs, "list").mockImplementation(async function* (statuses) {
        listings++;
        if (listings === 1) {
          markListing();
          await held;
        }
        yield* list(statuses);
      });
      const firstRead = service.queuePosition(a.job);
      await listing;
      // Queued while that listing runs: the listing may not hold it, so its reads wait for the next.
      const c = await service.submit(search(9));
      const reads = Promise.all([a, b, c].map((o) => service.queuePosition(o.job)));
      release();
      expect(await firstRead).toBe(1);
      expect(await reads).toEqual([1, 2, 3]);
      // One listing for the first read, one shared by the three reads made while it ran (was one each).
      expect(listings).toBe(2);
    } finally {
      await dispatcher.stop();
    }
  });
});
