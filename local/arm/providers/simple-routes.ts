import { ArmError, type ArmRoute } from "../server.js";
import { type ResourceStore, resourceJson } from "../resource-store.js";

/**
 * The read routes every tracked resource type has: list in the subscription, list in a resource
 * group, get one (`{namespace}/{collection}`, e.g. `Microsoft.Storage` / `storageAccounts`).
 */
export function readRoutes(store: ResourceStore, namespace: string, collection: string): ArmRoute[] {
  const type = `${namespace}/${collection}`;
  const read = `${type}/read`;
  return [
    {
      method: "GET",
      pattern: `/subscriptions/{subscriptionId}/providers/${namespace}/${collection}`,
      action: read,
      scope: (req) => `/subscriptions/${req.params.subscriptionId}`,
      handle: (req, ctx) =>
        ctx.page(req, store.listInSubscription(req.params.subscriptionId ?? "", type).map(resourceJson)),
    },
    {
      method: "GET",
      pattern: `/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/${namespace}/${collection}`,
      action: read,
      handle: (req, ctx) => {
        const group = `/subscriptions/${req.params.subscriptionId}/resourceGroups/${req.params.resourceGroupName}`;
        if (!store.get(group))
          throw new ArmError(
            404,
            "ResourceGroupNotFound",
            `Resource group '${req.params.resourceGroupName}' could not be found.`,
          );
        return ctx.page(req, store.list(type, group).map(resourceJson));
      },
    },
    {
      method: "GET",
      pattern: `/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/${namespace}/${collection}/{name}`,
      action: read,
      handle: (req, ctx) => {
        const found = store.get(req.path);
        if (!found) throw ctx.notFound("resource", req.path);
        return { status: 200, body: resourceJson(found), headers: { ETag: found.etag } };
      },
    },
  ];
}

/** Adds a resource of `namespace/collection` named `name` to a resource group (tests and the local stack's seed). */
export function seedResource(
  store: ResourceStore,
  at: { subscriptionId: string; resourceGroup: string; location: string },
  namespace: string,
  collection: string,
  name: string,
  properties: Record<string, unknown> = {},
  extra?: Record<string, unknown>,
) {
  return store.put({
    id: `/subscriptions/${at.subscriptionId}/resourceGroups/${at.resourceGroup}/providers/${namespace}/${collection}/${name}`,
    name,
    type: `${namespace}/${collection}`,
    location: at.location,
    properties: { provisioningState: "Succeeded", ...properties },
    ...(extra ? { extra } : {}),
  });
}
