import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { AccessToken } from "@azure/identity";
import { AppsV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import { ActionNotConfiguredError, ActionParametersError } from "../../shared/ops/actions/action-executor.js";
import {
  createJobApiDeployment,
  RESTARTED_AT_ANNOTATION,
} from "../../shared/ops/actions/job-api-deployment-actions.js";
import { createAksAgentPools } from "../../shared/ops/actions/node-pool-actions.js";
import { createLogger } from "../../shared/logging/logger.js";
import { type FakeArmAgentPools, startFakeArmAgentPools } from "../fakes/arm-agent-pools.js";
import { actionTestFolder, actionWorld, replayContext } from "../support/action-world.js";
import { azuriteTables } from "../support/service-fakes.js";

const run = promisify(execFile);
const NS = "blastplane";
const DEPLOYMENT = "blastplane-jobapi";
const azurite = azuriteTables("actc");
const folder = actionTestFolder();
let cluster: LocalCluster;
let apps: AppsV1Api;
let arm: FakeArmAgentPools;

beforeAll(async () => {
  [cluster, arm] = await Promise.all([
    startLocalCluster({
      logger: createLogger({ level: "warn" }),
      dataDir: folder.dir(),
      nodes: [],
      namespaces: [NS],
      images: [],
    }),
    startFakeArmAgentPools(),
  ]);
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfigPath);
  apps = kc.makeApiClient(AppsV1Api);
});
afterAll(async () => {
  await Promise.all([cluster?.stop(), arm?.close()]);
});

const context = replayContext;
const credential = {
  getToken: async (): Promise<AccessToken> => ({ token: arm.token, expiresOnTimestamp: Date.now() + 3_600_000 }),
};
const agentPools = () =>
  createAksAgentPools({
    subscriptionId: arm.subscriptionId,
    resourceGroup: arm.resourceGroup,
    cluster: arm.cluster,
    credential,
    clientOptions: { endpoint: arm.url, tlsOptions: { ca: arm.ca }, retryOptions: { maxRetries: 0 } },
    pollIntervalMs: 10,
  });
const jobApiDeployment = () =>
  createJobApiDeployment({ kubeconfigPath: cluster.kubeconfigPath, namespace: NS, deployment: DEPLOYMENT });
const templateAnnotations = async () =>
  (await apps.readNamespacedDeployment({ name: DEPLOYMENT, namespace: NS })).spec?.template.metadata?.annotations ?? {};

describe("redeploy_job_api on the local Kubernetes API server", () => {
  beforeAll(async () => {
    await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: DEPLOYMENT, namespace: NS },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: "jobapi" } },
          template: {
            metadata: { labels: { app: "jobapi" }, annotations: { "prometheus.io/scrape": "true" } },
            spec: { containers: [{ name: "jobapi", image: "blastplane/jobapi:1" }] },
          },
        },
      },
    });
  });

  it("approved: patches the pod template's restartedAt annotation as kubectl rollout restart does, once; a replay patches nothing new", async () => {
    const w = await actionWorld(azurite.connectionString(), folder.databasesDir(), { deployment: jobApiDeployment() });
    const item = await w.approve({ action_type: "redeploy_job_api", target: "job_api/default", params: {} });
    const result = item.execution?.result as { restarted_at: string };
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "enforce", executed: true, namespace: NS, deployment: DEPLOYMENT },
    });
    expect(await templateAnnotations()).toEqual({
      "prometheus.io/scrape": "true",
      [RESTARTED_AT_ANNOTATION]: result.restarted_at,
    });
    // kubectl reads the same annotation back.
    const { stdout } = await run("kubectl", [
      "--kubeconfig",
      cluster.kubeconfigPath,
      "-n",
      NS,
      "get",
      "deployment",
      DEPLOYMENT,
      "-o",
      "jsonpath={.spec.template.metadata.annotations.kubectl\\.kubernetes\\.io/restartedAt}",
    ]);
    expect(stdout).toBe(result.restarted_at);
    const patches = cluster.store.get("deployments", NS, DEPLOYMENT)?.metadata.resourceVersion;
    await w.executor.execute(
      { action_type: "redeploy_job_api", target: "job_api/default", params: {} },
      context(item.approval_id),
    );
    expect(cluster.store.get("deployments", NS, DEPLOYMENT)?.metadata.resourceVersion).toBe(patches);
    expect(await w.executions()).toHaveLength(1);
    // kubectl's own rollout restart sets the same annotation on the same template (only the time differs).
    await run("kubectl", [
      "--kubeconfig",
      cluster.kubeconfigPath,
      "-n",
      NS,
      "rollout",
      "restart",
      `deployment/${DEPLOYMENT}`,
    ]);
    const afterKubectl = await templateAnnotations();
    expect(Object.keys(afterKubectl).sort()).toEqual([RESTARTED_AT_ANNOTATION, "prometheus.io/scrape"].sort());
    expect(afterKubectl[RESTARTED_AT_ANNOTATION]).not.toBe(result.restarted_at);
  });

  it("in shadow mode leaves the Deployment as it is; without a cluster it is refused as not configured", async () => {
    const before = await templateAnnotations();
    const shadow = await actionWorld(azurite.connectionString(), folder.databasesDir(), {
      modes: {},
      deployment: jobApiDeployment(),
    });
    const item = await shadow.approve({ action_type: "redeploy_job_api", target: "job_api/default", params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "shadow", executed: false, would: { namespace: NS, deployment: DEPLOYMENT } },
    });
    expect(await templateAnnotations()).toEqual(before);

    const local = await actionWorld(azurite.connectionString(), folder.databasesDir());
    const refused = await local.approve({ action_type: "redeploy_job_api", target: "job_api/default", params: {} });
    expect(refused.execution).toMatchObject({
      status: "failed",
      result: { error: expect.stringContaining("SVC_KUBECONFIG") },
    });
    await expect(
      local.executor.execute({ action_type: "redeploy_job_api", target: "job_api/default", params: {} }, context("k")),
    ).rejects.toBeInstanceOf(ActionNotConfiguredError);
    expect((await local.executions()).map((e) => e.outcome)).toEqual(["denied", "denied"]);
  });

  it("refuses when the Deployment no longer exists", async () => {
    const w = await actionWorld(azurite.connectionString(), folder.databasesDir(), {
      deployment: createJobApiDeployment({ kubeconfigPath: cluster.kubeconfigPath, namespace: NS, deployment: "gone" }),
    });
    await expect(
      w.executor.execute({ action_type: "redeploy_job_api", target: "job_api/default", params: {} }, context("k")),
    ).rejects.toMatchObject({ name: "ActionStateChangedError", observed: { exists: false } });
  });
});

describe("scale_node_pool through the real ARM client against a fake of the AKS REST API", () => {
  it("approved: sets the pool's count with agentPools createOrUpdate, polling the long-running operation to its end; a replay sends no second PUT", async () => {
    arm.pools.blast = {
      count: 2,
      vmSize: "Standard_E8s_v5",
      mode: "User",
      enableAutoScaling: false,
      provisioningState: "Succeeded",
    };
    arm.requests.length = 0;
    const w = await actionWorld(azurite.connectionString(), folder.databasesDir(), { agentPools: agentPools() });
    expect(await agentPools().reachable()).toBe(true);
    const item = await w.approve({
      action_type: "scale_node_pool",
      target: "node_pool/blast",
      params: { node_count: 4 },
    });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: {
        mode: "enforce",
        executed: true,
        pool: "blast",
        node_count: 4,
        previous_count: 2,
        provisioning_state: "Succeeded",
      },
    });
    expect(arm.pools.blast.count).toBe(4);
    const puts = arm.requests.filter((r) => r.method === "PUT");
    expect(puts).toHaveLength(1);
    // The pool as read, with the new count: its other properties are sent back unchanged.
    expect(puts[0]?.body).toMatchObject({ properties: { count: 4, vmSize: "Standard_E8s_v5", mode: "User" } });
    expect(arm.requests.filter((r) => r.path.includes("/operations/")).length).toBeGreaterThanOrEqual(2);
    await w.executor.execute(
      { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 4 } },
      context(item.approval_id),
    );
    expect(arm.requests.filter((r) => r.method === "PUT")).toHaveLength(1);
  });

  it("refuses a count outside the pool's bounds or a pool the autoscaler now drives; shadow sends no PUT; without ARM it is not configured", async () => {
    arm.pools.blast = {
      count: 2,
      vmSize: "Standard_E8s_v5",
      mode: "User",
      enableAutoScaling: false,
      provisioningState: "Succeeded",
    };
    arm.requests.length = 0;
    const w = await actionWorld(azurite.connectionString(), folder.databasesDir(), { agentPools: agentPools() });
    await expect(
      w.executor.execute(
        { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 9 } },
        context("k-high"),
      ),
    ).rejects.toBeInstanceOf(ActionParametersError);
    // Replayed, the recorded refusal keeps its kind.
    await expect(
      w.executor.execute(
        { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 9 } },
        context("k-high"),
      ),
    ).rejects.toBeInstanceOf(ActionParametersError);
    await expect(
      w.executor.execute(
        { action_type: "scale_node_pool", target: "node_pool/other", params: { node_count: 2 } },
        context("k-pool"),
      ),
    ).rejects.toThrow(/no node-count bounds/);
    arm.pools.blast.enableAutoScaling = true;
    await expect(
      w.executor.execute(
        { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 3 } },
        context("k-auto"),
      ),
    ).rejects.toMatchObject({ name: "ActionStateChangedError", observed: { enable_auto_scaling: true } });
    expect(arm.requests.filter((r) => r.method === "PUT")).toEqual([]);
    expect((await w.executions()).map((e) => e.outcome)).toEqual(["denied", "denied", "denied"]);

    arm.pools.blast.enableAutoScaling = false;
    const shadow = await actionWorld(azurite.connectionString(), folder.databasesDir(), {
      modes: {},
      agentPools: agentPools(),
    });
    const item = await shadow.approve({
      action_type: "scale_node_pool",
      target: "node_pool/blast",
      params: { node_count: 3 },
    });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "shadow", executed: false, would: { pool: "blast", node_count: 3, previous_count: 2 } },
    });
    expect(arm.requests.filter((r) => r.method === "PUT")).toEqual([]);

    const local = await actionWorld(azurite.connectionString(), folder.databasesDir());
    await expect(
      local.executor.execute(
        { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 3 } },
        context("k"),
      ),
    ).rejects.toThrow(/SVC_AKS_RESOURCE_GROUP/);
  });
});
