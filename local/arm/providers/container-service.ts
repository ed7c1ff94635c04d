import { ArmError, type ArmProvider, type ArmRequest, type LocalArm } from "../server.js";
import { resourceJson, type StoredResource } from "../resource-store.js";

const NAMESPACE = "Microsoft.ContainerService";
const CLUSTER = "Microsoft.ContainerService/ManagedClusters";
const POOL = "Microsoft.ContainerService/managedClusters/agentPools";
const CLUSTER_PATH =
  "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.ContainerService/managedClusters/{resourceName}";
/** AKS's rule for cluster names. */
const CLUSTER_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?$/;
/** AKS's rule for Linux agent pool names: lowercase, starts with a letter, at most 12 characters. */
const POOL_NAME = /^[a-z][a-z0-9]{0,11}$/;

/** The names of this provider's operation hooks. */
const HOOKS = {
  clusterPut: "containerService.clusterPut",
  poolPut: "containerService.poolPut",
  clusterDeleted: "containerService.clusterDeleted",
  power: "containerService.power",
} as const;

/** One agent pool as the backend realises it. */
export interface PoolShape {
  name: string;
  count: number;
  vmSize: string;
  mode: "System" | "User";
  /** The pool's `nodeLabels`. */
  labels: Record<string, string>;
  /** The pool's `nodeTaints` as ARM writes them (`key=value:Effect`). */
  taints: string[];
}

/**
 * Where the local stack's clusters become real: node pools of the local Kubernetes API and its
 * kubeconfig. Without one the provider keeps the resources only.
 */
export interface ClusterBackend {
  /** The cluster's pools after a successful create/update/scale (nodes appear or go). */
  applyPools(clusterId: string, pools: PoolShape[]): void;
  /** Stop removes every node; start brings the pools' nodes back. */
  setRunning(clusterId: string, running: boolean, pools: PoolShape[]): void;
  /** The kubeconfig `listClusterUserCredential` returns. */
  kubeconfig(clusterId: string): string;
}

export interface ContainerServiceOptions {
  backend?: ClusterBackend;
}

/** Microsoft.ContainerService: managed clusters, agent pools, credentials, start/stop. */
export function containerServiceProvider(options: ContainerServiceOptions = {}) {
  return (arm: LocalArm): ArmProvider => {
    const store = arm.store;
    const group = (req: ArmRequest) => {
      const id = `/subscriptions/${req.params.subscriptionId}/resourceGroups/${req.params.resourceGroupName}`;
      if (!store.get(id))
        throw new ArmError(
          404,
          "ResourceGroupNotFound",
          `Resource group '${req.params.resourceGroupName}' could not be found.`,
        );
      return id;
    };
    const clusterId = (req: ArmRequest) =>
      `${group(req)}/providers/Microsoft.ContainerService/managedClusters/${req.params.resourceName}`;
    const cluster = (req: ArmRequest) => {
      const id = clusterId(req);
      const found = store.get(id);
      if (!found)
        throw new ArmError(
          404,
          "ResourceNotFound",
          `The Resource 'Microsoft.ContainerService/managedClusters/${req.params.resourceName}' under resource group '${req.params.resourceGroupName}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`,
        );
      return found;
    };
    const pools = (c: StoredResource): StoredResource[] => store.list(POOL, c.id);
    const poolShapes = (c: StoredResource): PoolShape[] =>
      pools(c).map((p) => ({
        name: p.name,
        count: Number(p.properties.count ?? 0),
        vmSize: String(p.properties.vmSize ?? ""),
        mode: p.properties.mode === "System" ? "System" : "User",
        labels: { ...((p.properties.nodeLabels as Record<string, string> | undefined) ?? {}) },
        taints: Array.isArray(p.properties.nodeTaints) ? p.properties.nodeTaints.map(String) : [],
      }));
    const clusterJson = (c: StoredResource) => {
      const json = resourceJson(c);
      const properties = { ...c.properties };
      properties.agentPoolProfiles = pools(c).map((p) => ({ name: p.name, ...p.properties }));
      return { ...json, properties };
    };
    const validatePool = (name: string, p: Record<string, unknown>) => {
      if (!POOL_NAME.test(name))
        throw new ArmError(
          400,
          "InvalidParameter",
          `The value of parameter agentPoolProfile.name is invalid. Error details: Agent pool name '${name}' must start with a lowercase letter, have max length of 12, and only have characters a-z0-9.`,
        );
      const count = p.count;
      if (typeof count !== "number" || !Number.isInteger(count) || count < 0 || count > 1000)
        throw new ArmError(
          400,
          "InvalidParameter",
          `The value of parameter agentPoolProfile.count is invalid for pool '${name}'.`,
        );
      if (typeof p.vmSize !== "string" || p.vmSize.length === 0)
        throw new ArmError(
          400,
          "InvalidParameter",
          `The value of parameter agentPoolProfile.vmSize is invalid for pool '${name}'.`,
        );
      if (p.mode === "System" && count < 1)
        throw new ArmError(400, "InvalidParameter", `System pool '${name}' must have at least one node.`);
    };
    const putPool = (clusterResource: StoredResource, name: string, p: Record<string, unknown>) =>
      store.put({
        id: `${clusterResource.id}/agentPools/${name}`,
        name,
        type: POOL,
        properties: {
          count: p.count,
          vmSize: p.vmSize,
          mode: p.mode === "System" ? "System" : "User",
          osType: "Linux",
          type: "VirtualMachineScaleSets",
          enableAutoScaling: p.enableAutoScaling === true,
          ...(p.nodeLabels ? { nodeLabels: p.nodeLabels } : {}),
          ...(p.nodeTaints ? { nodeTaints: p.nodeTaints } : {}),
          powerState: { code: "Running" },
          provisioningState: "Succeeded",
        },
      });
    const running = (c: StoredResource) =>
      (c.properties.powerState as { code?: string } | undefined)?.code !== "Stopped";
    const realise = (c: StoredResource) => {
      const current = store.get(c.id);
      if (current && running(current)) options.backend?.applyPools(current.id, poolShapes(current));
    };
    // What succeeded operations do beyond the resource (by name: a restarted server resumes them).
    arm.hooks.set(HOOKS.clusterPut, (c, data) => {
      if (!c) return;
      for (const p of (data as Record<string, unknown>[] | undefined) ?? []) putPool(c, String(p.name), p);
      realise(c);
    });
    arm.hooks.set(HOOKS.poolPut, (_pool, data) => {
      const c = store.get(String(data));
      if (c) realise(c);
    });
    arm.hooks.set(HOOKS.clusterDeleted, (_gone, data) => options.backend?.applyPools(String(data), []));
    arm.hooks.set(HOOKS.power, (c, data) => {
      if (!c) return;
      const verb = data === "stop" ? "stop" : "start";
      store.update(c.id, (r) => {
        r.properties.powerState = { code: verb === "stop" ? "Stopped" : "Running" };
      });
      options.backend?.setRunning(c.id, verb === "start", poolShapes(c));
    });

    return {
      namespace: NAMESPACE,
      // A restarted stack's Kubernetes API starts without the clusters' nodes: give them back.
      restored() {
        for (const c of store.list(CLUSTER)) if (c.properties.provisioningState !== "Creating") realise(c);
      },
      routes: [
        {
          method: "GET",
          pattern: "/subscriptions/{subscriptionId}/providers/Microsoft.ContainerService/managedClusters",
          action: "Microsoft.ContainerService/managedClusters/read",
          scope: (req) => `/subscriptions/${req.params.subscriptionId}`,
          handle: (req, ctx) =>
            ctx.page(req, store.listInSubscription(req.params.subscriptionId ?? "", CLUSTER).map(clusterJson)),
        },
        {
          method: "GET",
          pattern:
            "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.ContainerService/managedClusters",
          action: "Microsoft.ContainerService/managedClusters/read",
          handle: (req, ctx) => ctx.page(req, store.list(CLUSTER, group(req)).map(clusterJson)),
        },
        {
          method: "GET",
          pattern: CLUSTER_PATH,
          action: "Microsoft.ContainerService/managedClusters/read",
          handle: (req) => {
            const c = cluster(req);
            return { status: 200, body: clusterJson(c), headers: { ETag: c.etag } };
          },
        },
        {
          method: "PUT",
          pattern: CLUSTER_PATH,
          action: "Microsoft.ContainerService/managedClusters/write",
          handle: (req, ctx) => {
            const name = req.params.resourceName ?? "";
            if (!CLUSTER_NAME.test(name))
              throw new ArmError(
                400,
                "InvalidParameter",
                `The value of parameter resourceName is invalid. Error details: '${name}' must start and end with a letter or digit, have max length of 63, and only have characters a-z, A-Z, 0-9, '-' and '_'.`,
              );
            const id = clusterId(req);
            const location = typeof req.body.location === "string" ? req.body.location : undefined;
            if (!location)
              throw new ArmError(400, "LocationRequired", "The location property is required for this definition.");
            const props = (req.body.properties ?? {}) as Record<string, unknown>;
            const profiles = Array.isArray(props.agentPoolProfiles)
              ? (props.agentPoolProfiles as Record<string, unknown>[])
              : [];
            const existing = store.get(id);
            if (!existing && !profiles.some((p) => p.mode === "System"))
              throw new ArmError(
                400,
                "InvalidParameter",
                "A managed cluster must have at least one System agent pool.",
              );
            for (const p of profiles) validatePool(String(p.name ?? ""), p);
            const { agentPoolProfiles: _profiles, provisioningState: _state, powerState: _power, ...rest } = props;
            const dnsPrefix = (props.dnsPrefix as string | undefined) ?? `${name}-dns`;
            const kubelet = (props.identityProfile as { kubeletidentity?: unknown } | undefined)?.kubeletidentity;
            return ctx.putWithOperation(req, {
              id,
              name,
              type: CLUSTER,
              namespace: NAMESPACE,
              location,
              ...(req.body.tags ? { tags: req.body.tags as Record<string, string> } : {}),
              extra: {
                ...(req.body.identity ? { identity: req.body.identity } : {}),
                sku: req.body.sku ?? { name: "Base", tier: "Free" },
              },
              properties: {
                kubernetesVersion: "1.33.2",
                currentKubernetesVersion: "1.33.2",
                ...rest,
                dnsPrefix,
                fqdn: `${dnsPrefix}.hcp.${location}.azmk8s.io`,
                nodeResourceGroup: `MC_${req.params.resourceGroupName}_${name}_${location}`,
                powerState: existing?.properties.powerState ?? { code: "Running" },
                ...(props.oidcIssuerProfile && (props.oidcIssuerProfile as { enabled?: boolean }).enabled
                  ? {
                      oidcIssuerProfile: {
                        enabled: true,
                        issuerURL: `https://${location}.oic.prod-aks.azure.com/${name}/`,
                      },
                    }
                  : {}),
                ...(kubelet ? { identityProfile: { kubeletidentity: kubelet } } : {}),
              },
              onSucceeded: { name: HOOKS.clusterPut, data: profiles },
            });
          },
        },
        {
          method: "DELETE",
          pattern: CLUSTER_PATH,
          action: "Microsoft.ContainerService/managedClusters/delete",
          handle: (req, ctx) => {
            const id = clusterId(req);
            return ctx.deleteWithOperation(req, id, NAMESPACE, { name: HOOKS.clusterDeleted, data: id });
          },
        },
        ...(["stop", "start"] as const).map((verb) => ({
          method: "POST" as const,
          pattern: `${CLUSTER_PATH}/${verb}`,
          action: `Microsoft.ContainerService/managedClusters/${verb}/action`,
          scope: (req: ArmRequest) => req.path.slice(0, -`/${verb}`.length),
          handle: (req: ArmRequest, ctx: Parameters<ArmProvider["routes"][number]["handle"]>[1]) => {
            const c = cluster(req);
            return ctx.actionWithOperation(req, c, NAMESPACE, { name: HOOKS.power, data: verb });
          },
        })),
        {
          method: "POST",
          pattern: `${CLUSTER_PATH}/listClusterUserCredential`,
          action: "Microsoft.ContainerService/managedClusters/listClusterUserCredential/action",
          scope: (req) => req.path.slice(0, -"/listClusterUserCredential".length),
          handle: (req) => {
            const c = cluster(req);
            const text =
              options.backend?.kubeconfig(c.id) ??
              [
                "apiVersion: v1",
                "kind: Config",
                `clusters:\n- name: ${c.name}\n  cluster:\n    server: https://${String(c.properties.fqdn)}:443`,
                `contexts:\n- name: ${c.name}\n  context:\n    cluster: ${c.name}\n    user: clusterUser_${c.name}`,
                `current-context: ${c.name}`,
                `users:\n- name: clusterUser_${c.name}\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: kubelogin`,
                "",
              ].join("\n");
            return {
              status: 200,
              body: { kubeconfigs: [{ name: "clusterUser", value: Buffer.from(text).toString("base64") }] },
            };
          },
        },
        {
          method: "GET",
          pattern: `${CLUSTER_PATH}/agentPools`,
          action: "Microsoft.ContainerService/managedClusters/agentPools/read",
          handle: (req, ctx) => ctx.page(req, pools(cluster(req)).map(resourceJson)),
        },
        {
          method: "GET",
          pattern: `${CLUSTER_PATH}/agentPools/{agentPoolName}`,
          action: "Microsoft.ContainerService/managedClusters/agentPools/read",
          handle: (req) => {
            const c = cluster(req);
            const p = store.get(`${c.id}/agentPools/${req.params.agentPoolName}`);
            if (!p) throw new ArmError(404, "NotFound", `Agent pool '${req.params.agentPoolName}' was not found.`);
            return { status: 200, body: resourceJson(p), headers: { ETag: p.etag } };
          },
        },
        {
          method: "PUT",
          pattern: `${CLUSTER_PATH}/agentPools/{agentPoolName}`,
          action: "Microsoft.ContainerService/managedClusters/agentPools/write",
          handle: (req, ctx) => {
            const c = cluster(req);
            const name = req.params.agentPoolName ?? "";
            const props = (req.body.properties ?? {}) as Record<string, unknown>;
            validatePool(name, props);
            const id = `${c.id}/agentPools/${name}`;
            const existing = store.get(id);
            return ctx.putWithOperation(req, {
              id,
              name,
              type: POOL,
              namespace: NAMESPACE,
              location: c.location ?? "eastus",
              properties: {
                ...(existing?.properties ?? {}),
                ...props,
                mode: props.mode === "System" ? "System" : "User",
                osType: "Linux",
                type: "VirtualMachineScaleSets",
                powerState: { code: "Running" },
              },
              onSucceeded: { name: HOOKS.poolPut, data: c.id },
            });
          },
        },
      ],
    };
  };
}
