import { RESOURCES } from "./resources.js";
import { field, ownedBy, timestamp } from "./objects.js";
import type { KubeObject } from "./selectors.js";
import { notFound, type ObjectStore } from "./store.js";

export type PropagationPolicy = "Background" | "Foreground" | "Orphan";

export interface DeleteOptions {
  propagationPolicy?: PropagationPolicy;
  gracePeriodSeconds?: number;
  /** The old spelling of `propagationPolicy: Orphan` (true) or `Background` (false). */
  orphanDependents?: boolean;
}

const FOREGROUND = "foregroundDeletion";

/**
 * Deletion as the API server and its garbage collector do it: pods end gracefully (the kubelet
 * stops the process, then removes the object); an owner's dependents are deleted after it
 * (Background), before it (Foreground: the owner waits with a `foregroundDeletion` finalizer), or
 * left without it (Orphan, the default for `batch/v1` Jobs as in Kubernetes); a namespace takes
 * its contents with it; a node takes its pods (a node lost).
 */
export class Deleter {
  constructor(private readonly store: ObjectStore) {
    // A dependent gone may let a foreground-deleting owner go.
    store.subscribe((event) => {
      if (event.type !== "DELETED") return;
      for (const ref of event.object.metadata.ownerReferences ?? []) {
        const resource = RESOURCES.find((r) => r.kind === ref.kind)?.plural;
        if (!resource) continue;
        setImmediate(() => this.finishForeground(resource, event.object.metadata.namespace, ref.name));
      }
    });
  }

  /** Deletes one object; returns it (with `deletionTimestamp` when it is not gone yet) and whether it is gone. */
  delete(
    resource: string,
    namespace: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): { object: KubeObject; gone: boolean } {
    const obj = this.store.get(resource, namespace, name);
    if (!obj) throw notFound(resource, name);
    if (resource === "pods") return this.deletePod(obj, options.gracePeriodSeconds);
    if (resource === "nodes") {
      // A node lost: its pods go at once (their processes are killed by the kubelet).
      for (const pod of this.store.list("pods", undefined, (p) => field(p, "spec", "nodeName") === name))
        this.deletePod(pod, 0);
      return { object: this.store.remove("nodes", undefined, name) ?? obj, gone: true };
    }
    if (resource === "namespaces") {
      this.store.update("namespaces", undefined, name, (ns) => ({
        ...ns,
        metadata: { ...ns.metadata, deletionTimestamp: timestamp() },
        status: { phase: "Terminating" },
      }));
      for (const def of RESOURCES.filter((r) => r.namespaced)) {
        for (const item of this.store.list(def.plural, name)) {
          if (def.plural === "pods") this.deletePod(item, 0);
          else this.store.remove(def.plural, name, item.metadata.name);
        }
      }
      return { object: this.store.remove("namespaces", undefined, name) ?? obj, gone: true };
    }
    const policy =
      options.propagationPolicy ??
      (options.orphanDependents === true
        ? "Orphan"
        : options.orphanDependents === false
          ? "Background"
          : resource === "jobs"
            ? "Orphan"
            : "Background");
    const dependents = this.dependentsOf(obj);
    if (policy === "Orphan") {
      for (const d of dependents) {
        this.store.update(d.resource, d.object.metadata.namespace, d.object.metadata.name, (o) => {
          const refs = (o.metadata.ownerReferences ?? []).filter((r) => r.uid !== obj.metadata.uid);
          const metadata: KubeObject["metadata"] = { ...o.metadata, ownerReferences: refs };
          if (refs.length === 0) metadata.ownerReferences = undefined;
          return { ...o, metadata };
        });
      }
      return { object: this.store.remove(resource, namespace, name) ?? obj, gone: true };
    }
    if (policy === "Foreground" && dependents.length > 0) {
      const marked = this.store.update(resource, namespace, name, (o) => ({
        ...o,
        metadata: {
          ...o.metadata,
          deletionTimestamp: o.metadata.deletionTimestamp ?? timestamp(),
          finalizers: [...new Set([...(o.metadata.finalizers ?? []), FOREGROUND])],
        },
      }));
      for (const d of dependents) this.deleteDependent(d);
      return { object: marked, gone: false };
    }
    const gone = this.store.remove(resource, namespace, name) ?? obj;
    for (const d of dependents) this.deleteDependent(d);
    return { object: gone, gone: true };
  }

  private deleteDependent(d: { resource: string; object: KubeObject }): void {
    try {
      this.delete(d.resource, d.object.metadata.namespace, d.object.metadata.name, { propagationPolicy: "Background" });
    } catch {
      // Already gone.
    }
  }

  private deletePod(pod: KubeObject, gracePeriodSeconds: number | undefined): { object: KubeObject; gone: boolean } {
    const grace = gracePeriodSeconds ?? Number(field(pod, "spec", "terminationGracePeriodSeconds") ?? 30);
    const phase = field(pod, "status", "phase");
    const running = field(pod, "spec", "nodeName") !== undefined && phase !== "Succeeded" && phase !== "Failed";
    if (!running || grace <= 0) {
      return { object: this.store.remove("pods", pod.metadata.namespace, pod.metadata.name) ?? pod, gone: true };
    }
    // The kubelet sees the timestamp, stops the container within the grace period, then removes the pod.
    const marked = this.store.update("pods", pod.metadata.namespace, pod.metadata.name, (p) =>
      p.metadata.deletionTimestamp
        ? undefined
        : {
            ...p,
            metadata: {
              ...p.metadata,
              deletionTimestamp: timestamp(Date.now() + grace * 1000),
              deletionGracePeriodSeconds: grace,
            },
          },
    );
    return { object: marked, gone: false };
  }

  private dependentsOf(owner: KubeObject): { resource: string; object: KubeObject }[] {
    const out: { resource: string; object: KubeObject }[] = [];
    for (const def of RESOURCES) {
      if (def.plural === "events") continue;
      for (const o of this.store.list(def.plural, def.namespaced ? owner.metadata.namespace : undefined, (x) =>
        ownedBy(x, owner.metadata.uid),
      ))
        out.push({ resource: def.plural, object: o });
    }
    return out;
  }

  private finishForeground(resource: string, namespace: string | undefined, name: string): void {
    const owner = this.store.get(resource, namespace, name);
    if (!owner?.metadata.finalizers?.includes(FOREGROUND)) return;
    if (this.dependentsOf(owner).length > 0) return;
    this.store.remove(resource, namespace, name);
  }
}
