import type { AgentPool, ContainerServiceClient, ManagedCluster } from "@azure/arm-containerservice";
import { type ArmConnection, lazyClient, PUBLIC_ARM_ENDPOINT } from "./arm-connection.js";

/** The BLAST pool's name, label and taint (as the local cluster's `BLAST_POOL`). */
export const BLAST_POOL_NAME = "blast";
export const SYSTEM_POOL_NAME = "system";
const BLAST_POOL_LABEL = { key: "blastplane.io/pool", value: "blast" };

/** What the provisioning orchestration works on (its input, snake_case as the task hub stores it). */
export interface ClusterTarget {
  subscription_id: string;
  resource_group: string;
  location: string;
  cluster_name: string;
  /** The BLAST pool: VM size and node count (the workspace's `node_size`, `node_count`). */
  blast_vm_size: string;
  blast_node_count: number;
  system_vm_size: string;
  /** The user-assigned control-plane identity (resource id); without it the cluster has a system-assigned one. */
  control_plane_identity_id?: string;
  /** The user-assigned kubelet identity (resource id, client id, object id); needs a control-plane identity. */
  kubelet_identity?: { resource_id: string; client_id: string; object_id: string };
}

/** What one step asks the orchestrator to do after it started (or found) a change. */
export type StepStart =
  /** Nothing to change: the resource is as wanted. */
  | { kind: "done" }
  /** ARM accepted a change: poll `poll_url` (Azure-AsyncOperation, else Location) after `retry_after_seconds`. */
  | { kind: "started"; poll_url: string; retry_after_seconds: number }
  /** A change is already running (another caller, or this step before a restart): poll the resource's provisioningState. */
  | { kind: "running"; resource: "cluster" | "pool"; retry_after_seconds: number };

/** One poll's answer. */
export interface StepPoll {
  status: "InProgress" | "Succeeded" | "Failed" | "Canceled";
  retry_after_seconds: number;
  /** ARM's error, `code: message`, when the operation failed. */
  error?: string;
}

/** What the operation reports about the cluster when it is done. */
export interface ClusterSummary {
  fqdn: string | null;
  power_state: string | null;
  provisioning_state: string | null;
  oidc_issuer_url: string | null;
  kubelet_object_id: string | null;
  blast_pool: { vm_size: string | null; count: number | null } | null;
}

/** When ARM says nothing: the interval core-lro uses (ARM's own hint is usually 10–15 s for AKS). */
const DEFAULT_RETRY_AFTER_SECONDS = 10;
const RUNNING = new Set([
  "Creating",
  "Updating",
  "Scaling",
  "Deleting",
  "Starting",
  "Stopping",
  "Upgrading",
  "Migrating",
  "Canceling",
]);

/** The add-on profile key of the Azure Key Vault provider for the Secrets Store CSI driver. */
const KEY_VAULT_SECRETS_PROVIDER = "azureKeyvaultSecretsProvider";

/**
 * The managed cluster as the control plane wants it (spec §1: OIDC issuer, workload identity, Entra
 * RBAC; decision 0022: the application routing add-on with Key Vault certificates).
 */
export function desiredCluster(target: ClusterTarget, current?: ManagedCluster): ManagedCluster {
  const userAssigned = target.control_plane_identity_id;
  return {
    location: target.location,
    ...(current?.tags ? { tags: current.tags } : {}),
    identity: userAssigned
      ? { type: "UserAssigned", userAssignedIdentities: { [userAssigned]: {} } }
      : { type: "SystemAssigned" },
    dnsPrefix: current?.dnsPrefix ?? target.cluster_name.replace(/_/g, "-").slice(0, 54),
    enableRbac: true,
    disableLocalAccounts: true,
    aadProfile: { managed: true, enableAzureRbac: true },
    oidcIssuerProfile: { enabled: true },
    securityProfile: { workloadIdentity: { enabled: true } },
    // The browser terminal's ingress (decision 0022): the application routing add-on's managed
    // NGINX, and the Key Vault secrets provider it reads the TLS certificate with. Other add-ons
    // the cluster has are kept as they are.
    ingressProfile: {
      ...(current?.ingressProfile ?? {}),
      webAppRouting: { ...(current?.ingressProfile?.webAppRouting ?? {}), enabled: true },
    },
    addonProfiles: {
      ...(current?.addonProfiles ?? {}),
      [KEY_VAULT_SECRETS_PROVIDER]: { ...(current?.addonProfiles?.[KEY_VAULT_SECRETS_PROVIDER] ?? {}), enabled: true },
    },
    ...(target.kubelet_identity
      ? {
          identityProfile: {
            kubeletidentity: {
              resourceId: target.kubelet_identity.resource_id,
              clientId: target.kubelet_identity.client_id,
              objectId: target.kubelet_identity.object_id,
            },
          },
        }
      : {}),
    // The system pool only: the BLAST pool is its own step (a cluster PUT that listed it would
    // resize it too, and AKS refuses to change a pool's VM size in place).
    agentPoolProfiles: current?.agentPoolProfiles?.filter((p) => p.name === SYSTEM_POOL_NAME).length
      ? current.agentPoolProfiles.filter((p) => p.name === SYSTEM_POOL_NAME)
      : [
          {
            name: SYSTEM_POOL_NAME,
            mode: "System",
            count: 1,
            vmSize: target.system_vm_size,
            osType: "Linux",
            type: "VirtualMachineScaleSets",
          },
        ],
  };
}

/** Whether the cluster already has what {@link desiredCluster} asks for (so the step changes nothing). */
export function clusterMatches(current: ManagedCluster, target: ClusterTarget): boolean {
  return (
    current.provisioningState === "Succeeded" &&
    current.oidcIssuerProfile?.enabled === true &&
    current.securityProfile?.workloadIdentity?.enabled === true &&
    current.aadProfile?.enableAzureRbac === true &&
    current.ingressProfile?.webAppRouting?.enabled === true &&
    current.addonProfiles?.[KEY_VAULT_SECRETS_PROVIDER]?.enabled === true &&
    (current.agentPoolProfiles ?? []).some((p) => p.name === SYSTEM_POOL_NAME || p.mode === "System") &&
    (!target.kubelet_identity ||
      current.identityProfile?.kubeletidentity?.resourceId?.toLowerCase() ===
        target.kubelet_identity.resource_id.toLowerCase())
  );
}

/** The BLAST pool as wanted: a user pool, labelled and tainted so only BLAST pods land on it. */
export function desiredBlastPool(target: ClusterTarget, current?: AgentPool): AgentPool {
  return {
    ...(current ?? {}),
    mode: "User",
    count: target.blast_node_count,
    vmSize: target.blast_vm_size,
    osType: "Linux",
    type: "VirtualMachineScaleSets",
    enableAutoScaling: false,
    nodeLabels: { [BLAST_POOL_LABEL.key]: BLAST_POOL_LABEL.value },
    nodeTaints: [`${BLAST_POOL_LABEL.key}=${BLAST_POOL_LABEL.value}:NoSchedule`],
  };
}

/** A refusal a retry cannot fix (the operation names it and stops). */
export class ProvisioningRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProvisioningRefusedError";
  }
}

function retryAfterSeconds(value: string | undefined | null): number {
  if (!value) return DEFAULT_RETRY_AFTER_SECONDS;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, Math.min(600, Math.round(seconds)));
  const at = Date.parse(value);
  return Number.isNaN(at)
    ? DEFAULT_RETRY_AFTER_SECONDS
    : Math.max(0, Math.min(600, Math.ceil((at - Date.now()) / 1000)));
}

function armError(body: unknown): string | undefined {
  const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
  if (!error) return undefined;
  return `${error.code ?? "Error"}: ${error.message ?? ""}`.trim();
}

/**
 * The cluster's Resource Manager calls for provisioning, each a short activity: start (or find) a
 * change and answer where to poll; poll once; read the result. Long waits happen between these, on
 * the orchestrator's durable timers, so a host restart mid-provisioning loses nothing: the
 * orchestration resumes polling, and a start that ran again finds the running change (its
 * provisioningState) instead of sending a second PUT.
 */
export function createClusterProvisioning(connection: ArmConnection) {
  const clients = new Map<string, () => Promise<ContainerServiceClient>>();
  const client = (subscriptionId: string) => {
    let get = clients.get(subscriptionId);
    if (!get) {
      get = lazyClient(async () => {
        const { ContainerServiceClient } = await import("@azure/arm-containerservice");
        return new ContainerServiceClient(connection.credential, subscriptionId, connection.clientOptions);
      });
      clients.set(subscriptionId, get);
    }
    return get();
  };

  let httpClient: import("@azure/core-rest-pipeline").HttpClient | undefined;

  async function getCluster(target: ClusterTarget): Promise<ManagedCluster | undefined> {
    try {
      return await (await client(target.subscription_id)).managedClusters.get(
        target.resource_group,
        target.cluster_name,
      );
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) return undefined;
      throw error;
    }
  }

  async function getPool(target: ClusterTarget): Promise<AgentPool | undefined> {
    try {
      return await (await client(target.subscription_id)).agentPools.get(
        target.resource_group,
        target.cluster_name,
        BLAST_POOL_NAME,
      );
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) return undefined;
      throw error;
    }
  }

  /** Runs a begin* call and answers where ARM said to poll (the first response's headers). */
  async function started(
    begin: (onResponse: (raw: { headers: { get(name: string): string | undefined } }) => void) => Promise<unknown>,
  ): Promise<StepStart> {
    let headers: { get(name: string): string | undefined } | undefined;
    await begin((raw) => {
      headers ??= raw.headers;
    });
    const pollUrl = headers?.get("azure-asyncoperation") ?? headers?.get("location");
    if (!pollUrl) return { kind: "done" };
    return { kind: "started", poll_url: pollUrl, retry_after_seconds: retryAfterSeconds(headers?.get("retry-after")) };
  }

  return {
    /** Step `cluster`: create or update the managed cluster (system pool, OIDC, workload identity, Entra RBAC, kubelet identity). */
    async startCluster(target: ClusterTarget): Promise<StepStart> {
      const current = await getCluster(target);
      if (current && RUNNING.has(current.provisioningState ?? ""))
        return { kind: "running", resource: "cluster", retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS };
      if (current && clusterMatches(current, target)) return { kind: "done" };
      const api = (await client(target.subscription_id)).managedClusters;
      return started((onResponse) =>
        api.beginCreateOrUpdate(target.resource_group, target.cluster_name, desiredCluster(target, current), {
          onResponse,
        }),
      );
    },

    /** Step `blast_pool`: create the BLAST pool, or set its node count. */
    async startBlastPool(target: ClusterTarget): Promise<StepStart> {
      const current = await getPool(target);
      if (current && RUNNING.has(current.provisioningState ?? ""))
        return { kind: "running", resource: "pool", retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS };
      if (current?.vmSize && current.vmSize !== target.blast_vm_size)
        throw new ProvisioningRefusedError(
          `the BLAST pool runs ${current.vmSize} nodes and AKS cannot change a pool's VM size in place; delete the pool '${BLAST_POOL_NAME}' (or the cluster) to provision ${target.blast_vm_size}`,
        );
      if (current?.provisioningState === "Succeeded" && current.count === target.blast_node_count)
        return { kind: "done" };
      const api = (await client(target.subscription_id)).agentPools;
      return started((onResponse) =>
        api.beginCreateOrUpdate(
          target.resource_group,
          target.cluster_name,
          BLAST_POOL_NAME,
          desiredBlastPool(target, current),
          {
            onResponse,
          },
        ),
      );
    },

    /** Stop, start or delete the cluster (each a long-running operation). */
    async startClusterAction(target: ClusterTarget, action: "stop" | "start" | "delete"): Promise<StepStart> {
      const current = await getCluster(target);
      if (!current) {
        if (action === "delete") return { kind: "done" };
        throw new ProvisioningRefusedError(`cluster '${target.cluster_name}' does not exist; provision it first`);
      }
      if (RUNNING.has(current.provisioningState ?? ""))
        return { kind: "running", resource: "cluster", retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS };
      if (action !== "delete" && current.powerState?.code === (action === "stop" ? "Stopped" : "Running"))
        return { kind: "done" };
      const api = (await client(target.subscription_id)).managedClusters;
      return started((onResponse) => {
        const args = [target.resource_group, target.cluster_name, { onResponse }] as const;
        return action === "stop"
          ? api.beginStop(...args)
          : action === "start"
            ? api.beginStart(...args)
            : api.beginDelete(...args);
      });
    },

    /** One poll of an operation URL ARM gave (Azure-AsyncOperation status, or Location: 202 = running). */
    async pollOperation(target: ClusterTarget, pollUrl: string): Promise<StepPoll> {
      // The managed identity's token goes only to Resource Manager: a poll URL elsewhere is refused.
      const endpoint = new URL(connection.clientOptions?.endpoint ?? PUBLIC_ARM_ENDPOINT);
      if (!URL.canParse(pollUrl) || new URL(pollUrl).origin !== endpoint.origin)
        throw new ProvisioningRefusedError("Resource Manager answered a poll URL outside its own endpoint");
      const { createDefaultHttpClient, createPipelineRequest } = await import("@azure/core-rest-pipeline");
      // The client's own pipeline: its bearer-token policy (the managed identity), TLS and retry policies.
      httpClient ??= createDefaultHttpClient();
      const response = await (await client(target.subscription_id)).pipeline.sendRequest(
        httpClient,
        createPipelineRequest({ url: pollUrl, method: "GET" }),
      );
      const retry = retryAfterSeconds(response.headers.get("retry-after"));
      const body = response.bodyAsText ? (JSON.parse(response.bodyAsText) as Record<string, unknown>) : undefined;
      if (response.status === 202) return { status: "InProgress", retry_after_seconds: retry };
      if (response.status >= 400) {
        const error = armError(body) ?? `HTTP ${response.status}`;
        // A transient answer (throttling, a server error) is not the operation's outcome: poll again.
        if (response.status === 429 || response.status >= 500)
          return { status: "InProgress", retry_after_seconds: retry, error };
        return { status: "Failed", retry_after_seconds: retry, error };
      }
      const status = typeof body?.status === "string" ? body.status : "Succeeded";
      if (status === "Succeeded" || status === "Failed" || status === "Canceled")
        return { status, retry_after_seconds: retry, ...(armError(body) ? { error: armError(body) } : {}) };
      return { status: "InProgress", retry_after_seconds: retry };
    },

    /** One poll of a resource's provisioningState (a change this step did not start, or one from before a restart). */
    async pollResource(target: ClusterTarget, resource: "cluster" | "pool"): Promise<StepPoll> {
      const current = resource === "cluster" ? await getCluster(target) : await getPool(target);
      const state = current?.provisioningState ?? "Succeeded";
      if (RUNNING.has(state)) return { status: "InProgress", retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS };
      if (state === "Failed" || state === "Canceled")
        return {
          status: state,
          retry_after_seconds: 0,
          error: `${resource === "cluster" ? "the cluster" : "the BLAST pool"} is in provisioning state ${state}`,
        };
      return { status: "Succeeded", retry_after_seconds: 0 };
    },

    /** The cluster as the finished operation reports it. */
    async summary(target: ClusterTarget): Promise<ClusterSummary | null> {
      const cluster = await getCluster(target);
      if (!cluster) return null;
      const pool = await getPool(target);
      return {
        fqdn: cluster.fqdn ?? null,
        power_state: cluster.powerState?.code ?? null,
        provisioning_state: cluster.provisioningState ?? null,
        oidc_issuer_url: cluster.oidcIssuerProfile?.issuerURL ?? null,
        kubelet_object_id: cluster.identityProfile?.kubeletidentity?.objectId ?? null,
        blast_pool: pool ? { vm_size: pool.vmSize ?? null, count: pool.count ?? null } : null,
      };
    },
  };
}

export type ClusterProvisioning = ReturnType<typeof createClusterProvisioning>;
