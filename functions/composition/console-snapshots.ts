/**
 * The snapshot producers of this deployment, composed from its settings: what observes each of the
 * six readiness axes (AKS through ARM when `SVC_AKS_RESOURCE_GROUP` and `SVC_AKS_CLUSTER` are set, a Kubernetes API when
 * `SVC_KUBECONFIG` is, the job API, the database catalog, the managed identity, table storage) and
 * the T2 recovery summary over the attempt log, and the configuration baseline against the AKS
 * cluster, the storage account (Resource Graph, `SVC_SUBSCRIPTION_ID`) and the app's settings. Part of the console's chunk (`console-parts.ts`).
 */

import type { ConsoleConfig } from "../../shared/console/console-config.js";
import { lazyDefaultCredential } from "../../shared/console/providers/azure-credential.js";
import type { AttemptLog } from "../../shared/ops/snapshots/attempt-log.js";
import {
  aksBaselineObserver,
  settingsObserver,
  storageAccountNameOf,
  storageAccountObserver,
} from "../../shared/ops/snapshots/baseline-observers.js";
import type { ConfigurationBaseline } from "../../shared/ops/snapshots/configuration-baseline.js";
import type { ReadinessProbes } from "../../shared/ops/snapshots/detection-readiness.js";
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
} from "../../shared/ops/snapshots/readiness-probes.js";
import {
  configurationBaselineSource,
  detectionReadinessSource,
  type SnapshotSource,
  t2RecoverySource,
} from "../../shared/ops/snapshots/snapshot-producer.js";
import type { TableSource } from "../../shared/storage/table-source.js";

export interface DeploymentSnapshotOptions {
  settings: ConsoleConfig["snapshots"];
  storage: TableSource;
  /** The app's table endpoint when storage is reached with the managed identity (its role assignments are then observable); undefined for Azurite. */
  identityTableUrl: string | undefined;
  /** The subscription of `SVC_SUBSCRIPTION_ID`, where the storage account's configuration is read. */
  subscriptionId: string | undefined;
  apiTokenGraceSeconds: number;
  /** A read of the job API token from Key Vault (Azure only): it needs the identity's Key Vault role. */
  readVaultSecret: (() => Promise<unknown>) | undefined;
  baseline: ConfigurationBaseline;
  jobApiUrl: string | undefined;
  databases: () => Promise<{ name: string; warm_state: string }[]>;
  attempts: AttemptLog;
}

/** Every snapshot source of this deployment, in the order the producer records them. */
export function deploymentSnapshotSources(o: DeploymentSnapshotOptions): SnapshotSource[] {
  const cluster = o.settings.aksClusterId ? parseAksClusterId(o.settings.aksClusterId) : undefined;
  const readAks = cluster ? aksClusterReader({ cluster, credential: lazyDefaultCredential() }) : undefined;
  const accountName = storageAccountNameOf(o.identityTableUrl);
  return [
    detectionReadinessSource(readinessProbes(o, readAks)),
    t2RecoverySource(o.attempts),
    configurationBaselineSource(o.baseline, {
      ...(readAks ? { aks: aksBaselineObserver(readAks, o.settings.aksNodePool) } : {}),
      ...(accountName && o.subscriptionId
        ? {
            storage_account: storageAccountObserver({
              subscriptionId: o.subscriptionId,
              accountName,
              credential: lazyDefaultCredential(),
            }),
          }
        : {}),
      settings: settingsObserver({
        storage_identity_based: o.identityTableUrl !== undefined,
        api_token_grace_seconds: o.apiTokenGraceSeconds,
      }),
    }),
  ];
}

/** The readiness probes this deployment can run; an axis nothing here observes is left out (a coverage gap). */
function readinessProbes(
  o: DeploymentSnapshotOptions,
  readAks: ReturnType<typeof aksClusterReader> | undefined,
): ReadinessProbes {
  const kube = o.settings.kubeconfig ? lazyKubeConfig(o.settings.kubeconfig) : undefined;
  const storage = storageProbe(o.storage);
  const roleDependent = [
    ...(readAks ? [readAks] : []),
    ...(o.identityTableUrl ? [storage] : []),
    ...(o.readVaultSecret ? [o.readVaultSecret] : []),
  ];
  return {
    ...(readAks ? { cluster: aksClusterProbe(readAks) } : kube ? { cluster: kubeClusterProbe(kube) } : {}),
    // The Kubernetes API sees node readiness itself; without it, the AKS agent pool's state stands in.
    ...(kube
      ? { nodes: kubeNodesProbe(kube) }
      : readAks
        ? { nodes: aksNodePoolProbe(readAks, o.settings.aksNodePool) }
        : {}),
    ...(o.jobApiUrl ? { job_api: jobApiProbe(o.jobApiUrl) } : {}),
    databases: databasesProbe(o.databases),
    ...(roleDependent.length > 0 ? { identity: identityProbe(roleDependent) } : {}),
    storage,
  };
}
