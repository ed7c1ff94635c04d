import { randomUUID } from "node:crypto";

/** One ARM resource as the local Resource Manager keeps it (the wire shape, camelCase as ARM sends it). */
export interface StoredResource {
  id: string;
  name: string;
  type: string;
  location?: string;
  tags?: Record<string, string>;
  properties: Record<string, unknown>;
  /** Other top-level members a resource type has (`sku`, `identity`, `kind`…). */
  extra?: Record<string, unknown>;
  etag: string;
}

/**
 * The generic resource store of the local Resource Manager: resources by id, case-insensitively
 * (ARM ids are case-insensitive; the id keeps the casing of the PUT that created it), each with an
 * ETag that changes on every write.
 */
export class ResourceStore {
  readonly #byId = new Map<string, StoredResource>();

  get(id: string): StoredResource | undefined {
    return this.#byId.get(id.toLowerCase());
  }

  /** Creates or replaces the resource; a fresh ETag each time. */
  put(resource: Omit<StoredResource, "etag">): StoredResource {
    const stored: StoredResource = { ...resource, etag: `"${randomUUID()}"` };
    this.#byId.set(resource.id.toLowerCase(), stored);
    return stored;
  }

  /** Changes properties in place (a new ETag). */
  update(id: string, change: (resource: StoredResource) => void): StoredResource | undefined {
    const resource = this.get(id);
    if (!resource) return undefined;
    change(resource);
    resource.etag = `"${randomUUID()}"`;
    return resource;
  }

  delete(id: string): boolean {
    const key = id.toLowerCase();
    // Children go with their parent, as ARM deletes a cluster's agent pools with it.
    for (const other of [...this.#byId.keys()]) if (other.startsWith(`${key}/`)) this.#byId.delete(other);
    return this.#byId.delete(key);
  }

  /** Resources under `parentId` (an id prefix) of `type` (case-insensitive; "" = any), in creation order. */
  list(type: string, parentId?: string): StoredResource[] {
    const prefix = parentId ? `${parentId.toLowerCase()}/` : "";
    return [...this.#byId.entries()]
      .filter(([key, r]) => key.startsWith(prefix) && (type === "" || r.type.toLowerCase() === type.toLowerCase()))
      .map(([, r]) => r);
  }

  /** Every resource, in creation order (the state file). */
  records(): StoredResource[] {
    return [...this.#byId.values()];
  }

  /** Puts saved resources back, each with its saved ETag. */
  restore(resources: readonly StoredResource[]): void {
    for (const r of resources) this.#byId.set(r.id.toLowerCase(), r);
  }

  /** Every resource of `type` in a subscription. */
  listInSubscription(subscriptionId: string, type: string): StoredResource[] {
    return this.list(type, `/subscriptions/${subscriptionId}`);
  }
}

/** The wire JSON of a stored resource. */
export function resourceJson(resource: StoredResource): Record<string, unknown> {
  return {
    id: resource.id,
    name: resource.name,
    type: resource.type,
    ...(resource.location ? { location: resource.location } : {}),
    ...(resource.tags ? { tags: resource.tags } : {}),
    ...(resource.extra ?? {}),
    etag: resource.etag,
    properties: resource.properties,
  };
}
