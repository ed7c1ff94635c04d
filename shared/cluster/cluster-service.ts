import { createHash } from "node:crypto";
import type { Caller } from "../auth/roles.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import { describeOperation, type OperationView, operationView } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { StoredWorkspace } from "../workspace/workspace.js";
import type { ClusterAction, ClusterOperationInput } from "./cluster-operation.js";
import type { ClusterSummary, ClusterTarget } from "./cluster-provisioning.js";
import { type DatabaseMemoryNeed, nodeSizeFit, requireNodeSizeFits, VM_SIZES } from "./vm-sizes.js";

export interface ClusterServiceDependencies {
  workspace: () => Promise<StoredWorkspace>;
  orchestrations: OrchestrationClient;
  audit: Pick<AuditLog, "record">;
  logger: Logger;
  /** The prepared databases' memory needs (the BLAST pool must hold the largest). */
  databases: () => Promise<DatabaseMemoryNeed[]>;
  systemVmSize: string;
  /** The cluster as Resource Manager has it now (null: there is none); absent: no read (status says so). */
  summary?: (target: ClusterTarget) => Promise<ClusterSummary | null>;
  controlPlaneIdentityId?: string;
  workloadPrincipalId?: string;
  vault?: string;
}

const POLL_AFTER_SECONDS = 10;

/** One node pool a provision asks for. */
export interface PoolPlan {
  name: "system" | "blast";
  vm_size: string;
  node_count: number;
  /** The size's memory and vCPUs when the size table knows it. */
  memory_gib: number | null;
  vcpus: number | null;
}

/** `GET /api/aks/cluster`: what a provision would ask for, the cluster as it is, and its running operation. */
export interface ClusterStatusView {
  cluster_name: string;
  plan: {
    pools: PoolPlan[];
    /** The largest prepared database and what the BLAST nodes leave to pods (the memory rule). */
    largest_database: { name: string; bytes_to_cache: number } | null;
    usable_bytes_per_node: number | null;
    fits: boolean;
    /** Why the BLAST pool is too small, with the remedies (a provision would be refused with it). */
    detail?: string;
  };
  /** The cluster as Resource Manager reports it; null when it does not exist (or could not be read). */
  cluster: ClusterSummary | null;
  /** Why the cluster could not be read, in a sentence (Resource Manager unreachable or refusing). */
  cluster_error?: string;
  /** The cluster's latest operation (running or finished), null when it never had one. */
  operation: OperationView | null;
}

/**
 * The operation (orchestration instance) id of a cluster's operations: derived from the cluster's
 * resource id (case-insensitive, as ARM ids are), so the durable host itself refuses a second
 * orchestration for a cluster while one is pending or running — two requests that both found none
 * running cannot both start one. A finished operation's id is reused by the next one.
 */
export function clusterOperationId(
  target: Pick<ClusterTarget, "subscription_id" | "resource_group" | "cluster_name">,
): string {
  const id = `/subscriptions/${target.subscription_id}/resourceGroups/${target.resource_group}/providers/Microsoft.ContainerService/managedClusters/${target.cluster_name}`;
  return `op-${createHash("sha256").update(id.toLowerCase()).digest("hex").slice(0, 32)}`;
}

/**
 * Cluster operations from the dashboard (spec §1 items 1 and 3; ledger B-003, B-011, B-157): each
 * starts the cluster orchestration and answers at once with the operation to poll. One cluster
 * operation runs at a time: a second request while one runs answers the running operation, also
 * when both arrive together (the instance id is the cluster's, {@link clusterOperationId}).
 */
export function createClusterService(deps: ClusterServiceDependencies) {
  async function running(): Promise<OperationView | undefined> {
    for await (const instance of deps.orchestrations.listInstances({ runtimeStatus: ["Pending", "Running"] })) {
      if (instance.name !== Orchestrations.provisionCluster) continue;
      const view = await describeOperation(deps.orchestrations, instance.instanceId, {
        pollAfterSeconds: POLL_AFTER_SECONDS,
      });
      if (view) return view;
    }
    return undefined;
  }

  function targetOf(workspace: StoredWorkspace["workspace"], nodeCount?: number): ClusterTarget {
    return {
      subscription_id: workspace.subscription_id,
      resource_group: workspace.resource_group,
      location: workspace.location,
      cluster_name: workspace.cluster_name,
      blast_vm_size: workspace.node_size,
      blast_node_count: nodeCount ?? workspace.node_count,
      system_vm_size: deps.systemVmSize,
      ...(deps.controlPlaneIdentityId ? { control_plane_identity_id: deps.controlPlaneIdentityId } : {}),
    };
  }

  async function start(
    caller: Caller,
    action: ClusterAction,
    options: { requestId: string; nodeCount?: number },
  ): Promise<OperationView> {
    const current = await running();
    if (current) return current;
    const { workspace } = await deps.workspace();
    const target = targetOf(workspace, options.nodeCount);
    if (action === "provision" || action === "scale") requireNodeSizeFits(target.blast_vm_size, await deps.databases());
    const input: ClusterOperationInput = {
      action,
      target,
      ...(action === "provision"
        ? {
            roles: {
              registry: workspace.registry,
              storage_account: workspace.storage_account,
              ...(deps.vault ? { vault: deps.vault } : {}),
              ...(deps.workloadPrincipalId ? { workload_principal_id: deps.workloadPrincipalId } : {}),
              user_object_id: caller.oid,
            },
          }
        : {}),
    };
    const operationId = clusterOperationId(target);
    try {
      await deps.orchestrations.startNew(Orchestrations.provisionCluster, { instanceId: operationId, input });
    } catch (error) {
      // Another request started this cluster's operation since `running()` looked: answer that one.
      const other = await describeOperation(deps.orchestrations, operationId, { pollAfterSeconds: POLL_AFTER_SECONDS });
      if (other && (other.state === "queued" || other.state === "running")) return other;
      throw error;
    }
    await deps.audit.record({
      actor: { oid: caller.oid, name: caller.name },
      action: `cluster.${action}`,
      target: `aks_cluster/${target.cluster_name}`,
      outcome: "succeeded",
      request_id: options.requestId,
      details: { operation_id: operationId, ...(action === "scale" ? { node_count: target.blast_node_count } : {}) },
    });
    deps.logger.info("cluster operation started", { action, operation_id: operationId, oid: caller.oid });
    const now = new Date().toISOString();
    return operationView({
      operationId,
      operationType: `cluster.${action}`,
      state: "queued",
      createdAt: now,
      updatedAt: now,
      pollAfterSeconds: POLL_AFTER_SECONDS,
      target: { resource_type: "aks_cluster", name: target.cluster_name },
    });
  }

  const pool = (name: PoolPlan["name"], vmSize: string, count: number): PoolPlan => ({
    name,
    vm_size: vmSize,
    node_count: count,
    memory_gib: VM_SIZES[vmSize]?.memoryGiB ?? null,
    vcpus: VM_SIZES[vmSize]?.vcpus ?? null,
  });

  return {
    /**
     * The pools a provision asks for (the system pool, the BLAST pool from the workspace checked
     * against the largest prepared database's memory need), the cluster as Resource Manager has it,
     * and its latest operation (running or finished). A cluster that cannot be read is said in `cluster_error`.
     */
    async status(): Promise<ClusterStatusView> {
      const { workspace } = await deps.workspace();
      const target = targetOf(workspace);
      const fit = nodeSizeFit(target.blast_vm_size, await deps.databases());
      let cluster: ClusterSummary | null = null;
      let clusterError: string | undefined;
      if (!deps.summary) clusterError = "the cluster's state cannot be read here (no Resource Manager is configured)";
      else
        try {
          cluster = await deps.summary(target);
        } catch (error) {
          deps.logger.warn("cluster read failed", { error: error instanceof Error ? error.message : String(error) });
          const code = (error as { code?: unknown }).code;
          clusterError = `Resource Manager did not answer the cluster's state${typeof code === "string" ? ` (${code})` : ""}; try again`;
        }
      return {
        cluster_name: target.cluster_name,
        plan: {
          pools: [
            pool("system", target.system_vm_size, 1),
            pool("blast", target.blast_vm_size, target.blast_node_count),
          ],
          largest_database: fit.largest ? { name: fit.largest.name, bytes_to_cache: fit.largest.bytesToCache } : null,
          usable_bytes_per_node: fit.usableBytes,
          fits: fit.fits,
          ...(fit.message ? { detail: fit.message } : {}),
        },
        cluster,
        ...(clusterError ? { cluster_error: clusterError } : {}),
        operation:
          (await describeOperation(deps.orchestrations, clusterOperationId(target), {
            pollAfterSeconds: POLL_AFTER_SECONDS,
          })) ?? null,
      };
    },
    /** Provision (create or update) the cluster from the saved workspace. */
    provision: (caller: Caller, options: { requestId: string }) => start(caller, "provision", options),
    /** Stop, start or delete the cluster. */
    act: (caller: Caller, action: "stop" | "start" | "delete", options: { requestId: string }) =>
      start(caller, action, options),
    /** Set the BLAST pool's node count. */
    scale: (caller: Caller, nodeCount: number, options: { requestId: string }) =>
      start(caller, "scale", { ...options, nodeCount }),
  };
}

export type ClusterService = ReturnType<typeof createClusterService>;
