import { ArmError, type ArmProvider, type ArmRequest, type LocalArm } from "../server.js";
import { type ResourceStore, resourceJson, type StoredResource } from "../resource-store.js";

const SUBSCRIPTION = "Microsoft.Resources/subscriptions";
const RESOURCE_GROUP = "Microsoft.Resources/resourceGroups";

/** Adds a subscription the identity can see. */
export function seedSubscription(
  store: ResourceStore,
  s: { subscriptionId: string; displayName: string; tenantId: string },
): StoredResource {
  return store.put({
    id: `/subscriptions/${s.subscriptionId}`,
    name: s.subscriptionId,
    type: SUBSCRIPTION,
    properties: { displayName: s.displayName, state: "Enabled", tenantId: s.tenantId },
  });
}

/** Adds a resource group. */
export function seedResourceGroup(store: ResourceStore, subscriptionId: string, name: string, location = "eastus") {
  return store.put({
    id: `/subscriptions/${subscriptionId}/resourceGroups/${name}`,
    name,
    type: RESOURCE_GROUP,
    location,
    properties: { provisioningState: "Succeeded" },
  });
}

function subscriptionJson(r: StoredResource) {
  return {
    id: r.id,
    subscriptionId: r.name,
    displayName: r.properties.displayName,
    state: r.properties.state,
    tenantId: r.properties.tenantId,
    subscriptionPolicies: {
      locationPlacementId: "Public_2014-09-01",
      quotaId: "PayAsYouGo_2014-09-01",
      spendingLimit: "Off",
    },
    authorizationSource: "RoleBased",
  };
}

/** `$filter=resourceType eq 'Microsoft.KeyVault/vaults'`, the one filter the product sends. */
function typeFilter(req: ArmRequest): string | undefined {
  const filter = req.query.get("$filter");
  if (!filter) return undefined;
  const match = /^\s*resourceType\s+eq\s+'([^']+)'\s*$/i.exec(filter);
  if (!match)
    throw new ArmError(400, "InvalidFilterInQueryString", `Invalid $filter '${filter}' specified in the query string.`);
  return match[1];
}

/** Microsoft.Resources: subscriptions, resource groups, and the generic resource lists. */
export function resourcesProvider(arm: LocalArm): ArmProvider {
  const store = arm.store;
  const subscription = (id: string) => {
    const s = store.get(`/subscriptions/${id}`);
    if (!s) throw new ArmError(404, "SubscriptionNotFound", `The subscription '${id}' could not be found.`);
    return s;
  };
  const group = (subscriptionId: string, name: string) => {
    subscription(subscriptionId);
    const g = store.get(`/subscriptions/${subscriptionId}/resourceGroups/${name}`);
    if (!g) throw new ArmError(404, "ResourceGroupNotFound", `Resource group '${name}' could not be found.`);
    return g;
  };
  const genericJson = (r: StoredResource) => {
    const { properties: _properties, etag: _etag, ...rest } = resourceJson(r);
    return rest;
  };
  return {
    namespace: "Microsoft.Resources",
    routes: [
      {
        method: "GET",
        pattern: "/subscriptions",
        action: "Microsoft.Resources/subscriptions/read",
        scope: () => "/",
        handle: (req, ctx) => ctx.page(req, store.list(SUBSCRIPTION).map(subscriptionJson)),
      },
      {
        method: "GET",
        pattern: "/subscriptions/{subscriptionId}",
        action: "Microsoft.Resources/subscriptions/read",
        handle: (req) => ({ status: 200, body: subscriptionJson(subscription(req.params.subscriptionId ?? "")) }),
      },
      {
        method: "GET",
        pattern: "/subscriptions/{subscriptionId}/resourcegroups",
        action: "Microsoft.Resources/subscriptions/resourceGroups/read",
        scope: (req) => `/subscriptions/${req.params.subscriptionId}`,
        handle: (req, ctx) => {
          subscription(req.params.subscriptionId ?? "");
          return ctx.page(
            req,
            store.list(RESOURCE_GROUP, `/subscriptions/${req.params.subscriptionId}`).map(resourceJson),
          );
        },
      },
      {
        method: "GET",
        pattern: "/subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}",
        action: "Microsoft.Resources/subscriptions/resourceGroups/read",
        handle: (req) => ({
          status: 200,
          body: resourceJson(group(req.params.subscriptionId ?? "", req.params.resourceGroupName ?? "")),
        }),
      },
      {
        method: "PUT",
        pattern: "/subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}",
        action: "Microsoft.Resources/subscriptions/resourceGroups/write",
        handle: (req) => {
          subscription(req.params.subscriptionId ?? "");
          const existing = store.get(req.path);
          const location = typeof req.body.location === "string" ? req.body.location : undefined;
          if (!location)
            throw new ArmError(400, "LocationRequired", "The location property is required for this definition.");
          const r = seedResourceGroup(
            store,
            req.params.subscriptionId ?? "",
            req.params.resourceGroupName ?? "",
            location,
          );
          return { status: existing ? 200 : 201, body: resourceJson(r) };
        },
      },
      {
        method: "GET",
        pattern: "/subscriptions/{subscriptionId}/resources",
        action: "Microsoft.Resources/subscriptions/resources/read",
        scope: (req) => `/subscriptions/${req.params.subscriptionId}`,
        handle: (req, ctx) => {
          subscription(req.params.subscriptionId ?? "");
          const type = typeFilter(req);
          const all = store
            .list(type ?? "", `/subscriptions/${req.params.subscriptionId}`)
            // Top-level resources only, as ARM's resource list answers (no agent pools, no groups).
            .filter((r) => r.type !== RESOURCE_GROUP && r.type !== SUBSCRIPTION && r.type.split("/").length === 2);
          return ctx.page(req, all.map(genericJson));
        },
      },
      {
        method: "GET",
        pattern: "/subscriptions/{subscriptionId}/resourcegroups/{resourceGroupName}/resources",
        action: "Microsoft.Resources/subscriptions/resourceGroups/resources/read",
        scope: (req) => `/subscriptions/${req.params.subscriptionId}/resourceGroups/${req.params.resourceGroupName}`,
        handle: (req, ctx) => {
          const g = group(req.params.subscriptionId ?? "", req.params.resourceGroupName ?? "");
          const type = typeFilter(req);
          return ctx.page(req, store.list(type ?? "", g.id).map(genericJson));
        },
      },
    ],
  };
}
