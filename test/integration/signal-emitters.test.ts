import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { AccessToken } from "@azure/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BatchV1Api, KubeConfig, type V1Job, Watch } from "@kubernetes/client-node";
import { BlobServiceClient } from "@azure/storage-blob";
import { POD_USER } from "../../jobapi/executors/kubernetes-manifests.js";
import { createKubernetesWarmup } from "../../jobapi/executors/kubernetes-warmup.js";
import { WatchCache } from "../../jobapi/executors/kubernetes-watch.js";
import { blastPoolNodes, type LocalCluster, prepareNodeFolder, startLocalCluster } from "../../local/kube/cluster.js";
import { CloudAuthorizationError, explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import {
  createPrepareDatabaseActivity,
  createWarmDatabaseActivity,
  type DatabaseActivityDependencies,
} from "../../shared/databases/database-activities.js";
import { createClusterWarmupRecorder } from "../../shared/databases/cluster-warmup-recorder.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../../shared/databases/table-catalog.js";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import { CLUSTER_COMPONENT, createHealthTransitions } from "../../shared/ops/emitters/health-transitions.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { createLogger } from "../../shared/logging/logger.js";
import type { OpsEvent } from "../../shared/ops/events.js";
import { createKeyVaultSecretStore } from "../../shared/secrets/key-vault-secret-store.js";
import { startRefusalServer } from "../fakes/azure-refusal-server.js";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { prng, testJobRecord } from "../support/helpers.js";
import { eventually, ROOT } from "../support/local-stack.js";
import { opsWorld as opsWorldOver } from "../support/ops-world.js";
import { refusedShardDispatcher } from "../support/refused-shard-dispatcher.js";
import { azuriteTables, captureLogger } from "../support/service-fakes.js";

/**
 * The control plane's own signals become events (issue 13 §1): each signal happens for real, one
 * event is recorded on real Azurite, a repeat records nothing more, and the operations loop turns it
 * into its rule's verdict.
 */
const { tables, connectionString } = azuriteTables("sig");

const opsWorld = () => opsWorldOver(tables());

describe("warm-up failed", () => {
  const DB = "sigdb";
  const RELEASE = "2025-03-01-00-00-00";
  let ncbi: FakeNcbiServer;
  let work: string;

  beforeAll(async () => {
    const rnd = prng(7);
    ncbi = await startFakeNcbiServer();
    const fasta = Array.from(
      { length: 6 },
      (_, i) => `>s${i}\n${Array.from({ length: 400 }, () => "ACGT"[Math.floor(rnd() * 4)]).join("")}\n`,
    ).join("");
    await ncbi.publishRelease(RELEASE, [{ name: DB, type: "nucl", fasta, volumes: 1 }]);
    await ncbi.setLatest(RELEASE);
    work = await mkdtemp(path.join(tmpdir(), "bp-signals-"));
  });

  afterAll(async () => {
    await ncbi?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("a local warm-up whose release vanished records one database.warmup_failed per warm-up; the loop proposes a re-warm (R-DB-002)", async () => {
    const world = opsWorld();
    const deps: DatabaseActivityDependencies = {
      databasesDir: () => work,
      source: () => createNcbiSource({ baseUrl: ncbi.url }),
      catalog: createFileDatabaseCatalog,
      state: { patch: async () => undefined },
      events: world.events,
      logger: captureLogger(),
    };
    await createPrepareDatabaseActivity(deps)({ name: DB, partitions: 0 });
    const catalog = createFileDatabaseCatalog(work);
    const entry = await catalog.get(DB);
    if (!entry) throw new Error("the release was not prepared");
    await rm(entry.root, { recursive: true, force: true });
    // The catalog was read before the folder vanished: the warm-up itself fails reading the files.
    const warm = createWarmDatabaseActivity({ ...deps, catalog: () => ({ ...catalog, get: async () => entry }) });

    await expect(warm({ name: DB, operation_id: "op-warm-1" })).rejects.toThrow(/ENOENT/);
    // The activity retried (or the orchestration replayed) for the same warm-up: no second event.
    await expect(warm({ name: DB, operation_id: "op-warm-1" })).rejects.toThrow(/ENOENT/);
    const recorded = await world.events.list({ event_type: "database.warmup_failed" });
    expect(recorded).toHaveLength(1);
    const [event] = recorded as [OpsEvent];
    expect(event).toMatchObject({
      idempotency_key: `database.warmup_failed/${DB}/${entry.manifest.version}/op-warm-1`,
      source: "database.warmup.local",
      mode: "shadow",
      correlation_id: "op-warm-1",
      resource_ref: `blast_database/${DB}`,
      payload: { release: entry.manifest.version, mode: "local", failed_nodes: [] },
    });
    expect((event.payload as { reason: string }).reason).toMatch(/^ENOENT/);
    expect(await world.verdictOf(event)).toEqual({
      decision: "propose_action",
      severity: "medium",
      rule_ids: ["R-DB-002"],
      proposed_action: "rewarm_database",
    });

    // The next warm-up that fails is a new happening: its own event.
    await expect(warm({ name: DB, operation_id: "op-warm-2" })).rejects.toThrow(/ENOENT/);
    expect(await world.events.list({ event_type: "database.warmup_failed" })).toHaveLength(2);
  });

  it("a cluster warm-up whose release blob is gone fails on the node; read again and again it is one database.warmup_failed naming the node (R-DB-002)", async () => {
    const world = opsWorld();
    const storage = connectionString();
    const build = path.join(work, "cluster-build");
    const catalog = createTableDatabaseCatalog({ ...openDatabaseStorage(storage), cacheRoot: build });
    const entry = await publishDatabase(
      build,
      {
        name: "sigclusterdb",
        fastaPath: path.join(ROOT, "local/demo/16s-rrna-demo.fasta"),
        type: "nucl",
        partitions: 1,
      },
      catalog,
    );
    // A data file of the release vanishes from storage: the node's warm-up cannot fetch it.
    const container = BlobServiceClient.fromConnectionString(storage).getContainerClient("databases");
    let removed = "";
    for await (const blob of container.listBlobsFlat({ prefix: `releases/sigclusterdb/${entry.manifest.version}/` })) {
      if (!blob.name.endsWith("manifest.json") && !removed) removed = blob.name;
    }
    await container.deleteBlob(removed);
    // The node's cache, the warm-up pod's user's (root's kubelet switches to it; work is 0711 for it).
    await chmod(work, 0o711);
    const cacheRoot = prepareNodeFolder(path.join(work, "node-cache"), POD_USER);
    const cluster = await startLocalCluster({
      logger: createLogger({ level: "error" }),
      dataDir: await mkdtemp(path.join(work, "kube-")),
      nodes: blastPoolNodes(1, 4 * 1024 ** 3, 1),
      namespaces: ["blastplane"],
      images: [
        { pattern: /(^|\/)blastplane-jobapi(:[\w.-]+)?$/, workingDir: ROOT, cmd: ["node", "dist/jobapi/server.js"] },
      ],
      podBackoffMs: 100,
    });
    try {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromFile(cluster.kubeconfigPath);
      const warmup = createKubernetesWarmup({
        kubeConfig,
        catalog,
        logger: createLogger({ level: "error" }),
        storage: { kind: "connection-string", connectionString: storage },
        settings: {
          namespace: "blastplane",
          image: "blastplane-jobapi:local",
          nodeSelector: { "blastplane.io/pool": "blast" },
          tolerations: [{ key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" }],
          activeDeadlineSeconds: 600,
          ttlSecondsAfterFinished: 600,
          dbCacheHostPath: cacheRoot,
        },
      });
      await warmup.start("sigclusterdb");
      const failed = await eventually(
        async () => {
          const view = await warmup.status("sigclusterdb");
          return view.state === "failed" ? view : undefined;
        },
        120_000,
        200,
      );
      const patches: unknown[] = [];
      const record = createClusterWarmupRecorder({
        state: { patch: async (name, change) => patches.push({ name, change }) },
        events: world.events,
        logger: captureLogger(),
      });
      // The orchestration reads the finished view once more after a replay: still one event.
      await record(failed, "op-cluster-1");
      await record(failed, "op-cluster-1");
      expect(patches).toEqual([
        { name: "sigclusterdb", change: { warm_state: "failed" } },
        { name: "sigclusterdb", change: { warm_state: "failed" } },
      ]);
      const recorded = await world.events.list({ event_type: "database.warmup_failed" });
      expect(recorded).toHaveLength(1);
      const [event] = recorded as [OpsEvent];
      expect(event).toMatchObject({
        idempotency_key: `database.warmup_failed/sigclusterdb/${entry.manifest.version}/op-cluster-1`,
        source: "database.warmup.cluster",
        resource_ref: "blast_database/sigclusterdb",
        payload: { mode: "cluster", failed_nodes: ["local-blast-0"], release: entry.manifest.version },
      });
      expect((event.payload as { reason: string }).reason).toMatch(/^warm-up failed on local-blast-0/);
      expect(JSON.stringify(event.payload)).not.toMatch(/https?:\/\//);
      expect(await world.verdictOf(event)).toEqual({
        decision: "propose_action",
        severity: "medium",
        rule_ids: ["R-DB-002"],
        proposed_action: "rewarm_database",
      });
    } finally {
      await cluster.stop();
    }
  });
});

describe("role assignment missing", () => {
  const credential = {
    getToken: async (): Promise<AccessToken> => ({
      token: "managed-identity-token",
      expiresOnTimestamp: Date.now() + 3_600_000,
    }),
  };

  it("Key Vault refusing the identity records one role_assignment.missing naming role and scope (no URL); a repeat does not duplicate; the loop escalates (R-RBAC-001)", async () => {
    const world = opsWorld();
    const fake = await startRefusalServer("keyvault-read", { tls: true });
    try {
      const store = createKeyVaultSecretStore({
        vaultUrl: fake.url,
        credential,
        clientOptions: {
          tlsOptions: { ca: fake.ca },
          disableChallengeResourceVerification: true,
          retryOptions: { maxRetries: 0 },
        },
      });
      const activity = explainCloudAuthorization(
        () => store.get("jobapi-token"),
        reportMissingRoles(world.events, captureLogger(), "functions.activity"),
      );
      await expect(activity()).rejects.toBeInstanceOf(CloudAuthorizationError);
      await expect(activity()).rejects.toBeInstanceOf(CloudAuthorizationError);
    } finally {
      await fake.close();
    }
    const recorded = await world.events.list({ event_type: "role_assignment.missing" });
    expect(recorded).toHaveLength(1);
    const [event] = recorded as [OpsEvent];
    expect(event).toMatchObject({
      source: "functions.activity",
      resource_ref: "role_assignment/Key Vault Secrets User@key vault 'kv-blastplane'",
      payload: { code: "ForbiddenByRbac", role: "Key Vault Secrets User", scope: "key vault 'kv-blastplane'" },
    });
    expect(JSON.stringify(event)).not.toContain(new URL(fake.url).host);
    expect(await world.verdictOf(event)).toEqual({
      decision: "escalate",
      severity: "high",
      rule_ids: ["R-RBAC-001"],
      proposed_action: null,
    });
  });

  it("a shard whose output storage refuses the identity: the job fails with the role message and the job API records one role_assignment.missing (R-RBAC-001)", async () => {
    const world = opsWorld();
    const fake = await startRefusalServer("blob", { tls: false });
    const dir = await mkdtemp(path.join(tmpdir(), "bp-signals-authz-"));
    try {
      const fixture = await refusedShardDispatcher(connectionString(), dir, fake.url, {
        onRoleRefusal: reportMissingRoles(world.events, captureLogger(), "jobapi.dispatcher"),
      });
      const { dispatcher } = fixture;
      await dispatcher.start();
      try {
        // Two jobs refused alike: one missing role, one event.
        for (const job of [testJobRecord(), testJobRecord()]) {
          const failed = await fixture.finish(job);
          expect(failed.error).toContain("Storage Blob Data Contributor");
        }
      } finally {
        await dispatcher.stop();
      }
      const [event, ...more] = await eventually(async () => {
        const found = await world.events.list({ event_type: "role_assignment.missing" });
        return found.length > 0 ? found : undefined;
      });
      expect(more).toEqual([]);
      expect(event).toMatchObject({
        source: "jobapi.dispatcher",
        resource_ref: "role_assignment/Storage Blob Data Contributor@storage account 'blastplanework'",
        payload: {
          code: "AuthorizationPermissionMismatch",
          role: "Storage Blob Data Contributor",
          scope: "storage account 'blastplanework'",
        },
      });
      expect(JSON.stringify(event)).not.toContain("127.0.0.1");
      expect(await world.verdictOf(event as OpsEvent)).toEqual({
        decision: "escalate",
        severity: "high",
        rule_ids: ["R-RBAC-001"],
        proposed_action: null,
      });
    } finally {
      await fake.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("cluster unhealthy", () => {
  const NS = "blastplane";
  let cluster: LocalCluster;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "bp-signals-kube-"));
    cluster = await startLocalCluster({
      logger: createLogger({ level: "error" }),
      dataDir,
      nodes: blastPoolNodes(1, 1024 ** 3, 1),
      namespaces: [NS],
      images: [],
    });
  });

  afterAll(async () => {
    await cluster?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("the executor's watch failing against the cluster's API server is one cluster.unhealthy event per outage, not per failed request; the loop escalates (R-CLU-001)", async () => {
    const world = opsWorld();
    const health = createHealthTransitions({
      tables: world.tables,
      events: world.events,
      logger: captureLogger(),
      source: "jobapi.kubernetes",
    });
    const kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    const batch = kc.makeApiClient(BatchV1Api);
    const observed: Promise<void>[] = [];
    const jobsPath = `/apis/batch/v1/namespaces/${NS}/jobs`;
    // Six failed lists in a row: unhealthy after the third, the next three change nothing, then it answers again.
    cluster.api.inject({ method: "GET", path: new RegExp(`^${jobsPath}`), status: 500, times: 6 });
    const cache = new WatchCache<V1Job>({
      path: jobsPath,
      labelSelector: "app=signals",
      list: () => batch.listNamespacedJob({ namespace: NS, labelSelector: "app=signals" }),
      watch: new Watch(kc),
      logger: captureLogger(),
      onChange: () => {},
      onRequest: () => {},
      maxBackoffMs: 50,
      onHealth: (seen) => observed.push(health.observe(CLUSTER_COMPONENT, seen)),
    });
    try {
      await cache.whenReady();
      // Unhealthy, then healthy again once a list answered: two observations, whatever the timing.
      await eventually(async () => (observed.length >= 2 ? true : undefined));
      await Promise.all(observed);
      expect(observed).toHaveLength(2);
      const recorded = await world.events.list({ event_type: "cluster.unhealthy" });
      expect(recorded).toHaveLength(1);
      const [event] = recorded as [OpsEvent];
      expect(event).toMatchObject({
        source: "jobapi.kubernetes",
        resource_ref: "cluster/kubernetes",
        idempotency_key: "cluster.unhealthy/cluster/kubernetes/after/first",
      });
      expect(JSON.stringify(event.payload)).not.toMatch(/https?:\/\//);
      expect(await world.verdictOf(event)).toEqual({
        decision: "escalate",
        severity: "critical",
        rule_ids: ["R-CLU-001"],
        proposed_action: null,
      });

      // A second outage after it recovered is its own event.
      cluster.api.inject({ method: "GET", path: new RegExp(`^${jobsPath}`), status: 500, times: 3 });
      cluster.api.expireWatches();
      await eventually(async () => (observed.length === 4 ? true : undefined));
      await Promise.all(observed);
      expect(await world.events.list({ event_type: "cluster.unhealthy" })).toHaveLength(2);
    } finally {
      cache.stop();
    }
  });
});
