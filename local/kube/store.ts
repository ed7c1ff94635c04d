import { randomUUID } from "node:crypto";
import type { KubeObject, Selector } from "./selectors.js";

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

/** One change, as the store records it for watches (a window of recent ones is kept). */
export interface StoreEvent {
  type: WatchEventType;
  resource: string;
  object: KubeObject;
  /** The object before a MODIFIED change: a selector watch turns a change out of its set into DELETED. */
  previous?: KubeObject;
  rv: number;
}

/**
 * A Kubernetes `Status` failure: the API server answers it with `code` as the HTTP status and a
 * `Status` object as the body (`reason`: NotFound, AlreadyExists, Conflict, Invalid, BadRequest…).
 */
export class KubeStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** Key of an object inside its resource: `namespace/name` (`/name` for cluster-scoped ones). */
function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

/**
 * The local cluster's etcd: objects by resource, one resource version counter for all of them,
 * and a bounded window of recent changes from which watches resume (older versions are 410 Gone).
 * It keeps everything in memory: a restarted local cluster starts empty, as a new cluster would.
 */
export class ObjectStore {
  private rv = 0;
  private readonly objects = new Map<string, Map<string, KubeObject>>();
  private history: StoreEvent[] = [];
  /** Serialized size of each event in `history` (same order) and their sum. */
  private historySizes: number[] = [];
  private historyBytes = 0;
  /** Watches may resume from this version or later; older ones were compacted away. */
  private compactedRv = 0;
  private readonly listeners = new Set<(event: StoreEvent) => void>();

  /**
   * @param historyLimit changes kept for watches to resume from, at most;
   * @param historyLimitBytes and at most this many bytes of them (serialized objects, the previous
   *   versions included): a few large objects (Secrets of megabytes) changed often would otherwise
   *   keep hundreds of megabytes alive. The newest change is always kept.
   */
  constructor(
    private readonly historyLimit = 10_000,
    private readonly historyLimitBytes = DEFAULT_HISTORY_LIMIT_BYTES,
  ) {}

  /** Bytes the change window holds now (serialized), for tests and metrics. */
  get historySizeBytes(): number {
    return this.historyBytes;
  }

  /** The newest resource version (what a list reports). */
  get resourceVersion(): string {
    return String(this.rv);
  }

  private table(resource: string): Map<string, KubeObject> {
    let t = this.objects.get(resource);
    if (!t) {
      t = new Map();
      this.objects.set(resource, t);
    }
    return t;
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.table(resource).get(keyOf(namespace, name));
    return obj ? structuredClone(obj) : undefined;
  }

  /** Objects of a resource (in one namespace, or all), filtered, oldest first. */
  list(resource: string, namespace?: string, selector: Selector = () => true): KubeObject[] {
    const out: KubeObject[] = [];
    for (const obj of this.table(resource).values()) {
      if (namespace !== undefined && obj.metadata.namespace !== namespace) continue;
      if (selector(obj)) out.push(structuredClone(obj));
    }
    return out;
  }

  create(resource: string, input: KubeObject): KubeObject {
    const t = this.table(resource);
    const key = keyOf(input.metadata.namespace, input.metadata.name);
    if (t.has(key)) {
      throw new KubeStatusError(409, "AlreadyExists", `${resource} "${input.metadata.name}" already exists`, {
        name: input.metadata.name,
        kind: resource,
      });
    }
    const obj = structuredClone(input);
    // Admission may have chosen the uid already (a Job's selector names it).
    obj.metadata.uid ??= randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    obj.metadata.generation = 1;
    delete obj.metadata.deletionTimestamp;
    obj.metadata.resourceVersion = String(++this.rv);
    t.set(key, obj);
    this.emit({ type: "ADDED", resource, object: obj, rv: this.rv });
    return structuredClone(obj);
  }

  /**
   * Replaces an object with what `change` returns (undefined leaves it). `expectedRv`, when given,
   * must be the stored version (optimistic concurrency, 409 Conflict otherwise).
   */
  update(
    resource: string,
    namespace: string | undefined,
    name: string,
    change: (current: KubeObject) => KubeObject | undefined,
    expectedRv?: string,
  ): KubeObject {
    const t = this.table(resource);
    const key = keyOf(namespace, name);
    const current = t.get(key);
    if (!current) throw notFound(resource, name);
    if (expectedRv && expectedRv !== current.metadata.resourceVersion) {
      throw new KubeStatusError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, kind: resource },
      );
    }
    const next = change(structuredClone(current));
    if (!next) return structuredClone(current);
    // Identity fields are the server's, whatever the client sent.
    next.metadata = {
      ...next.metadata,
      name: current.metadata.name,
      namespace: current.metadata.namespace,
      uid: current.metadata.uid,
      creationTimestamp: current.metadata.creationTimestamp,
      deletionTimestamp: current.metadata.deletionTimestamp ?? next.metadata.deletionTimestamp,
    };
    if (next.metadata.namespace === undefined) delete next.metadata.namespace;
    if (next.metadata.deletionTimestamp === undefined) delete next.metadata.deletionTimestamp;
    const specChanged = JSON.stringify(next.spec) !== JSON.stringify(current.spec);
    next.metadata.generation = (current.metadata.generation ?? 1) + (specChanged ? 1 : 0);
    if (
      JSON.stringify({ ...next, metadata: { ...next.metadata, resourceVersion: "" } }) ===
      JSON.stringify({ ...current, metadata: { ...current.metadata, resourceVersion: "" } })
    ) {
      return structuredClone(current);
    }
    next.metadata.resourceVersion = String(++this.rv);
    t.set(key, next);
    this.emit({ type: "MODIFIED", resource, object: next, previous: current, rv: this.rv });
    return structuredClone(next);
  }

  /** Removes an object for good (finalizers and grace periods are the API layer's business). */
  remove(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const t = this.table(resource);
    const key = keyOf(namespace, name);
    const current = t.get(key);
    if (!current) return undefined;
    t.delete(key);
    const gone = structuredClone(current);
    gone.metadata.resourceVersion = String(++this.rv);
    this.emit({ type: "DELETED", resource, object: gone, rv: this.rv });
    return structuredClone(gone);
  }

  /** Changes after version `rv`, or undefined when that version was compacted away (410 Gone). */
  eventsSince(rv: number): StoreEvent[] | undefined {
    if (rv < this.compactedRv) return undefined;
    return this.history.filter((e) => e.rv > rv);
  }

  /** Drops the change window (as etcd compaction does): watches from older versions get 410 Gone. */
  compact(): void {
    this.history = [];
    this.historySizes = [];
    this.historyBytes = 0;
    this.compactedRv = this.rv;
  }

  /** Calls `listener` on every change, synchronously; returns the unsubscribe function. */
  subscribe(listener: (event: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: StoreEvent): void {
    const size = eventBytes(event);
    this.history.push(event);
    this.historySizes.push(size);
    this.historyBytes += size;
    let drop = Math.max(0, this.history.length - this.historyLimit);
    let bytes = this.historyBytes;
    for (let i = 0; i < drop; i++) bytes -= this.historySizes[i] ?? 0;
    while (bytes > this.historyLimitBytes && drop < this.history.length - 1) bytes -= this.historySizes[drop++] ?? 0;
    if (drop > 0) {
      const dropped = this.history.splice(0, drop);
      this.historySizes.splice(0, drop);
      this.historyBytes = bytes;
      this.compactedRv = dropped.at(-1)?.rv ?? this.compactedRv;
    }
    for (const listener of this.listeners) listener(event);
  }
}

/** Default byte bound of the change window (Kubernetes bounds its watch cache by count; etcd by time). */
export const DEFAULT_HISTORY_LIMIT_BYTES = 64 * 1024 * 1024;

/** Serialized size of a change (its object and, for MODIFIED, the previous version). */
function eventBytes(event: StoreEvent): number {
  return (
    Buffer.byteLength(JSON.stringify(event.object)) +
    (event.previous ? Buffer.byteLength(JSON.stringify(event.previous)) : 0)
  );
}

export function notFound(resource: string, name: string): KubeStatusError {
  return new KubeStatusError(404, "NotFound", `${resource} "${name}" not found`, { name, kind: resource });
}
