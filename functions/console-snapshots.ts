/**
 * The snapshot producers of this deployment, composed from its settings: what observes each of the
 * six readiness axes (AKS through ARM when `SVC_AKS_CLUSTER_ID` is set, a Kubernetes API when
 * `SVC_KUBECONFIG` is, the job API, the database catalog, the managed identity, table storage) and
 * the T2 recovery summary over the attempt log. Part of the console's chunk (`console-parts.ts`).
 */

import type { ConsoleConfig } from "../shared/console/console-config.js";
import { lazyDefaultCredential } from "../shared/console/providers/azure-credential.js";
import type { AttemptLog } from "../shared/ops/snapshots/attempt-log.js";
import type { ReadinessProbes } from "../shared/ops/snapshots/detection-readiness.js";
import {
  aksClusterProbe,
  aksClusterReader,
  aksNodePoolProbe,
  databasesProbe,
  identityProbe,
  jobApiProbe,
  kubeClusterProbe,
  kubeNodesProbe,
  lazyKubeConfig,
  parseAksClusterId,
  storageProbe,
} from "../shared/ops/snapshots/readiness-probes.js";
import { detectionReadinessSource, type SnapshotSource, t2RecoverySource } from "../shared/ops/snapshots/snapshot-producer.js";
import type { TableSource } from "../shared/storage/table-source.js";

export interface DeploymentSnapshotOptions {
  settings: ConsoleConfig["snapshots"];
  storage: TableSource;
  /** True when storage is reached with the managed identity (its role assignments are then observable). */
  identityStorage: boolean;
  jobApiUrl: string | undefined;
  databases: () => Promise<{ name: string; warm_state: string }[]>;
  attempts: AttemptLog;
}

/** The readiness probes this deployment can run; an axis nothing here observes is left out (a coverage gap). */
export function deploymentReadinessProbes(o: DeploymentSnapshotOptions): ReadinessProbes {
  const cluster = o.settings.aksClusterId ? parseAksClusterId(o.settings.aksClusterId) : undefined;
  const readAks = cluster ? aksClusterReader({ cluster, credential: lazyDefaultCredential() }) : undefined;
  const kube = o.settings.kubeconfig ? lazyKubeConfig(o.settings.kubeconfig) : undefined;
  const storage = storageProbe(o.storage);
  const roleDependent = [...(readAks ? [readAks] : []), ...(o.identityStorage ? [storage] : [])];
  return {
    ...(readAks ? { cluster: aksClusterProbe(readAks) } : kube ? { cluster: kubeClusterProbe(kube) } : {}),
    // The Kubernetes API sees node readiness itself; without it, the AKS agent pool's state stands in.
    ...(kube ? { nodes: kubeNodesProbe(kube) } : readAks ? { nodes: aksNodePoolProbe(readAks, o.settings.aksNodePool) } : {}),
    ...(o.jobApiUrl ? { job_api: jobApiProbe(o.jobApiUrl) } : {}),
    databases: databasesProbe(o.databases),
    ...(roleDependent.length > 0 ? { identity: identityProbe(roleDependent) } : {}),
    storage,
  };
}

/** Every snapshot source of this deployment, in the order the producer records them. */
export function deploymentSnapshotSources(o: DeploymentSnapshotOptions): SnapshotSource[] {
  return [detectionReadinessSource(deploymentReadinessProbes(o)), t2RecoverySource(o.attempts)];
}
