import { copyFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { ShardExecutor } from "../../jobapi/executors/executor.js";
import { MERGED_ARTIFACT, shardArtifact } from "../../jobapi/jobs/artifact-store.js";
import { DispatchLease } from "../../jobapi/jobs/dispatch-lease.js";
import { JobDispatcher } from "../../jobapi/jobs/dispatcher.js";
import { deployedFleet } from "../../shared/cluster/job-api-manifests.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { newJobId } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { demoDatabase, submitDemoJob, testStores, useDispatcherFixture } from "../support/dispatcher-harness.js";
import { eventually } from "../support/local-stack.js";

/**
 * Two dispatchers on one storage account (Azurite), each with the real dispatch lease on a clock
 * the test drives, hand a job back and forth as paused holders lose the lease. The executor stands
 * in for BLAST: it holds each shard run until the test lets it finish (placing real BLAST+ XML
 * output where BLAST would have written it) or the run is aborted.
 */
/** Long, so the lease's own renewal timer never fires during a test: the test ticks it. */
const DURATION_MS = 600_000;
const SHARD_ATTEMPTS = 2;
const fixture = useDispatcherFixture("blastplane-lease-resume-");

interface HeldRun {
  host: string;
  jobId: string;
  attempt: number | undefined;
  /** Lets the run finish, as BLAST would: its output appears where BLAST writes it. */
  finish(): void;
  /** Settles when the run ended: "finished", or "aborted" by the dispatcher. */
  ended: Promise<"finished" | "aborted">;
}

/** Every shard run of a test, in the order they started, whichever dispatcher started them. */
function heldRuns() {
  const runs: HeldRun[] = [];
  const waiters: (() => void)[] = [];
  const executorFor = (host: string): ShardExecutor => ({
    name: "held",
    oneNode: true,
    run(spec, signal) {
      let finish = () => {};
      let ended: (how: "finished" | "aborted") => void = () => {};
      const run: HeldRun = {
        host,
        jobId: spec.jobId,
        attempt: spec.attempt,
        finish: () => finish(),
        ended: new Promise((resolve) => (ended = resolve)),
      };
      const done = new Promise<void>((resolve, reject) => {
        finish = () => {
          copyFileSync(fixture.blastXml, spec.outputPath);
          ended("finished");
          resolve();
        };
        signal?.addEventListener(
          "abort",
          () => {
            ended("aborted");
            reject(signal.reason);
          },
          { once: true },
        );
      });
      runs.push(run);
      for (const wake of waiters.splice(0)) wake();
      return done;
    },
  });
  /** The `index`th run (from 0), once it started; undefined if `instead` came first. */
  const started = async (index: number, instead: () => Promise<boolean>): Promise<HeldRun | undefined> => {
    for (;;) {
      if (runs.length > index) return runs[index];
      if (await instead()) return undefined;
      // A new run wakes this at once; the timeout only re-checks `instead`.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  };
  return { runs, executorFor, started };
}

function setup() {
  const prefix = `r${newJobId().slice(0, 6)}`;
  const stores = testStores(fixture, prefix);
  const { table, jobs, artifacts } = stores;
  const { entry, catalog } = demoDatabase(fixture);
  const held = heldRuns();
  const clock = { now: 0 };
  /** A job-API process on host `host`: its lease on the shared clock, its dispatcher. */
  const contender = async (host: string, fleet?: string) => {
    const lease = new DispatchLease({
      table: table("lease"),
      fleet,
      leaseDurationMs: DURATION_MS,
      logger: createLogger({ level: "error" }),
      now: () => clock.now,
      host,
      pid: 4242,
    });
    const dispatcher = new JobDispatcher({
      jobs,
      artifacts,
      catalog,
      executor: held.executorFor(host),
      logger: createLogger({ level: "error" }),
      lease,
      fleet,
      workDir: path.join(fixture.dir, `${prefix}-${host}`),
      maxActiveJobs: 1,
      nodeMemoryBytes: 64 * 1024 ** 3,
      memoryMarginBytes: 0,
      threadsPerShard: "auto",
      shardSlots: 1,
      shardAttempts: SHARD_ATTEMPTS,
      pollIntervalMs: 20,
    });
    await lease.init();
    return { host, lease, dispatcher };
  };
  const submit = (): Promise<string> => submitDemoJob(fixture, stores, entry);
  const final = async (jobId: string) => {
    const j = await jobs.get(jobId);
    return j !== undefined && ["completed", "failed", "cancelled"].includes(j.status);
  };
  const storedArtifacts = async (jobId: string) => ({
    merged: await artifacts.size(jobId, MERGED_ARTIFACT),
    shard: await artifacts.size(jobId, shardArtifact("b0")),
  });
  return {
    jobs,
    clock,
    contender,
    held,
    submit,
    final,
    storedArtifacts,
    init: stores.init,
  };
}

/**
 * Another process takes the lease from a holder that stopped renewing (paused): `to` sees the same
 * row for a whole lease duration on the shared clock, then takes over.
 */
async function takeOver(t: ReturnType<typeof setup>, to: Awaited<ReturnType<ReturnType<typeof setup>["contender"]>>) {
  t.clock.now += DURATION_MS / 4;
  await to.lease.tick();
  t.clock.now += DURATION_MS;
  await to.lease.tick();
  expect(to.lease.isHeld()).toBe(true);
}

describe("dispatcher across lease handovers (real lease, driven clock)", () => {
  it("a job resumed by each new holder keeps its attempt: two handovers do not use up its attempts, and each paused holder, resumed, writes nothing", async () => {
    const t = setup();
    await t.init();
    const a = await t.contender("node-a");
    const b = await t.contender("node-b");
    await a.dispatcher.start();
    await b.dispatcher.start();
    try {
      expect([a.dispatcher.role, b.dispatcher.role]).toEqual(["active", "standby"]);
      const jobId = await t.submit();
      a.dispatcher.wake();
      const first = (await t.held.started(0, () => t.final(jobId))) as HeldRun;
      expect(first).toMatchObject({ host: "node-a", attempt: 1 });

      // A hangs (no renewals, its run held); B takes over and resumes the job.
      await takeOver(t, b);
      const second = (await t.held.started(1, () => t.final(jobId))) as HeldRun;
      expect(await t.jobs.get(jobId)).toMatchObject({ status: "running", error: "" });
      expect(second).toMatchObject({ host: "node-b", attempt: 1 });
      const whileB = await t.jobs.get(jobId);

      // A wakes and its search finishes before it hears of the takeover: it must write nothing.
      first.finish();
      expect(await first.ended).toBe("finished");
      await eventually(async () => (a.dispatcher.activeCount === 0 ? true : undefined), 10_000, 10);
      expect(await t.storedArtifacts(jobId)).toEqual({ merged: undefined, shard: undefined });
      expect(await t.jobs.get(jobId)).toEqual(whileB);
      await a.lease.tick();
      expect(a.dispatcher.role).toBe("standby");

      // Now B hangs; A takes the lease back and resumes the job once more.
      await takeOver(t, a);
      const third = (await t.held.started(2, () => t.final(jobId))) as HeldRun;
      expect(await t.jobs.get(jobId)).toMatchObject({ status: "running", error: "" });
      expect(third).toMatchObject({ host: "node-a", attempt: 1 });
      const whileA = await t.jobs.get(jobId);
      second.finish();
      expect(await second.ended).toBe("finished");
      await eventually(async () => (b.dispatcher.activeCount === 0 ? true : undefined), 10_000, 10);
      expect(await t.storedArtifacts(jobId)).toEqual({ merged: undefined, shard: undefined });
      expect(await t.jobs.get(jobId)).toEqual(whileA);
      await b.lease.tick();
      expect(b.dispatcher.role).toBe("standby");

      third.finish();
      await eventually(async () => ((await t.final(jobId)) ? true : undefined), 30_000, 20);
      const done = (await t.jobs.get(jobId)) as JobRecord;
      expect(done).toMatchObject({ status: "completed", error: "" });
      expect(done.shards).toEqual([expect.objectContaining({ id: "b0", state: "succeeded", attempts: 1 })]);
      expect(await t.storedArtifacts(jobId)).toEqual({ merged: expect.any(Number), shard: expect.any(Number) });
      expect(t.held.runs.map((r) => r.attempt)).toEqual([1, 1, 1]);
    } finally {
      await a.dispatcher.stop();
      await b.dispatcher.stop();
    }
  }, 120_000);

  it("a resumed job whose shard already failed its last attempt fails saying so, without running it again", async () => {
    const t = setup();
    await t.init();
    const jobId = await t.submit();
    // As a holder that recorded the shard's last failure and lost the lease before failing the job leaves it.
    await t.jobs.update(jobId, (j) => ({
      ...j,
      status: "running",
      started_at: new Date().toISOString(),
      shards: [{ id: "b0", batch: 0, partition: -1, state: "failed", attempts: SHARD_ATTEMPTS, output_bytes: 0 }],
    }));
    const a = await t.contender("node-a");
    await a.dispatcher.start();
    try {
      await eventually(async () => ((await t.final(jobId)) ? true : undefined), 30_000, 20);
      const done = (await t.jobs.get(jobId)) as JobRecord;
      expect(done.status).toBe("failed");
      expect(done.error).toBe(
        `shard b0 has no attempt left: attempt ${SHARD_ATTEMPTS + 1} of ${SHARD_ATTEMPTS} allowed (JOBAPI_SHARD_ATTEMPTS) would be next; the job API that ran the earlier attempts logged why they failed`,
      );
      expect(t.held.runs).toEqual([]);
    } finally {
      await a.dispatcher.stop();
    }
  }, 60_000);

  it("B-026 two job APIs of different fleets on one storage account (npm start's own and the one deployed to its cluster) each dispatch the jobs submitted to them, at once, and neither resumes the other's", async () => {
    const t = setup();
    await t.init();
    const fleet = deployedFleet("blastplane");
    // Submitted to the deployed job API (its fleet stamped), to npm start's own (no fleet named:
    // `default`, as every record stored before fleets), and one left running by a deployment that is gone.
    const toDeployed = await t.submit();
    await t.jobs.update(toDeployed, (j) => ({ ...j, fleet }));
    const toSupervised = await t.submit();
    const ofGone = await t.submit();
    await t.jobs.update(ofGone, (j) => ({
      ...j,
      fleet: deployedFleet("gone"),
      status: "running",
      started_at: new Date().toISOString(),
    }));
    const supervised = await t.contender("supervised");
    const deployed = await t.contender("deployed", fleet);
    await supervised.dispatcher.start();
    await deployed.dispatcher.start();
    try {
      // Each holds its own fleet's lease: neither stands by for the other.
      expect([supervised.dispatcher.role, deployed.dispatcher.role]).toEqual(["active", "active"]);
      const first = (await t.held.started(0, async () => false)) as HeldRun;
      const second = (await t.held.started(1, async () => false)) as HeldRun;
      const byJob = Object.fromEntries([first, second].map((r) => [r.jobId, r.host]));
      expect(byJob).toEqual({ [toDeployed]: "deployed", [toSupervised]: "supervised" });
      first.finish();
      second.finish();
      for (const jobId of [toDeployed, toSupervised])
        await eventually(async () => ((await t.final(jobId)) ? true : undefined), 30_000, 20);
      expect((await t.jobs.get(toDeployed))?.status).toBe("completed");
      expect((await t.jobs.get(toSupervised))?.status).toBe("completed");
      // Both dispatchers went round many periodic passes (20 ms) meanwhile: the gone fleet's job was
      // resumed by neither, and nothing else ran.
      expect(t.held.runs.map((r) => r.jobId).sort()).toEqual([toDeployed, toSupervised].sort());
      expect((await t.jobs.get(ofGone))?.status).toBe("running");
    } finally {
      await supervised.dispatcher.stop();
      await deployed.dispatcher.stop();
    }
  }, 60_000);
});
