import { parseQuantity } from "../../shared/cluster/quantity.js";
import { type Any, type Condition, field, recordEvent, setCondition } from "./objects.js";
import type { KubeObject } from "./selectors.js";
import type { ObjectStore } from "./store.js";

interface Taint {
  key: string;
  value?: string;
  effect: string;
}

interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
}

function tolerates(tolerations: Toleration[], taint: Taint): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return t.key === undefined || t.key === "" || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

/** Why `node` cannot take a pod of `podSpec` whatever its load (selector, taints, readiness), or undefined. */
export function nodeMismatch(podSpec: Any, node: KubeObject): string | undefined {
  if (node.metadata.deletionTimestamp) return "node(s) were unschedulable";
  if (field(node, "spec", "unschedulable") === true) return "node(s) were unschedulable";
  const ready = (field<Condition[]>(node, "status", "conditions") ?? []).some(
    (c) => c.type === "Ready" && c.status === "True",
  );
  if (!ready) return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }";
  const selector = (podSpec.nodeSelector as Record<string, string> | undefined) ?? {};
  const labels = node.metadata.labels ?? {};
  if (Object.entries(selector).some(([k, v]) => labels[k] !== v))
    return "node(s) didn't match Pod's node affinity/selector";
  const tolerations = (podSpec.tolerations as Toleration[] | undefined) ?? [];
  for (const taint of field<Taint[]>(node, "spec", "taints") ?? []) {
    if ((taint.effect === "NoSchedule" || taint.effect === "NoExecute") && !tolerates(tolerations, taint)) {
      return `node(s) had untolerated taint {${taint.key}: ${taint.value ?? ""}}`;
    }
  }
  return undefined;
}

/** A pod's requests (a limit without a request counts as the request, as Kubernetes defaults it). */
export function podRequests(podSpec: Any): { memory: number; cpu: number } {
  let memory = 0;
  let cpu = 0;
  for (const c of (podSpec.containers as Any[] | undefined) ?? []) {
    const r = (field<Record<string, string>>(c, "resources", "requests") ?? {}) as Record<string, string>;
    const l = (field<Record<string, string>>(c, "resources", "limits") ?? {}) as Record<string, string>;
    memory += parseQuantity(r.memory ?? l.memory) ?? 0;
    cpu += parseQuantity(r.cpu ?? l.cpu) ?? 0;
  }
  return { memory, cpu };
}

const TERMINAL = new Set(["Succeeded", "Failed"]);

/**
 * The scheduler: binds each pending pod to the first ready node that matches its node selector,
 * whose taints it tolerates and whose allocatable memory and CPU still cover its requests next to
 * the pods already bound there. A pod that fits nowhere gets `PodScheduled=False`, reason
 * `Unschedulable`, with the scheduler's message (`0/2 nodes are available: 2 Insufficient
 * memory.`) and a FailedScheduling event; it is tried again whenever pods or nodes change.
 */
export class Scheduler {
  private scheduled = false;
  private readonly unsubscribe: () => void;

  constructor(private readonly store: ObjectStore) {
    this.unsubscribe = store.subscribe((event) => {
      if (
        event.resource === "nodes" ||
        (event.resource === "pods" &&
          (event.type !== "MODIFIED" ||
            !field(event.object, "spec", "nodeName") ||
            TERMINAL.has(String(field(event.object, "status", "phase")))))
      ) {
        this.kick();
      }
    });
    this.kick();
  }

  stop(): void {
    this.unsubscribe();
  }

  private kick(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pass();
    });
  }

  private pass(): void {
    const pending = this.store.list(
      "pods",
      undefined,
      (p) =>
        !field(p, "spec", "nodeName") &&
        !p.metadata.deletionTimestamp &&
        !TERMINAL.has(String(field(p, "status", "phase"))),
    );
    if (pending.length === 0) return;
    const nodes = this.store.list("nodes");
    const used = new Map<string, { memory: number; cpu: number; pods: number }>();
    for (const p of this.store.list(
      "pods",
      undefined,
      (x) => field(x, "spec", "nodeName") !== undefined && !TERMINAL.has(String(field(x, "status", "phase"))),
    )) {
      const node = String(field(p, "spec", "nodeName"));
      const r = podRequests((p.spec as Any) ?? {});
      const u = used.get(node) ?? { memory: 0, cpu: 0, pods: 0 };
      used.set(node, { memory: u.memory + r.memory, cpu: u.cpu + r.cpu, pods: u.pods + 1 });
    }
    for (const pod of pending) {
      const spec = (pod.spec as Any) ?? {};
      const want = podRequests(spec);
      const reasons = new Map<string, number>();
      let chosen: KubeObject | undefined;
      for (const node of nodes) {
        const mismatch = nodeMismatch(spec, node);
        const allocatable = field<Record<string, string>>(node, "status", "allocatable") ?? {};
        const u = used.get(node.metadata.name) ?? { memory: 0, cpu: 0, pods: 0 };
        const why: string[] = mismatch ? [mismatch] : [];
        if (!mismatch) {
          if (u.memory + want.memory > (parseQuantity(allocatable.memory) ?? 0)) why.push("Insufficient memory");
          if (u.cpu + want.cpu > (parseQuantity(allocatable.cpu) ?? 0)) why.push("Insufficient cpu");
          if (u.pods + 1 > (parseQuantity(allocatable.pods) ?? 110)) why.push("Too many pods");
        }
        if (why.length === 0) {
          chosen = node;
          break;
        }
        for (const w of why) reasons.set(w, (reasons.get(w) ?? 0) + 1);
      }
      if (chosen) {
        const nodeName = chosen.metadata.name;
        const u = used.get(nodeName) ?? { memory: 0, cpu: 0, pods: 0 };
        used.set(nodeName, { memory: u.memory + want.memory, cpu: u.cpu + want.cpu, pods: u.pods + 1 });
        const bound = this.store.update("pods", pod.metadata.namespace, pod.metadata.name, (p) => ({
          ...p,
          spec: { ...(p.spec as Any), nodeName },
          status: {
            ...(p.status as Any),
            conditions: setCondition(field<Condition[]>(p, "status", "conditions"), {
              type: "PodScheduled",
              status: "True",
            }),
          },
        }));
        recordEvent(
          this.store,
          bound,
          "Normal",
          "Scheduled",
          `Successfully assigned ${pod.metadata.namespace}/${pod.metadata.name} to ${nodeName}`,
          "default-scheduler",
        );
        continue;
      }
      const detail = [...reasons.entries()]
        .map(([w, n]) => `${n} ${w}`)
        .sort()
        .join(", ");
      const message = `0/${nodes.length} nodes are available${detail ? `: ${detail}` : ""}. preemption: 0/${nodes.length} nodes are available: ${nodes.length} Preemption is not helpful for scheduling.`;
      const before = (field<Condition[]>(pod, "status", "conditions") ?? []).find((c) => c.type === "PodScheduled");
      if (before?.message === message) continue;
      const updated = this.store.update("pods", pod.metadata.namespace, pod.metadata.name, (p) => ({
        ...p,
        status: {
          ...(p.status as Any),
          phase: "Pending",
          conditions: setCondition(field<Condition[]>(p, "status", "conditions"), {
            type: "PodScheduled",
            status: "False",
            reason: "Unschedulable",
            message,
          }),
        },
      }));
      recordEvent(this.store, updated, "Warning", "FailedScheduling", message, "default-scheduler");
    }
  }
}
