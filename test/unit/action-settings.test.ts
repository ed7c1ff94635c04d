import { describe, expect, it } from "vitest";
import { loadConsoleConfig } from "../../shared/console/console-config.js";
import { ActionParametersError } from "../../shared/ops/actions/action-executor.js";
import { type AksAgentPools, createScaleNodePoolHandler } from "../../shared/ops/actions/node-pool-actions.js";
import type { ProposedAction } from "../../shared/ops/verifier/verifier.js";
import { configRefusal } from "../support/helpers.js";

describe("the action executors' settings", () => {
  it("unset: catalog modes, no cluster targets, no pool bounds", () => {
    expect(loadConsoleConfig({}).actions).toEqual({
      modes: {},
      aks: undefined,
      nodePoolBounds: {},
      jobApiDeployment: undefined,
    });
  });

  it("read modes, the AKS cluster, pool bounds and the job API Deployment", () => {
    const config = loadConsoleConfig({
      SVC_ACTION_MODES: "retry_job=enforce, scale_node_pool=shadow",
      SVC_SUBSCRIPTION_ID: "11111111-2222-4333-8444-555555555555",
      SVC_AKS_RESOURCE_GROUP: "rg-blast",
      SVC_AKS_CLUSTER: "aks-blast",
      SVC_NODE_POOL_BOUNDS: "blast=1-10,system=1-3",
      SVC_KUBECONFIG: "/etc/blastplane/kubeconfig",
    });
    expect(config.actions).toEqual({
      modes: { retry_job: "enforce", scale_node_pool: "shadow" },
      aks: { resourceGroup: "rg-blast", cluster: "aks-blast" },
      nodePoolBounds: { blast: { min: 1, max: 10 }, system: { min: 1, max: 3 } },
      jobApiDeployment: {
        kubeconfigPath: "/etc/blastplane/kubeconfig",
        namespace: "blastplane",
        deployment: "blastplane-jobapi",
      },
    });
  });

  it("refuse a bad mode, inverted bounds, half an AKS cluster and a cluster without a subscription, naming each setting", () => {
    const error = configRefusal(() =>
      loadConsoleConfig({ SVC_ACTION_MODES: "retry_job=always", SVC_NODE_POOL_BOUNDS: "blast=5-1" }),
    );
    expect(error.message).toContain("SVC_ACTION_MODES: must look like retry_job=enforce,scale_node_pool=shadow");
    expect(error.message).toContain("SVC_NODE_POOL_BOUNDS: must look like blast=1-10");
    expect(configRefusal(() => loadConsoleConfig({ SVC_AKS_CLUSTER: "aks-blast" })).message).toContain(
      "SVC_AKS_CLUSTER: set both or neither",
    );
    expect(
      configRefusal(() => loadConsoleConfig({ SVC_AKS_RESOURCE_GROUP: "rg", SVC_AKS_CLUSTER: "aks" })).message,
    ).toContain("SVC_AKS_CLUSTER: needs SVC_SUBSCRIPTION_ID");
  });
});

describe("scale_node_pool's bounds", () => {
  it("a pool named like an Object.prototype member has no bounds: refused before the cluster is asked", async () => {
    const asked: string[] = [];
    const pools = {
      get: async (pool: string) => {
        asked.push(pool);
        throw new Error("the cluster must not be asked");
      },
    } as unknown as AksAgentPools;
    const handler = createScaleNodePoolHandler({ pools, bounds: { blast: { min: 1, max: 10 } } });
    const context = { idempotencyKey: "k", actor: { oid: "oid-otto", name: "Otto" }, requestId: "r" };
    for (const pool of ["constructor", "toString", "__proto__"]) {
      const action = {
        action_type: "scale_node_pool",
        target: `node_pool/${pool}`,
        params: { node_count: 3 },
      } as unknown as ProposedAction;
      await expect(handler.plan(action, context)).rejects.toBeInstanceOf(ActionParametersError);
    }
    expect(asked).toEqual([]);
  });
});
