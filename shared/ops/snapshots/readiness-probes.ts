import type {
  ContainerServiceClient,
  ContainerServiceClientOptionalParams,
  ManagedCluster,
} from "@azure/arm-containerservice";
import type { TokenCredential } from "@azure/identity";
import type { KubeConfig } from "@kubernetes/client-node";
import { describeCloudAuthorizationError } from "../../auth/cloud-authorization.js";
import { probeJobApiReady } from "../../jobs/job-api-readiness.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import { type AxisObservation, failureDetail } from "./detection-readiness.js";
import { SNAPSHOTS_TABLE } from "./snapshot-store.js";

/**
 * The probes behind the six readiness axes. Each reads the real thing through its real client
 * (Azure SDKs and the Kubernetes client loaded on first use, so the Functions cold start does not
 * pay for them) and answers one safe line: never a URL, a key or an error text from a server.
 */

/** `job_api`: the job API's own readiness answer (`GET /v1/ready`). */
export function jobApiProbe(baseUrl: string, fetchImpl: typeof fetch = fetch): () => Promise<AxisObservation> {
  return async () => {
    try {
      await probeJobApiReady(baseUrl, fetchImpl);
      return { status: "ready", detail: "the job API answers ready" };
    } catch {
      return { status: "not_ready", detail: "the job API does not answer ready" };
    }
  };
}

/** `storage`: one read of the control plane's own table storage (the snapshot table). */
export function storageProbe(source: TableSource): () => Promise<AxisObservation> {
  const table = tableOpener(source, SNAPSHOTS_TABLE);
  return async () => {
    for await (const _ of (await table()).listEntities({ queryOptions: { select: ["PartitionKey"] } })) break;
    return { status: "ready", detail: "table storage answers" };
  };
}

/** `databases`: at least one database installed and none whose warm-up failed. */
export function databasesProbe(
  list: () => Promise<{ name: string; warm_state: string }[]>,
): () => Promise<AxisObservation> {
  return async () => {
    const databases = await list();
    if (databases.length === 0) return { status: "not_ready", detail: "no database is installed" };
    const failed = databases.filter((d) => d.warm_state === "failed").map((d) => d.name);
    const warm = databases.filter((d) => d.warm_state === "warm").length;
    if (failed.length > 0) return { status: "not_ready", detail: `warm-up failed for ${failed.join(", ")}` };
    return { status: "ready", detail: `${databases.length} installed, ${warm} warm` };
  };
}

/**
 * `identity`: the calls that need the managed identity's role assignments (reading the cluster,
 * table data) succeed. A refusal is not ready and names the missing role (cloud-authorization);
 * any other failure leaves the assignments unobserved, which is a gap, not a verdict.
 */
export function identityProbe(checks: readonly (() => Promise<unknown>)[]): () => Promise<AxisObservation> {
  return async () => {
    const outcomes = await Promise.allSettled(checks.map((check) => check()));
    for (const outcome of outcomes) {
      if (outcome.status === "rejected" && describeCloudAuthorizationError(outcome.reason))
        return { status: "not_ready", detail: failureDetail(outcome.reason) };
    }
    if (outcomes.some((o) => o.status === "rejected"))
      return { status: "gap", reason: "a call that needs the managed identity's roles did not answer" };
    return { status: "ready", detail: `the managed identity's ${checks.length} role-dependent calls succeed` };
  };
}

/** Loads a kubeconfig file with the Kubernetes client, on first use. */
export function lazyKubeConfig(kubeconfigPath: string): () => Promise<KubeConfig> {
  let config: Promise<KubeConfig> | undefined;
  return () => {
    config ??= import("@kubernetes/client-node").then(({ KubeConfig }) => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    });
    return config;
  };
}

/** `cluster` on a Kubernetes API (the local cluster): its API server answers its version. */
export function kubeClusterProbe(kubeConfig: () => Promise<KubeConfig>): () => Promise<AxisObservation> {
  return async () => {
    const { VersionApi } = await import("@kubernetes/client-node");
    const version = await (await kubeConfig()).makeApiClient(VersionApi).getCode();
    return { status: "ready", detail: `the Kubernetes API answers (version ${version.gitVersion})` };
  };
}

/** The label of the BLAST node pool's nodes, as the job API selects them (README, Running shards on Kubernetes). */
export const BLAST_POOL_SELECTOR = "blastplane.io/pool=blast";

/** `nodes` on a Kubernetes API: how many nodes of the BLAST pool report Ready (at least one needed). */
export function kubeNodesProbe(
  kubeConfig: () => Promise<KubeConfig>,
  labelSelector = BLAST_POOL_SELECTOR,
): () => Promise<AxisObservation> {
  return async () => {
    const { CoreV1Api } = await import("@kubernetes/client-node");
    const nodes = await (await kubeConfig()).makeApiClient(CoreV1Api).listNode({ labelSelector });
    const ready = nodes.items.filter(
      (n) => n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") && !n.spec?.unschedulable,
    ).length;
    const detail = `${ready} of ${nodes.items.length} BLAST pool nodes ready`;
    return { status: ready > 0 ? "ready" : "not_ready", detail };
  };
}

/** An AKS managed cluster named by its resource id. */
export interface AksClusterRef {
  subscriptionId: string;
  resourceGroup: string;
  name: string;
}

const AKS_ID =
  /^\/subscriptions\/([0-9a-f-]{36})\/resourceGroups\/([^/]+)\/providers\/Microsoft\.ContainerService\/managedClusters\/([^/]+)$/i;

/** Parses a managed cluster's resource id; undefined when it is not one. */
export function parseAksClusterId(id: string): AksClusterRef | undefined {
  const m = AKS_ID.exec(id);
  return m?.[1] && m[2] && m[3] ? { subscriptionId: m[1], resourceGroup: m[2], name: m[3] } : undefined;
}

/** Reads the managed cluster through ARM with the AKS SDK (loaded on first use). */
export function aksClusterReader(options: {
  cluster: AksClusterRef;
  credential: TokenCredential;
  clientOptions?: ContainerServiceClientOptionalParams;
}): () => Promise<ManagedCluster> {
  let client: Promise<ContainerServiceClient> | undefined;
  return async () => {
    client ??= import("@azure/arm-containerservice").then(
      ({ ContainerServiceClient }) =>
        new ContainerServiceClient(options.credential, options.cluster.subscriptionId, options.clientOptions),
    );
    return (await client).managedClusters.get(options.cluster.resourceGroup, options.cluster.name);
  };
}

/** `cluster` on AKS: provisioning succeeded and the cluster is running. */
export function aksClusterProbe(read: () => Promise<ManagedCluster>): () => Promise<AxisObservation> {
  return async () => {
    const cluster = await read();
    const provisioning = cluster.provisioningState ?? "Unknown";
    const power = cluster.powerState?.code ?? "Unknown";
    return {
      status: provisioning === "Succeeded" && power === "Running" ? "ready" : "not_ready",
      detail: `provisioning ${provisioning}, power ${power}`,
    };
  };
}

/** `nodes` on AKS: the BLAST agent pool is provisioned, running and has at least one node. */
export function aksNodePoolProbe(read: () => Promise<ManagedCluster>, pool: string): () => Promise<AxisObservation> {
  return async () => {
    const profile = (await read()).agentPoolProfiles?.find((p) => p.name === pool);
    if (!profile) return { status: "not_ready", detail: `the cluster has no agent pool ${pool}` };
    const count = profile.count ?? 0;
    const ok =
      profile.provisioningState === "Succeeded" && (profile.powerState?.code ?? "Running") === "Running" && count > 0;
    return {
      status: ok ? "ready" : "not_ready",
      detail: `agent pool ${pool}: ${count} nodes, provisioning ${profile.provisioningState ?? "Unknown"}, power ${profile.powerState?.code ?? "Unknown"}`,
    };
  };
}
