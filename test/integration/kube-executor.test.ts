import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { BlobServiceClient } from "@azure/storage-blob";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/serializer.js";
import { Job } from "kubernetes-models/batch/v1";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildShardArgs, type ShardSpec } from "../../jobapi/executors/executor.js";
import {
  createKubernetesExecutor,
  type KubernetesExecutorOptions,
} from "../../jobapi/executors/kubernetes-executor.js";
import { POD_USER, type ShardJobSettings } from "../../jobapi/executors/kubernetes-manifests.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import {
  decodeWorkerTimings,
  type ObservedTimings,
  shardTimeline,
  TIMINGS_METADATA_KEY,
  type WorkerTimings,
} from "../../jobapi/jobs/shard-timings.js";
import { type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { blastPoolNodes, type LocalCluster, prepareNodeFolder, startLocalCluster } from "../../local/kube/cluster.js";
import { type DatabaseEntry, publishDatabase } from "../../shared/databases/database-catalog.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../../shared/databases/table-catalog.js";
import { ShardFailedError } from "../../shared/errors.js";
import { newJobId } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { demoQueries } from "../support/jobapi-client.js";
import { eventually, ROOT } from "../support/local-stack.js";
import { testAzuriteStartMs } from "../support/service-fakes.js";

const NS = "blastplane";
const GiB = 1024 ** 3;
const DEMO_FASTA = path.join(ROOT, "local/demo/16s-rrna-demo.fasta");

describe("Kubernetes executor on the local cluster", () => {
  let azurite: RunningAzurite;
  let cluster: LocalCluster;
  let artifacts: ArtifactStore;
  let db: DatabaseEntry;
  let work: string;
  let kubeConfig: KubeConfig;
  const logger = createLogger({ level: "error" });
  const settings: ShardJobSettings = {
    namespace: NS,
    image: "blastplane-jobapi:local",
    nodeSelector: { "blastplane.io/pool": "blast" },
    tolerations: [{ key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" }],
    backoffLimit: 1,
    activeDeadlineSeconds: 600,
    ttlSecondsAfterFinished: 600,
    workingSetBytes: 512 * 1024 ** 2,
    dbCacheHostPath: "",
  };
  const executors: ReturnType<typeof createKubernetesExecutor>[] = [];
  const executor = (
    overrides: Partial<Omit<KubernetesExecutorOptions, "settings">> & { settings?: Partial<ShardJobSettings> } = {},
  ) => {
    const e = createKubernetesExecutor({
      kubeConfig,
      artifacts,
      logger,
      maxJobs: 8,
      maxJobsPerSearch: 8,
      scheduleTimeoutSeconds: 60,
      storageConnectionString: azurite.connectionString,
      ...overrides,
      settings: { ...settings, dbCacheHostPath: path.dirname(path.dirname(db.root)), ...(overrides.settings ?? {}) },
    });
    executors.push(e);
    return e;
  };
  /** A shard of `jobId` on partition `partition`; `slow` makes BLAST take seconds (tblastx). */
  const shard = (
    jobId: string,
    partition: number,
    options: { slow?: boolean; attempt?: number; memoryBytes?: number; sharded?: boolean } = {},
  ): ShardSpec => {
    const dir = mkdtempSync(path.join(work, "shard-"));
    const queryPath = path.join(dir, "b0.fa");
    writeFileSync(queryPath, options.slow ? demoQueries(4, 1500, 10) : demoQueries(2, 500));
    const p = db.manifest.partitions.find((x) => x.index === partition);
    return {
      jobId,
      shardId: `b0-p${partition}`,
      program: options.slow ? "tblastx" : "blastn",
      args: buildShardArgs({
        optionArgs: [],
        queryPath,
        dbPath: String(p?.path),
        outputPath: path.join(dir, "out.xml"),
        threads: 1,
      }),
      outputPath: path.join(dir, "out.xml"),
      cwd: db.root,
      attempt: options.attempt ?? 1,
      batch: 0,
      queryPath,
      database: { name: db.manifest.name, version: db.manifest.version },
      memoryBytes: options.memoryBytes ?? 1024 * 1024,
      ...(options.sharded === undefined ? {} : { sharded: options.sharded }),
      threads: 1,
    };
  };
  const jobsOf = (jobId: string) =>
    cluster.store.list("jobs", NS, (j) => j.metadata.labels?.["blastplane.io/job-id"] === jobId);
  const podsOf = (jobId: string) =>
    cluster.store.list("pods", NS, (p) => p.metadata.labels?.["blastplane.io/job-id"] === jobId);
  const creates = () => cluster.api.count((k) => k.startsWith("POST jobs 201"));
  const running = (jobId: string) =>
    eventually(async () => podsOf(jobId).find((p) => (p.status as { phase?: string }).phase === "Running"), 30_000, 50);
  const failureOf = async (p: Promise<unknown>) => {
    const error = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ShardFailedError);
    return error as ShardFailedError;
  };

  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), "bp-kube-exec-"));
    azurite = await startAzurite({
      blobPort: 0,
      queuePort: 0,
      tablePort: 0,
      logger,
      watchdogPath: path.join(ROOT, "local/parent-watchdog.cjs"),
      startTimeoutMs: testAzuriteStartMs(),
    });
    artifacts = ArtifactStore.fromConnectionString(azurite.connectionString);
    await artifacts.init();
    // Published to the storage account (the shard's init step verifies its cache against it); the
    // build folder is the node cache here, so nothing is downloaded.
    const catalog = createTableDatabaseCatalog({
      ...openDatabaseStorage(azurite.connectionString),
      cacheRoot: path.join(work, "databases"),
    });
    db = await publishDatabase(
      path.join(work, "databases"),
      { name: "demo16s", fastaPath: DEMO_FASTA, type: "nucl", partitions: 2 },
      catalog,
    );
    // The build folder is the node's cache: the shard pods' user (root's kubelet switches to it)
    // owns it and passes through the work folder (0711) without listing it.
    chmodSync(work, 0o711);
    prepareNodeFolder(path.dirname(path.dirname(db.root)), POD_USER);
    cluster = await startLocalCluster({
      logger,
      dataDir: work,
      nodes: blastPoolNodes(2, 2 * GiB, 2),
      namespaces: [NS],
      images: [
        {
          pattern: /(^|\/)blastplane-jobapi(:[\w.-]+)?$/,
          workingDir: ROOT,
          cmd: ["node", "dist/jobapi/server.js"],
          files: ["dist/jobapi"],
        },
      ],
      bookmarkIntervalMs: 500,
      podBackoffMs: 100,
    });
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(cluster.kubeconfigPath);
  });

  afterAll(async () => {
    for (const e of executors) e.stop();
    await cluster?.stop();
    await azurite?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("runs a shard as one Job whose worker publishes its output; API calls per shard do not grow with its duration; manifests pass the OpenAPI schemas", async () => {
    const ex = executor();
    const jobId = newJobId();
    const observed = await ex.run(shard(jobId, 1), new AbortController().signal);
    const gz = await artifacts.open(jobId, "shards/b0-p1.out.gz");
    const chunks: Buffer[] = [];
    for await (const c of gz ?? []) chunks.push(c as Buffer);
    const xml = gunzipSync(Buffer.concat(chunks)).toString();
    expect(xml).toContain("<BlastOutput_program>blastn</BlastOutput_program>");
    expect(xml.trimEnd().endsWith("</BlastOutput>")).toBe(true);
    expect(jobsOf(jobId).map((j) => j.metadata.name)).toEqual([`bp-${jobId}-b0-p1-a1`]);
    // Where the shard's time went (issue 24): what the executor saw of its Job, in order, and the
    // worker's own phases, stored with its output (read with the size the job API reads anyway).
    expect(observed).toBeDefined();
    const seen = observed as ObservedTimings;
    expect([seen.created, seen.scheduled, seen.running].every((t) => typeof t === "number")).toBe(true);
    expect(seen.created).toBeLessThanOrEqual(seen.scheduled as number);
    expect(seen.scheduled).toBeLessThanOrEqual(seen.running as number);
    expect(seen.running).toBeLessThanOrEqual(seen.completed);
    const stored = await artifacts.properties(jobId, "shards/b0-p1.out.gz");
    const worker = decodeWorkerTimings(stored?.metadata[TIMINGS_METADATA_KEY]);
    expect(worker).toBeDefined();
    const w = worker as WorkerTimings;
    const order = [w.started, w.imported, w.cache_ready, w.blast_started, w.blast_ended, w.upload_started];
    expect(order).toEqual([...order].sort((x, y) => x - y));
    expect(w.upload_started).toBeLessThanOrEqual(seen.completed);
    expect(Object.keys(shardTimeline(seen, w, Date.now()))).toEqual(
      expect.arrayContaining([
        "pod_start_ms",
        "import_ms",
        "cache_ms",
        "blast_ms",
        "upload_and_exit_ms",
        "overhead_ms",
      ]),
    );

    // After the caches are up, a shard costs one call (its create), short or long.
    const before = ex.apiCalls();
    await ex.run(shard(jobId, 2), new AbortController().signal);
    const short = ex.apiCalls() - before;
    const slowJob = newJobId();
    const beforeSlow = ex.apiCalls();
    await ex.run(shard(slowJob, 1, { slow: true }), new AbortController().signal);
    expect(short).toBe(1);
    expect(ex.apiCalls() - beforeSlow).toBe(1);
    // No Job or pod was read one by one: state came from the watches.
    expect(cluster.api.count((k) => /^GET (jobs|pods) /.test(k))).toBe(0);

    for (const { resource, body } of cluster.api.created.filter((c) => c.resource === "jobs")) {
      expect(resource).toBe("jobs");
      expect(() => new Job(body as ConstructorParameters<typeof Job>[0]).validate()).not.toThrow();
      expect(ObjectSerializer.serialize(ObjectSerializer.deserialize(body, "V1Job"), "V1Job")).toEqual(body);
    }
  });

  it("never publishes a shard twice: a new pod of a published shard leaves the stored output as it was", async () => {
    const ex = executor();
    const jobId = newJobId();
    await ex.run(shard(jobId, 1), new AbortController().signal);
    const first = await artifacts.size(jobId, "shards/b0-p1.out.gz");
    const blob = BlobServiceClient.fromConnectionString(azurite.connectionString)
      .getContainerClient("jobapi-artifacts")
      .getBlobClient(`${jobId}/shards/b0-p1.out.gz`);
    const stored = await blob.getProperties();
    // Checksummed: the blob carries the MD5 of what was uploaded.
    expect(stored.contentMD5?.length).toBe(16);
    // The Job is gone (as after its TTL), and a later attempt (a restarted job API) runs the shard's worker again.
    cluster.store.remove("jobs", NS, `bp-${jobId}-b0-p1-a1`);
    await executor().run(shard(jobId, 1, { attempt: 2 }), new AbortController().signal);
    expect(jobsOf(jobId).map((j) => j.metadata.name)).toEqual([`bp-${jobId}-b0-p1-a2`]);
    expect((await blob.getProperties()).etag).toBe(stored.etag);
    expect(await artifacts.size(jobId, "shards/b0-p1.out.gz")).toBe(first);
  });

  it("rides out 429 and 500 from the API server, and a watch that ends with 410 Gone (re-list)", async () => {
    const ex = executor();
    await ex.run(shard(newJobId(), 1), new AbortController().signal);
    cluster.api.inject({ method: "POST", path: /\/jobs$/, status: 429, times: 2, retryAfterSeconds: 1 });
    cluster.api.inject({ method: "POST", path: /\/jobs$/, status: 500, times: 2 });
    const jobId = newJobId();
    const before = ex.apiCalls();
    const done = ex.run(shard(jobId, 1, { slow: true }), new AbortController().signal);
    await running(jobId);
    expect(ex.apiCalls() - before).toBe(5);
    expect(cluster.api.count((k) => k.startsWith("POST fault:") && k.endsWith(" 429"))).toBeGreaterThanOrEqual(2);
    // The next watch reconnect fails once with a 500; then every watch is expired (410).
    cluster.api.inject({ method: "GET", path: /watch=true/, status: 500, times: 1 });
    const relists = ex.relists();
    cluster.api.expireWatches();
    await done;
    expect(ex.relists()).toBeGreaterThan(relists);
    expect(jobsOf(jobId)).toHaveLength(1);
  });

  it("adopts a running shard's Job after a restart instead of creating a second one", async () => {
    const first = executor();
    const jobId = newJobId();
    const stopping = new AbortController();
    const abandoned = first.run(shard(jobId, 1, { slow: true }), stopping.signal).catch((e: unknown) => e);
    await running(jobId);
    // The job API stops (its runs are aborted); the Job keeps running on the cluster.
    stopping.abort(new Error("job API stopping"));
    await abandoned;
    first.stop();
    const creating = creates();
    const second = executor();
    // The restarted dispatcher counts the resumed shard's next attempt.
    await second.run(shard(jobId, 1, { slow: true, attempt: 2 }), new AbortController().signal);
    expect(creates()).toBe(creating);
    expect(jobsOf(jobId).map((j) => j.metadata.name)).toEqual([`bp-${jobId}-b0-p1-a1`]);
    expect(await artifacts.size(jobId, "shards/b0-p1.out.gz")).toBeGreaterThan(0);
  });

  it("cancel deletes the job's Jobs with Background propagation: no Job or pod is left", async () => {
    const ex = executor();
    const jobId = newJobId();
    const run = new AbortController();
    const done = ex.run(shard(jobId, 1, { slow: true }), run.signal).catch((e: unknown) => e);
    const pod = await running(jobId);
    run.abort(new Error("job cancelled"));
    await ex.cancelJob?.(jobId);
    await done;
    expect(jobsOf(jobId)).toHaveLength(0);
    await eventually(async () => (podsOf(jobId).length === 0 ? true : undefined), 20_000);
    const pid = Number(
      String(
        (pod.status as { containerStatuses: { containerID: string }[] }).containerStatuses[0]?.containerID,
      ).replace("local://", ""),
    );
    await eventually(async () => {
      try {
        process.kill(pid, 0);
        return undefined;
      } catch {
        return true;
      }
    });
  });

  it("fails a shard over its memory limit with OOMKilled and the pre-flight's remedies, at once", async () => {
    const ex = executor({ settings: { workingSetBytes: 24 * 1024 ** 2 } });
    const jobId = newJobId();
    const error = await failureOf(ex.run(shard(jobId, 1, { memoryBytes: 0 }), new AbortController().signal));
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(/OOMKilled — the shard's pod used more than its memory limit of 24\.0 MiB/);
    expect(error.message).toContain(
      "Remedies: submit from the dashboard with the sharded execution profile, recreate the cluster with a larger machine type, or choose a smaller database.",
    );
    // Not left to Kubernetes' own retries: the Job is deleted.
    await eventually(async () => (jobsOf(jobId).length === 0 ? true : undefined));
  });

  it("B-246 does not offer the sharded execution profile as the remedy when a shard of a sharded job runs out of memory", async () => {
    const ex = executor({ settings: { workingSetBytes: 24 * 1024 ** 2 } });
    const jobId = newJobId();
    const error = await failureOf(
      ex.run(shard(jobId, 1, { memoryBytes: 0, sharded: true }), new AbortController().signal),
    );
    expect(error.message).toMatch(/OOMKilled — the shard's pod used more than its memory limit of 24\.0 MiB/);
    expect(error.message).not.toContain("sharded execution profile");
    expect(error.message).toContain("larger machine type");
    expect(error.message).toContain("more partitions");
    expect(error.message).toContain("smaller database");
    await eventually(async () => (jobsOf(jobId).length === 0 ? true : undefined));
  });

  it("says why a shard cannot be scheduled: the request and the largest allocatable memory, or that no pod was scheduled in time", async () => {
    const big = await failureOf(
      executor().run(shard(newJobId(), 1, { memoryBytes: 64 * GiB }), new AbortController().signal),
    );
    expect(big.retryable).toBe(false);
    expect(big.message).toMatch(
      /Unschedulable — no node has the memory this shard requests: 64\.5 GiB \(largest allocatable seen: 2\.0 GiB\)/,
    );
    expect(big.message).toContain("0/2 nodes are available: 2 Insufficient memory.");
    const never = await failureOf(
      executor({ scheduleTimeoutSeconds: 1, settings: { nodeSelector: { "blastplane.io/pool": "gpu" } } }).run(
        shard(newJobId(), 1),
        new AbortController().signal,
      ),
    );
    expect(never.message).toMatch(
      /no pod was scheduled within 1 s: 0\/2 nodes are available: 2 node\(s\) didn't match Pod's node affinity\/selector/,
    );
  });

  it("fails on an image the cluster cannot pull (ImagePullBackOff) and past the deadline (DeadlineExceeded)", async () => {
    const image = await failureOf(
      executor({ settings: { image: "registry.invalid/other:1" } }).run(
        shard(newJobId(), 1),
        new AbortController().signal,
      ),
    );
    expect(image.message).toMatch(/ImagePullBackOff — Back-off pulling image "registry\.invalid\/other:1"/);
    const late = await failureOf(
      executor({ settings: { activeDeadlineSeconds: 1 } }).run(
        shard(newJobId(), 1, { slow: true }),
        new AbortController().signal,
      ),
    );
    expect(late.message).toMatch(/DeadlineExceeded — the shard ran longer than its deadline of 1 s/);
  });

  it("finishes a shard whose node is lost (Kubernetes starts its pod again elsewhere)", async () => {
    const ex = executor();
    const jobId = newJobId();
    const done = ex.run(shard(jobId, 1, { slow: true }), new AbortController().signal);
    const pod = await running(jobId);
    const node = String((pod.spec as { nodeName: string }).nodeName);
    await kubeConfig.makeApiClient(CoreV1Api).deleteNode({ name: node });
    await done;
    expect(podsOf(jobId).every((p) => (p.spec as { nodeName: string }).nodeName !== node)).toBe(true);
    expect(jobsOf(jobId)).toHaveLength(1);
    // The slow shard runs twice (before and after the node is lost): a hang guard with room for a loaded machine.
  }, 90_000);

  it("admits at most the configured shard Jobs per search; the rest wait", async () => {
    const ex = executor({ maxJobsPerSearch: 1 });
    const jobId = newJobId();
    let most = 0;
    const unsubscribe = cluster.store.subscribe(() => {
      most = Math.max(
        most,
        jobsOf(jobId).filter((j) => !(j.status as { conditions?: unknown[] })?.conditions?.length).length,
      );
    });
    await Promise.all([
      ex.run(shard(jobId, 1), new AbortController().signal),
      ex.run(shard(jobId, 2), new AbortController().signal),
    ]);
    unsubscribe();
    expect(most).toBe(1);
    expect(jobsOf(jobId)).toHaveLength(2);
  });
});
