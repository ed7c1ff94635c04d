import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildShardArgs, type ShardSpec } from "../../jobapi/executors/executor.js";
import { createKubernetesExecutor } from "../../jobapi/executors/kubernetes-executor.js";
import { POD_USER } from "../../jobapi/executors/kubernetes-manifests.js";
import { createKubernetesWarmup, type WarmupView } from "../../jobapi/executors/kubernetes-warmup.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { blastPoolNodes, type LocalCluster, prepareNodeFolder, startLocalCluster } from "../../local/kube/cluster.js";
import { type DatabaseEntry, publishDatabase } from "../../shared/databases/database-catalog.js";
import { fileDigest, type ReleaseManifest } from "../../shared/databases/release-store.js";
import {
  createTableDatabaseCatalog,
  openDatabaseStorage,
  type TableDatabaseCatalog,
} from "../../shared/databases/table-catalog.js";
import { newJobId } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { demoQueries } from "../support/jobapi-client.js";
import { eventually, ROOT } from "../support/local-stack.js";
import { testAzuriteStartMs } from "../support/service-fakes.js";

const NS = "blastplane";
const GiB = 1024 ** 3;
const DEMO_FASTA = path.join(ROOT, "local/demo/16s-rrna-demo.fasta");

/** Where the BLAST pool's pods go, as the job API's defaults say. */
const POOL = {
  namespace: NS,
  image: "blastplane-jobapi:local",
  nodeSelector: { "blastplane.io/pool": "blast" },
  tolerations: [{ key: "blastplane.io/pool", operator: "Equal" as const, value: "blast", effect: "NoSchedule" }],
  activeDeadlineSeconds: 600,
  ttlSecondsAfterFinished: 600,
};

/**
 * Azurite, a database release published to it (built in its own folder), an empty node cache and
 * a local cluster of `nodes` BLAST nodes.
 */
async function startFixture(prefix: string, database: string, nodes: number) {
  const logger = createLogger({ level: "error" });
  const work = mkdtempSync(path.join(tmpdir(), prefix));
  // The node's cache belongs to the user shard pods run as (root's kubelet switches to it), who
  // may pass through the work folder (0711) without listing it.
  chmodSync(work, 0o711);
  const cacheRoot = prepareNodeFolder(path.join(work, "node-cache"), POD_USER);
  const azurite = await startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger,
    watchdogPath: path.join(ROOT, "local/parent-watchdog.cjs"),
    startTimeoutMs: testAzuriteStartMs(),
  });
  const storage = openDatabaseStorage(azurite.connectionString);
  const catalog = createTableDatabaseCatalog({ ...storage, cacheRoot: path.join(work, "build") });
  const db = await publishDatabase(
    path.join(work, "build"),
    { name: database, fastaPath: DEMO_FASTA, type: "nucl", partitions: 2 },
    catalog,
  );
  const published = (await storage.store.manifest(database, db.manifest.version)) as ReleaseManifest;
  const cluster = await startLocalCluster({
    logger,
    dataDir: work,
    nodes: blastPoolNodes(nodes, 4 * GiB, 2),
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
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(cluster.kubeconfigPath);
  const stop = async () => {
    await cluster.stop();
    await azurite.stop();
    rmSync(work, { recursive: true, force: true });
  };
  return { logger, work, cacheRoot, azurite, catalog, db, published, cluster, kubeConfig, stop };
}

/** The shard worker's node cache on the local cluster: one node, a cache folder that starts empty. */
describe("shard init on the local cluster: the node-local database cache", () => {
  let fixture: Awaited<ReturnType<typeof startFixture>>;
  let artifacts: ArtifactStore;
  let db: DatabaseEntry;
  let published: ReleaseManifest;
  let work: string;
  let cacheRoot: string;
  let kubeConfig: KubeConfig;
  const logger = createLogger({ level: "error" });
  let executor: ReturnType<typeof createKubernetesExecutor>;

  beforeAll(async () => {
    fixture = await startFixture("bp-kube-cache-", "demo16s", 1);
    ({ work, cacheRoot, db, published, kubeConfig } = fixture);
    artifacts = ArtifactStore.fromConnectionString(fixture.azurite.connectionString);
    await artifacts.init();
    executor = createKubernetesExecutor({
      kubeConfig,
      artifacts,
      logger,
      maxJobs: 8,
      maxJobsPerSearch: 8,
      scheduleTimeoutSeconds: 60,
      storageConnectionString: fixture.azurite.connectionString,
      settings: { ...POOL, backoffLimit: 0, workingSetBytes: 512 * 1024 ** 2, dbCacheHostPath: cacheRoot },
    });
  });

  afterAll(async () => {
    executor?.stop();
    await fixture?.stop();
  });

  const shard = (jobId: string, partition: number): ShardSpec => {
    const dir = mkdtempSync(path.join(work, "shard-"));
    const queryPath = path.join(dir, "b0.fa");
    writeFileSync(queryPath, demoQueries(2, 500));
    const p = db.manifest.partitions.find((x) => x.index === partition);
    return {
      jobId,
      shardId: `b0-p${partition}`,
      program: "blastn",
      args: buildShardArgs({
        optionArgs: [],
        queryPath,
        dbPath: String(p?.path),
        outputPath: path.join(dir, "out.xml"),
        threads: 1,
      }),
      outputPath: path.join(dir, "out.xml"),
      cwd: db.root,
      attempt: 1,
      batch: 0,
      queryPath,
      database: { name: db.manifest.name, version: db.manifest.version },
      memoryBytes: 1024 * 1024,
      threads: 1,
    };
  };

  /** What each of a job's shard pods said about the cache (its "database cache ready" log line). */
  async function cacheReports(jobId: string): Promise<{ downloaded: number; verified: number }[]> {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: `blastplane.io/job-id=${jobId}` });
    const reports: { downloaded: number; verified: number }[] = [];
    for (const pod of pods.items) {
      const log = await core.readNamespacedPodLog({ name: String(pod.metadata?.name), namespace: NS });
      for (const line of String(log).split("\n")) {
        if (!line.includes("database cache ready")) continue;
        const entry = JSON.parse(line) as { downloaded: number; verified: number };
        reports.push({ downloaded: entry.downloaded, verified: entry.verified });
      }
    }
    return reports;
  }

  const partitionFiles = (partition: number) =>
    published.files.filter((f) => f.name === "manifest.json" || f.name.startsWith(`parts/p${partition}/`));

  async function hits(jobId: string): Promise<string> {
    const gz = await artifacts.open(jobId, "shards/b0-p1.out.gz");
    const chunks: Buffer[] = [];
    for await (const c of gz ?? []) chunks.push(c as Buffer);
    return gunzipSync(Buffer.concat(chunks)).toString();
  }

  it("two shard pods of one partition starting together on one node download it once, and both search it", async () => {
    const [a, b] = [newJobId(), newJobId()];
    await Promise.all([
      executor.run(shard(a, 1), new AbortController().signal),
      executor.run(shard(b, 1), new AbortController().signal),
    ]);
    const reports = [...(await cacheReports(a)), ...(await cacheReports(b))];
    expect(reports).toHaveLength(2);
    const files = partitionFiles(1);
    expect(reports.map((r) => r.downloaded).sort()).toEqual([0, files.length]);
    expect(reports.map((r) => r.verified).sort()).toEqual([0, files.length]);
    // Only what the partition needs is on the node, each file as the manifest says.
    const releaseDir = path.join(cacheRoot, "demo16s", db.manifest.version);
    expect(readdirSync(path.join(releaseDir, "parts")).sort()).toEqual(["p1"]);
    expect(readdirSync(releaseDir).sort()).toEqual(["manifest.json", "parts"]);
    for (const f of files)
      expect(await fileDigest(path.join(releaseDir, f.name))).toEqual({ size: f.size, md5: f.md5 });
    for (const job of [a, b]) expect(await hits(job)).toContain("</BlastOutput>");
  });

  it("a cached file corrupted on the node is found by its MD5 and fetched again before BLAST reads it", async () => {
    const releaseDir = path.join(cacheRoot, "demo16s", db.manifest.version);
    const victim = partitionFiles(1).find(
      (f) => f.name.endsWith(".nsq") || (f.name !== "manifest.json" && f.size > 16),
    );
    const file = path.join(releaseDir, String(victim?.name));
    const bytes = readFileSync(file);
    bytes[4] = (bytes[4] as number) ^ 0xff;
    writeFileSync(file, bytes);
    const jobId = newJobId();
    await executor.run(shard(jobId, 1), new AbortController().signal);
    expect(await cacheReports(jobId)).toEqual([{ downloaded: 1, verified: partitionFiles(1).length - 1 }]);
    expect(await fileDigest(file)).toEqual({ size: victim?.size, md5: victim?.md5 });
    expect(await hits(jobId)).toContain("</BlastOutput>");
  });
});

describe("warm-up on the local cluster: one Job per BLAST node, progress node by node", () => {
  let fixture: Awaited<ReturnType<typeof startFixture>>;
  let azurite: RunningAzurite;
  let cluster: LocalCluster;
  let catalog: TableDatabaseCatalog;
  let published: ReleaseManifest;
  let cacheRoot: string;
  let kubeConfig: KubeConfig;
  const logger = createLogger({ level: "error" });

  beforeAll(async () => {
    fixture = await startFixture("bp-kube-warm-", "warmdb", 2);
    ({ azurite, cluster, catalog, published, cacheRoot, kubeConfig } = fixture);
  });

  afterAll(async () => {
    await fixture?.stop();
  });

  it("fills every node's cache with the current release, reports each node's bytes, and evicts the node's older releases no job holds", async () => {
    // Older releases on the node: one a running job still holds, one nobody does.
    for (const old of ["2020-01-01-00-00-00", "2020-02-01-00-00-00"]) {
      mkdirSync(path.join(cacheRoot, "warmdb", old, "full"), { recursive: true });
      writeFileSync(path.join(cacheRoot, "warmdb", old, "full", "warmdb.nsq"), "old");
    }
    // Left by earlier pods: theirs, as the pods' user.
    prepareNodeFolder(cacheRoot, POD_USER);
    await catalog.hold("warmdb", "2020-02-01-00-00-00", "job_still_running");
    const warmup = createKubernetesWarmup({
      kubeConfig,
      catalog,
      logger,
      storage: { kind: "connection-string", connectionString: azurite.connectionString },
      settings: { ...POOL, dbCacheHostPath: cacheRoot },
    });
    const started = await warmup.start("warmdb");
    expect(started.release).toBe(published.release);
    expect(started.nodes.map((n) => n.node)).toEqual(["local-blast-0", "local-blast-1"]);
    // Started twice: the same Jobs, no new ones.
    await warmup.start("warmdb");
    expect(cluster.store.list("jobs", NS)).toHaveLength(2);

    const done = await eventually<WarmupView>(
      async () => {
        const view = await warmup.status("warmdb");
        return view.state === "running" ? undefined : view;
      },
      60_000,
      100,
    );
    const total = published.files.reduce((sum, f) => sum + f.size, 0);
    expect(done).toEqual({
      database: "warmdb",
      release: published.release,
      state: "succeeded",
      nodes: ["local-blast-0", "local-blast-1"].map((node) => ({
        node,
        state: "succeeded",
        bytes_done: total,
        bytes_total: total,
        files_done: published.files.length,
        files_total: published.files.length,
      })),
    });
    const releaseDir = path.join(cacheRoot, "warmdb", published.release);
    for (const f of published.files)
      expect(await fileDigest(path.join(releaseDir, f.name))).toEqual({ size: f.size, md5: f.md5 });
    expect(existsSync(path.join(cacheRoot, "warmdb", "2020-01-01-00-00-00"))).toBe(false);
    expect(existsSync(path.join(cacheRoot, "warmdb", "2020-02-01-00-00-00"))).toBe(true);
    // Each pod ran pinned to its own node.
    const pods = cluster.store.list("pods", NS);
    expect(pods.map((p) => (p.spec as { nodeName?: string }).nodeName).sort()).toEqual([
      "local-blast-0",
      "local-blast-1",
    ]);
  });

  it("an unknown database is 404 and no Job is created", async () => {
    const warmup = createKubernetesWarmup({
      kubeConfig,
      catalog,
      logger,
      storage: { kind: "connection-string", connectionString: azurite.connectionString },
      settings: { ...POOL, dbCacheHostPath: cacheRoot },
    });
    const before = cluster.store.list("jobs", NS).length;
    await expect(warmup.start("no_such_db")).rejects.toThrow(/not prepared/);
    expect(cluster.store.list("jobs", NS)).toHaveLength(before);
  });
});
