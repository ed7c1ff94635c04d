import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ContainerServiceClient } from "@azure/arm-containerservice";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeClusterBackend } from "../../local/arm/kube-backend.js";
import { localArmProviders } from "../../local/arm/providers/index.js";
import { type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import { createLogger } from "../../shared/logging/logger.js";
import {
  type ClusterTarget,
  createClusterProvisioning,
  type StepPoll,
  type StepStart,
} from "../../shared/cluster/cluster-provisioning.js";
import { ValidationError } from "../../shared/errors.js";
import { requireNodeSizeFits } from "../../shared/cluster/vm-sizes.js";
import { ARM_WORLD, type LocalArmWorld, startLocalArmWorld } from "../support/local-arm.js";
import { testCertificate } from "../support/test-certificate.js";
import { jwksTokenVerifier } from "../../local/arm/auth.js";
import type { ClusterBackend } from "../../local/arm/providers/container-service.js";
import { seedResourceGroup, seedSubscription } from "../../local/arm/providers/resources.js";
import { startLocalArm } from "../../local/arm/server.js";
import { devManagedIdentityIssuer } from "../../local/dev-idp.js";

let world: LocalArmWorld;
// The local stack's arrangement: the local Resource Manager's clusters are the local Kubernetes API's node pools.
let kube: LocalCluster;
let kubeDir: string;
beforeAll(async () => {
  kubeDir = mkdtempSync(path.join(tmpdir(), "bp-arm-kube-"));
  kube = await startLocalCluster({
    logger: createLogger({ level: "error" }),
    dataDir: kubeDir,
    nodes: [],
    images: [],
    namespaces: ["blastplane"],
  });
  world = await startLocalArmWorld({
    pollsBeforeDone: 2,
    retryAfterSeconds: 3,
    providers: localArmProviders({ backend: kubeClusterBackend(kube) }),
  });
});
afterAll(async () => {
  await world?.close();
  await kube?.stop();
  if (kubeDir) rmSync(kubeDir, { recursive: true, force: true });
});

const target = (name: string, extra: Partial<ClusterTarget> = {}): ClusterTarget => ({
  subscription_id: ARM_WORLD.subscriptionId,
  resource_group: ARM_WORLD.resourceGroup,
  location: ARM_WORLD.location,
  cluster_name: name,
  blast_vm_size: "Standard_E8s_v5",
  blast_node_count: 2,
  system_vm_size: "Standard_D2s_v5",
  ...extra,
});
const arm = () => createClusterProvisioning({ credential: world.credential, clientOptions: world.clientOptions });

/** What the orchestrator does between activities, without the timers: poll until the change ends. */
async function drive(t: ClusterTarget, start: StepStart): Promise<StepPoll> {
  let poll: StepPoll = { status: "InProgress", retry_after_seconds: 0 };
  for (let i = 0; i < 20 && poll.status === "InProgress"; i++)
    poll =
      start.kind === "started"
        ? await arm().pollOperation(t, start.poll_url)
        : start.kind === "running"
          ? await arm().pollResource(t, start.resource)
          : { status: "Succeeded", retry_after_seconds: 0 };
  return poll;
}

const puts = (name: string) =>
  world.arm.requests.filter((r) => r.method === "PUT" && r.path.toLowerCase().includes(`/managedclusters/${name}`));

describe("cluster provisioning steps through @azure/arm-containerservice against the local Resource Manager", () => {
  it("B-003 creates the cluster with OIDC, workload identity and Entra RBAC, then the BLAST pool, honouring Retry-After", async () => {
    const t = target("aks-blast");
    const start = await arm().startCluster(t);
    expect(start).toMatchObject({ kind: "started", retry_after_seconds: 3 });
    expect((start as { poll_url: string }).poll_url).toContain(
      "/providers/Microsoft.ContainerService/locations/eastus/operations/",
    );
    expect(await drive(t, start)).toMatchObject({ status: "Succeeded" });
    expect(await drive(t, await arm().startBlastPool(t))).toMatchObject({ status: "Succeeded" });
    const cluster = world.arm.store.get(
      `/subscriptions/${ARM_WORLD.subscriptionId}/resourceGroups/${ARM_WORLD.resourceGroup}/providers/Microsoft.ContainerService/managedClusters/aks-blast`,
    );
    expect(cluster?.properties).toMatchObject({
      provisioningState: "Succeeded",
      oidcIssuerProfile: { enabled: true },
      securityProfile: { workloadIdentity: { enabled: true } },
      aadProfile: { managed: true, enableAzureRBAC: true },
      disableLocalAccounts: true,
      // The browser terminal's ingress (decision 0022): the application routing add-on and the Key
      // Vault secrets provider it reads the TLS certificate with.
      ingressProfile: { webAppRouting: { enabled: true } },
      addonProfiles: { azureKeyvaultSecretsProvider: { enabled: true } },
    });
    expect(await arm().summary(t)).toMatchObject({
      power_state: "Running",
      provisioning_state: "Succeeded",
      blast_pool: { vm_size: "Standard_E8s_v5", count: 2 },
    });
  });

  it("is idempotent: a second provision changes nothing and sends no PUT", async () => {
    const t = target("aks-blast");
    const before = puts("aks-blast").length;
    expect(await arm().startCluster(t)).toEqual({ kind: "done" });
    expect(await arm().startBlastPool(t)).toEqual({ kind: "done" });
    expect(puts("aks-blast")).toHaveLength(before);
  });

  it("a start that runs again while the change is under way (host restart) polls it instead of a second PUT", async () => {
    const t = target("aks-restart");
    await arm().startCluster(t);
    const again = await arm().startCluster(t);
    expect(again).toEqual({ kind: "running", resource: "cluster", retry_after_seconds: 10 });
    expect(puts("aks-restart")).toHaveLength(1);
    expect(await drive(t, again)).toMatchObject({ status: "Succeeded" });
  });

  it("ARM failing mid-operation: the step fails with ARM's reason; a retry resumes at that step and creates nothing twice", async () => {
    const t = target("aks-quota");
    expect(await drive(t, await arm().startCluster(t))).toMatchObject({ status: "Succeeded" });
    world.arm.planOperation({
      resource: /managedClusters\/aks-quota\/agentPools\/blast$/i,
      status: "Failed",
      error: {
        code: "QuotaExceeded",
        message: "Operation could not be completed as it results in exceeding approved quota.",
      },
    });
    expect(await drive(t, await arm().startBlastPool(t))).toMatchObject({
      status: "Failed",
      error: "QuotaExceeded: Operation could not be completed as it results in exceeding approved quota.",
    });
    const clusterPuts = puts("aks-quota").filter((r) => !r.path.includes("agentPools")).length;
    // The retry: the cluster step finds its cluster as wanted, the pool step tries the pool again.
    expect(await arm().startCluster(t)).toEqual({ kind: "done" });
    expect(await drive(t, await arm().startBlastPool(t))).toMatchObject({ status: "Succeeded" });
    expect(puts("aks-quota").filter((r) => !r.path.includes("agentPools"))).toHaveLength(clusterPuts);
  });

  it("a transient poll answer (500, 429) is not the outcome: the step polls on", async () => {
    const t = target("aks-flaky");
    const start = await arm().startCluster(t);
    world.arm.inject({ method: "GET", path: /\/operations\//, status: 500 });
    expect(await arm().pollOperation(t, (start as { poll_url: string }).poll_url)).toMatchObject({
      status: "InProgress",
      error: "InternalServerError: Injected failure (500).",
    });
    expect(await drive(t, start)).toMatchObject({ status: "Succeeded" });
  });

  it("a cluster name ARM would reject fails the step with ARM's InvalidParameter", async () => {
    const error = (await arm()
      .startCluster(target("-bad-name-"))
      .catch((e: unknown) => e)) as { statusCode?: number; code?: string };
    expect(error.statusCode).toBe(400);
    expect(error.code).toBe("InvalidParameter");
  });

  it("missing Contributor: the start is refused with ARM's AuthorizationFailed for the cluster write", async () => {
    const undo = world.arm.deny({ action: "Microsoft.ContainerService/managedClusters/write" });
    try {
      const error = (await arm()
        .startCluster(target("aks-denied"))
        .catch((e: unknown) => e)) as { statusCode?: number; code?: string; message?: string };
      expect(error.statusCode).toBe(403);
      expect(error.code).toBe("AuthorizationFailed");
      expect(error.message).toContain("'Microsoft.ContainerService/managedClusters/write'");
    } finally {
      undo();
    }
  });

  it("stop and start change the power state; delete removes the cluster", async () => {
    const t = target("aks-blast");
    expect(await drive(t, await arm().startClusterAction(t, "stop"))).toMatchObject({ status: "Succeeded" });
    expect((await arm().summary(t))?.power_state).toBe("Stopped");
    expect(await arm().startClusterAction(t, "stop")).toEqual({ kind: "done" });
    expect(await drive(t, await arm().startClusterAction(t, "start"))).toMatchObject({ status: "Succeeded" });
    expect((await arm().summary(t))?.power_state).toBe("Running");
    expect(await drive(t, await arm().startClusterAction(t, "delete"))).toMatchObject({ status: "Succeeded" });
    expect(await arm().summary(t)).toBeNull();
  });
});

describe("the local stack's clusters are the local Kubernetes API's node pools (ClusterBackend)", () => {
  const nodesOf = (cluster: string) =>
    kube.store
      .list("nodes", undefined, (n) => n.metadata.labels?.["kubernetes.azure.com/cluster"] === cluster)
      .map((n) => ({
        name: n.metadata.name,
        pool: n.metadata.labels?.["kubernetes.azure.com/agentpool"],
        blast: n.metadata.labels?.["blastplane.io/pool"],
        taints: (n.spec as { taints?: unknown[] } | undefined)?.taints ?? [],
        memory: (n.status as { capacity: { memory: string } }).capacity.memory,
      }));

  it("B-003 provisioning makes the pools' nodes; the credentials are that API's; scale, stop, start and delete follow", async () => {
    const t = target("aks-local", { blast_node_count: 2 });
    expect(await drive(t, await arm().startCluster(t))).toMatchObject({ status: "Succeeded" });
    expect(await drive(t, await arm().startBlastPool(t))).toMatchObject({ status: "Succeeded" });
    const nodes = nodesOf("aks-local");
    expect(nodes.map((n) => n.pool).sort()).toEqual(["blast", "blast", "system"]);
    // The BLAST pool as the job API's Deployment and the shard Jobs select it: label, taint, the VM size's memory.
    const blast = nodes.filter((n) => n.pool === "blast");
    expect(blast.every((n) => n.blast === "blast" && n.memory === `${64 * 1024}Mi`)).toBe(true);
    expect(blast[0]?.taints).toEqual([{ key: "blastplane.io/pool", value: "blast", effect: "NoSchedule" }]);

    // listClusterUserCredential answers the local Kubernetes API's kubeconfig: what a deploy uses.
    const client = new ContainerServiceClient(world.credential, ARM_WORLD.subscriptionId, world.clientOptions);
    const credentials = await client.managedClusters.listClusterUserCredentials(ARM_WORLD.resourceGroup, "aks-local");
    const kubeconfig = Buffer.from(credentials.kubeconfigs?.[0]?.value ?? new Uint8Array()).toString("utf8");
    expect(kubeconfig).toBe(readFileSync(kube.kubeconfigPath, "utf8"));
    const { CoreV1Api, KubeConfig } = await import("@kubernetes/client-node");
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfig);
    const listed = await kc.makeApiClient(CoreV1Api).listNode({ labelSelector: "blastplane.io/pool=blast" });
    expect(listed.items.map((n) => n.metadata?.name).sort()).toEqual(blast.map((n) => n.name).sort());

    const scaled = target("aks-local", { blast_node_count: 3 });
    expect(await drive(scaled, await arm().startBlastPool(scaled))).toMatchObject({ status: "Succeeded" });
    expect(nodesOf("aks-local").filter((n) => n.pool === "blast")).toHaveLength(3);
    expect(await drive(t, await arm().startClusterAction(t, "stop"))).toMatchObject({ status: "Succeeded" });
    expect(nodesOf("aks-local")).toEqual([]);
    expect(await drive(t, await arm().startClusterAction(t, "start"))).toMatchObject({ status: "Succeeded" });
    expect(nodesOf("aks-local")).toHaveLength(4);
    expect(await drive(t, await arm().startClusterAction(t, "delete"))).toMatchObject({ status: "Succeeded" });
    expect(nodesOf("aks-local")).toEqual([]);
  });
});

describe("the BLAST pool's memory rule", () => {
  it("refuses a node size too small for the largest database up front, with the remedies", () => {
    const refusal = (() => {
      try {
        requireNodeSizeFits("Standard_D4s_v5", [
          { name: "16s_demo", bytesToCache: 2 * 1024 ** 3 },
          { name: "nt", bytesToCache: 250 * 1024 ** 3 },
        ]);
      } catch (e) {
        return e;
      }
    })() as ValidationError;
    expect(refusal).toBeInstanceOf(ValidationError);
    expect(refusal.issues[0]?.loc).toEqual(["body", "node_size"]);
    expect(refusal.issues[0]?.msg).toContain(
      "database memory requirements of nt (250.0 GiB to cache) exceed the machine type's memory",
    );
    expect(refusal.issues[0]?.msg).toContain("such as Standard_E48s_v5");
    expect(() =>
      requireNodeSizeFits("Standard_E32s_v5", [{ name: "nt", bytesToCache: 200 * 1024 ** 3 }]),
    ).not.toThrow();
  });
});

describe("the local Resource Manager's saved state (what a restarted stack finds)", () => {
  it("a cluster being created when the server stops is still being created after a restart on the same port; its operation then ends Succeeded and the pools' nodes come back", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-arm-state-"));
    const stateFile = path.join(dir, "arm-state.json");
    const applied: string[] = [];
    const backend: ClusterBackend = {
      applyPools: (_id, pools) => void applied.push(pools.map((p) => `${p.name}×${p.count}`).join(",")),
      setRunning: () => undefined,
      kubeconfig: () => "",
    };
    const { key, cert } = testCertificate();
    const start = (port?: number) =>
      startLocalArm({
        key,
        cert,
        ...(port ? { port } : {}),
        stateFile,
        providers: localArmProviders({ backend }),
        verifyToken: jwksTokenVerifier({
          jwksUrl: world.idp.jwksUrl,
          issuer: devManagedIdentityIssuer(ARM_WORLD.tenantId),
        }),
        pollsBeforeDone: 1,
        retryAfterSeconds: 0,
      });
    const first = await start();
    let pollUrl = "";
    try {
      seedSubscription(first.store, {
        subscriptionId: ARM_WORLD.subscriptionId,
        displayName: ARM_WORLD.subscriptionName,
        tenantId: ARM_WORLD.tenantId,
      });
      seedResourceGroup(first.store, ARM_WORLD.subscriptionId, ARM_WORLD.resourceGroup, ARM_WORLD.location);
      const provisioning = createClusterProvisioning({
        credential: world.credential,
        clientOptions: { ...world.clientOptions, endpoint: first.url, tlsOptions: { ca: cert } },
      });
      const t = target("aks-saved");
      const started = (await provisioning.startCluster(t)) as { kind: string; poll_url: string };
      expect(started.kind).toBe("started");
      pollUrl = started.poll_url;
    } finally {
      await first.close();
    }
    expect(applied).toEqual([]);

    const second = await start(Number(new URL(first.url).port));
    try {
      expect(second.restored).toBe(true);
      const again = createClusterProvisioning({
        credential: world.credential,
        clientOptions: { ...world.clientOptions, endpoint: second.url, tlsOptions: { ca: cert } },
      });
      const t = target("aks-saved");
      // The step run again (a replayed activity) finds the creation under way: it polls, no second PUT.
      expect(await again.startCluster(t)).toMatchObject({ kind: "running", resource: "cluster" });
      // The orchestration's saved poll URL answers on the restarted server, and the operation ends.
      let poll: StepPoll = { status: "InProgress", retry_after_seconds: 0 };
      for (let i = 0; i < 5 && poll.status === "InProgress"; i++) poll = await again.pollOperation(t, pollUrl);
      expect(poll.status).toBe("Succeeded");
      expect(second.store.list("Microsoft.ContainerService/ManagedClusters")).toHaveLength(1);
      expect(second.requests.filter((r) => r.method === "PUT")).toHaveLength(0);
      expect(applied).toEqual(["system×1"]);
    } finally {
      await second.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
