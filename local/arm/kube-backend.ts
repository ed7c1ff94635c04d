import { readFileSync } from "node:fs";
import { VM_SIZES } from "../../shared/cluster/vm-sizes.js";
import type { LocalCluster, LocalNodeSpec } from "../kube/cluster.js";
import type { ClusterBackend, PoolShape } from "./providers/container-service.js";

const GIB = 1024 ** 3;
const TAINT = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|NoExecute|PreferNoSchedule)$/;

/** What a node of a VM size the table does not know offers (a small general-purpose size). */
const UNKNOWN_SIZE = { memoryGiB: 8, vcpus: 2 };

/**
 * The nodes an AKS pool has, as the local Kubernetes API shows them: AKS's node names
 * (`aks-<pool>-<n>-vmss00000<i>`), its `kubernetes.azure.com/*` labels, the pool's own labels and
 * taints, and the VM size's memory and vCPUs (so the scheduler and the memory pre-flight see the
 * size the researcher chose).
 */
export function poolNodes(clusterName: string, pools: readonly PoolShape[]): LocalNodeSpec[] {
  return pools.flatMap((pool, p) => {
    const size = VM_SIZES[pool.vmSize] ?? UNKNOWN_SIZE;
    const taints = pool.taints.flatMap((text) => {
      const m = TAINT.exec(text);
      return m ? [{ key: m[1] ?? "", ...(m[2] ? { value: m[2] } : {}), effect: m[3] as "NoSchedule" }] : [];
    });
    return Array.from({ length: pool.count }, (_, i) => ({
      name: `aks-${pool.name}-${String(10_000_000 + p).slice(1)}-vmss${String(i).padStart(6, "0")}`,
      memoryBytes: size.memoryGiB * GIB,
      cpu: size.vcpus,
      labels: {
        "kubernetes.azure.com/agentpool": pool.name,
        "kubernetes.azure.com/mode": pool.mode.toLowerCase(),
        "kubernetes.azure.com/cluster": clusterName,
        "node.kubernetes.io/instance-type": pool.vmSize,
        agentpool: pool.name,
        ...pool.labels,
      },
      taints,
    }));
  });
}

/**
 * The local stack's managed clusters, realised on its one local Kubernetes API: a cluster's pools
 * become that API's nodes (created, resized, stopped, deleted with the cluster), and
 * `listClusterUserCredential` answers that API's kubeconfig — so the job API deploy that follows a
 * provision targets the cluster the provision made.
 */
export function kubeClusterBackend(cluster: Pick<LocalCluster, "syncNodes" | "kubeconfigPath">): ClusterBackend {
  const nameOf = (clusterId: string) => clusterId.split("/").pop() ?? clusterId;
  const owner = (clusterId: string) => `aks.${nameOf(clusterId).toLowerCase()}`;
  return {
    applyPools(clusterId, pools) {
      cluster.syncNodes(owner(clusterId), poolNodes(nameOf(clusterId), pools));
    },
    setRunning(clusterId, running, pools) {
      cluster.syncNodes(owner(clusterId), running ? poolNodes(nameOf(clusterId), pools) : []);
    },
    kubeconfig: () => readFileSync(cluster.kubeconfigPath, "utf8"),
  };
}
