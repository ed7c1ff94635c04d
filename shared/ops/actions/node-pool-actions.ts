import type {
  AgentPool,
  ContainerServiceClient,
  ContainerServiceClientOptionalParams,
} from "@azure/arm-containerservice";
import type { TokenCredential } from "@azure/identity";
import { targetId } from "./acting-caller.js";
import { ActionNotConfiguredError, ActionParametersError, ActionStateChangedError } from "./action-executor.js";
import { type ActionHandler, actionHandler } from "./action-runner.js";

/** Node-count bounds per pool name, from configuration (`SVC_NODE_POOL_BOUNDS`). */
export type NodePoolBounds = Readonly<Record<string, { readonly min: number; readonly max: number }>>;

/** The AKS cluster whose pools scale_node_pool changes, through Resource Manager. */
export interface AksClusterOptions {
  subscriptionId: string;
  resourceGroup: string;
  cluster: string;
  credential: TokenCredential;
  clientOptions?: ContainerServiceClientOptionalParams;
  /** How often the long-running update is polled when ARM gives no Retry-After. */
  pollIntervalMs?: number;
}

/** The cluster's agent pools through `@azure/arm-containerservice` (loaded on first use, not at cold start). */
export function createAksAgentPools(options: AksClusterOptions) {
  let client: Promise<ContainerServiceClient> | undefined;
  const connect = () => {
    client ??= import("@azure/arm-containerservice").then(
      ({ ContainerServiceClient }) =>
        new ContainerServiceClient(options.credential, options.subscriptionId, options.clientOptions),
    );
    return client;
  };
  const pools = async () => (await connect()).agentPools;
  return {
    /** Whether the cluster is running, as Resource Manager reports its power state (the verifier's `cluster_reachable`). */
    async reachable(): Promise<boolean> {
      const cluster = await (await connect()).managedClusters.get(options.resourceGroup, options.cluster);
      return cluster.powerState?.code === "Running";
    },
    /** The pool, or undefined when the cluster has none of that name. */
    async get(pool: string): Promise<AgentPool | undefined> {
      try {
        return await (await pools()).get(options.resourceGroup, options.cluster, pool);
      } catch (error) {
        if ((error as { statusCode?: number }).statusCode === 404) return undefined;
        throw error;
      }
    },
    /** Sets the pool's node count: the pool as read, with the new count, PUT and polled to its end. */
    async setCount(pool: string, count: number): Promise<AgentPool> {
      const api = await pools();
      const current = await api.get(options.resourceGroup, options.cluster, pool);
      return api.createOrUpdate(
        options.resourceGroup,
        options.cluster,
        pool,
        { ...current, count },
        { updateIntervalInMs: options.pollIntervalMs },
      );
    },
  };
}

export type AksAgentPools = ReturnType<typeof createAksAgentPools>;

/** What scale_node_pool will do: the count to set and the count it replaces (the rollback). */
export interface ScalePlan {
  pool: string;
  node_count: number;
  previous_count: number | null;
}

/** The settings scale_node_pool needs, named for the not-configured refusal. */
export const SCALE_NODE_POOL_SETTINGS = ["SVC_SUBSCRIPTION_ID", "SVC_AKS_RESOURCE_GROUP", "SVC_AKS_CLUSTER"] as const;

/**
 * scale_node_pool: sets a pool's node count with `agentPools.createOrUpdate` (a long-running
 * operation, polled to its end). The count must be an integer within the pool's configured bounds;
 * a pool that no longer exists, or that the autoscaler now drives, is refused.
 */
export function createScaleNodePoolHandler(deps: {
  pools: AksAgentPools | undefined;
  bounds: NodePoolBounds;
}): ActionHandler<unknown> {
  return actionHandler<ScalePlan>({
    async plan(action) {
      if (!deps.pools) throw new ActionNotConfiguredError(action.action_type, SCALE_NODE_POOL_SETTINGS);
      const pool = targetId(action.target);
      const count = action.params.node_count;
      // Own keys only: a pool named like an Object.prototype member has no bounds.
      const bounds = Object.hasOwn(deps.bounds, pool) ? deps.bounds[pool] : undefined;
      if (!bounds)
        throw new ActionParametersError(
          action.action_type,
          `no node-count bounds are configured for pool ${pool} (SVC_NODE_POOL_BOUNDS)`,
        );
      if (typeof count !== "number" || !Number.isInteger(count) || count < bounds.min || count > bounds.max)
        throw new ActionParametersError(
          action.action_type,
          `node_count must be an integer from ${bounds.min} to ${bounds.max} for pool ${pool}`,
        );
      const current = await deps.pools.get(pool);
      if (!current)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { exists: false },
          "the node pool no longer exists",
        );
      if (current.enableAutoScaling)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { enable_auto_scaling: true },
          "the pool is now scaled by the cluster autoscaler",
        );
      return { pool, node_count: count, previous_count: current.count ?? null };
    },
    async apply(plan) {
      if (!deps.pools) throw new ActionNotConfiguredError("scale_node_pool", SCALE_NODE_POOL_SETTINGS);
      const updated = await deps.pools.setCount(plan.pool, plan.node_count);
      return {
        pool: plan.pool,
        node_count: updated.count ?? plan.node_count,
        previous_count: plan.previous_count,
        provisioning_state: updated.provisioningState ?? null,
      };
    },
  });
}
