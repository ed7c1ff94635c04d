import { CloudAuthorizationError, ROLE_PROPAGATION_NOTE } from "../auth/cloud-authorization.js";
import { type ArmConnection, lazyClient, resourceGroupOf } from "./arm-connection.js";

/** What the workspace page can offer as a choice, per kind. */
export const DISCOVERY_KINDS = [
  "subscriptions",
  "resource_groups",
  "storage_accounts",
  "registries",
  "clusters",
  "vaults",
] as const;
export type DiscoveryKind = (typeof DISCOVERY_KINDS)[number];

/** One discovered resource: enough to fill the workspace form and tell the choices apart. */
export interface DiscoveredResource {
  name: string;
  /** The ARM resource id (`/subscriptions/…`). */
  id: string;
  resource_group?: string;
  location?: string;
  /** Subscriptions: the display name; registries: the login server; clusters: power state. */
  detail?: string;
}

export interface DiscoveryPage {
  kind: DiscoveryKind;
  items: DiscoveredResource[];
  /** True when the list was cut at `limit` (the identity sees more). */
  truncated: boolean;
}

/** The RBAC action each list needs, for the refusal message. */
const LIST_ACTIONS: Record<DiscoveryKind, string> = {
  subscriptions: "Microsoft.Resources/subscriptions/read",
  resource_groups: "Microsoft.Resources/subscriptions/resourceGroups/read",
  storage_accounts: "Microsoft.Storage/storageAccounts/read",
  registries: "Microsoft.ContainerRegistry/registries/read",
  clusters: "Microsoft.ContainerService/managedClusters/read",
  vaults: "Microsoft.Resources/subscriptions/resources/read",
};

/**
 * Lists what the managed identity can see in Azure, for the workspace page to offer as choices
 * (spec §1 prerequisites row 1; ledger B-025). Every list follows ARM's `nextLink` pages through
 * the SDK's iterators and stops at `limit` items. A list ARM refuses (403) becomes a
 * {@link CloudAuthorizationError} naming the role to assign and its scope (spec §7).
 */
export function createWorkspaceDiscovery(connection: ArmConnection, options: { limit?: number } = {}) {
  const limit = options.limit ?? 500;
  const opts = connection.clientOptions ?? {};
  const subscriptions = lazyClient(async () => {
    const { SubscriptionClient } = await import("@azure/arm-resources-subscriptions");
    return new SubscriptionClient(connection.credential, opts);
  });
  const perSubscription = <T>(create: (id: string) => Promise<T>) => {
    const clients = new Map<string, () => Promise<T>>();
    return (subscriptionId: string) => {
      let client = clients.get(subscriptionId);
      if (!client) {
        client = lazyClient(() => create(subscriptionId));
        clients.set(subscriptionId, client);
      }
      return client();
    };
  };
  const resources = perSubscription(async (id) => {
    const { ResourceManagementClient } = await import("@azure/arm-resources");
    return new ResourceManagementClient(connection.credential, id, opts);
  });
  const storage = perSubscription(async (id) => {
    const { StorageManagementClient } = await import("@azure/arm-storage");
    return new StorageManagementClient(connection.credential, id, opts);
  });
  const registries = perSubscription(async (id) => {
    const { ContainerRegistryManagementClient } = await import("@azure/arm-containerregistry");
    return new ContainerRegistryManagementClient(connection.credential, id, opts);
  });
  const clusters = perSubscription(async (id) => {
    const { ContainerServiceClient } = await import("@azure/arm-containerservice");
    return new ContainerServiceClient(connection.credential, id, opts);
  });

  async function collect<T>(
    kind: DiscoveryKind,
    scope: string,
    items: () => Promise<AsyncIterable<T>>,
    map: (item: T) => DiscoveredResource,
  ): Promise<DiscoveryPage> {
    const found: DiscoveredResource[] = [];
    let truncated = false;
    try {
      for await (const item of await items()) {
        if (found.length >= limit) {
          truncated = true;
          break;
        }
        found.push(map(item));
      }
    } catch (error) {
      if ((error as { statusCode?: unknown }).statusCode === 403) throw listRefused(kind, scope, error);
      throw error;
    }
    return { kind, items: found, truncated };
  }

  return {
    /** The resources of one kind; `subscriptionId` is required for every kind but subscriptions. */
    async list(kind: DiscoveryKind, subscriptionId?: string, resourceGroup?: string): Promise<DiscoveryPage> {
      if (kind === "subscriptions")
        return collect(
          kind,
          "the tenant",
          async () => (await subscriptions()).subscriptions.list(),
          (s) => ({
            name: s.subscriptionId ?? "",
            id: s.id ?? `/subscriptions/${s.subscriptionId}`,
            ...(s.displayName ? { detail: s.displayName } : {}),
          }),
        );
      const sub = subscriptionId ?? "";
      const scope = resourceGroup ? `/subscriptions/${sub}/resourceGroups/${resourceGroup}` : `/subscriptions/${sub}`;
      const located = (r: { id?: string; name?: string; location?: string }): DiscoveredResource => ({
        name: r.name ?? "",
        id: r.id ?? "",
        resource_group: resourceGroupOf(r.id),
        ...(r.location ? { location: r.location } : {}),
      });
      switch (kind) {
        case "resource_groups":
          return collect(
            kind,
            scope,
            async () => (await resources(sub)).resourceGroups.list(),
            (g) => ({
              name: g.name ?? "",
              id: g.id ?? "",
              ...(g.location ? { location: g.location } : {}),
            }),
          );
        case "storage_accounts":
          return collect(
            kind,
            scope,
            async () => {
              const api = (await storage(sub)).storageAccounts;
              return resourceGroup ? api.listByResourceGroup(resourceGroup) : api.list();
            },
            located,
          );
        case "registries":
          return collect(
            kind,
            scope,
            async () => {
              const api = (await registries(sub)).registries;
              return resourceGroup ? api.listByResourceGroup(resourceGroup) : api.list();
            },
            (r) => ({ ...located(r), ...(r.loginServer ? { detail: r.loginServer } : {}) }),
          );
        case "clusters":
          return collect(
            kind,
            scope,
            async () => {
              const api = (await clusters(sub)).managedClusters;
              return resourceGroup ? api.listByResourceGroup(resourceGroup) : api.list();
            },
            (c) => ({ ...located(c), ...(c.powerState?.code ? { detail: c.powerState.code } : {}) }),
          );
        case "vaults":
          return collect(
            kind,
            scope,
            async () => {
              const api = (await resources(sub)).resources;
              const filter = "resourceType eq 'Microsoft.KeyVault/vaults'";
              return resourceGroup ? api.listByResourceGroup(resourceGroup, { filter }) : api.list({ filter });
            },
            located,
          );
      }
    },
  };
}

export type WorkspaceDiscovery = ReturnType<typeof createWorkspaceDiscovery>;

/** ARM refused a list: which role the identity lacks where (spec §5: Reader on the subscription lists resources). */
function listRefused(kind: DiscoveryKind, scope: string, cause: unknown): CloudAuthorizationError {
  const what = kind.replace("_", " ");
  return new CloudAuthorizationError(
    {
      code: "AuthorizationFailed",
      role: "Reader",
      scope,
      message: `AuthorizationFailed: the managed identity may not list ${what} (${LIST_ACTIONS[kind]}) in ${scope}; assign it the Reader role on ${scope} (${ROLE_PROPAGATION_NOTE})`,
    },
    { cause },
  );
}
