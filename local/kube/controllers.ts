import { createHash, randomBytes } from "node:crypto";
import type { Deleter } from "./deletion.js";
import {
  type Any,
  type Condition,
  controllerRef,
  defaultPodSpec,
  field,
  ownedBy,
  randomSuffix,
  recordEvent,
  setCondition,
  timestamp,
} from "./objects.js";
import type { KubeObject } from "./selectors.js";
import type { ObjectStore } from "./store.js";

const TERMINAL = new Set(["Succeeded", "Failed"]);

/**
 * Runs `reconcile(key)` once per key per turn of the event loop however many changes arrive, and
 * again at a requested time (deadlines, TTLs, back-off).
 */
class WorkQueue {
  private readonly pending = new Set<string>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; dueAt: number }>();
  private scheduled = false;
  private stopped = false;

  constructor(private readonly reconcile: (key: string) => void) {}

  add(key: string): void {
    if (this.stopped) return;
    this.pending.add(key);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const keys = [...this.pending];
      this.pending.clear();
      for (const k of keys) this.reconcile(k);
    });
  }

  /**
   * Reconciles `key` again after `delayMs`, unless a wake-up already due sooner is set: one
   * reconcile can ask for several (a pod's back-off, then the Job's deadline), and the later one
   * must not push the earlier back (a lost node's replacement pod waited for the deadline).
   */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    const dueAt = Date.now() + Math.max(0, delayMs);
    const existing = this.timers.get(key);
    if (existing && existing.dueAt <= dueAt) return;
    clearTimeout(existing?.timer);
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.add(key);
      },
      Math.max(0, delayMs),
    );
    timer.unref();
    this.timers.set(key, { timer, dueAt });
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
  }
}

const nsKey = (o: KubeObject) => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;
const splitKey = (key: string) => {
  const i = key.indexOf("/");
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
};

function hasCondition(obj: KubeObject, type: string): boolean {
  return (field<Condition[]>(obj, "status", "conditions") ?? []).some((c) => c.type === type && c.status === "True");
}

export interface JobControllerOptions {
  /** First delay before a failed pod is replaced; doubles per failure (Kubernetes: 10 s, capped at 6 min). */
  podBackoffMs: number;
}

/**
 * The Job controller, for `completions: 1, parallelism: 1` Jobs (what shards are): creates the
 * pod, replaces failed ones with exponential back-off until `backoffLimit` failures, enforces
 * `activeDeadlineSeconds` (DeadlineExceeded), writes `status` and conditions as Kubernetes 1.31+
 * does (SuccessCriteriaMet/FailureTarget, then Complete/Failed once no pod is left running), and
 * deletes finished Jobs after `ttlSecondsAfterFinished`.
 */
export class JobController {
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  /** Pods already counted in a Job's succeeded/failed, by Job uid (pods may be deleted after). */
  private readonly counted = new Map<string, Set<string>>();
  /** Failures seen per Job uid and when the last one was seen (the replacement's back-off). */
  private readonly failures = new Map<string, { count: number; at: number }>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: ObjectStore,
    private readonly deleter: Deleter,
    private readonly options: JobControllerOptions,
  ) {
    this.unsubscribe = store.subscribe((event) => {
      if (event.resource === "jobs") {
        if (event.type === "DELETED") {
          this.counted.delete(String(event.object.metadata.uid));
          this.failures.delete(String(event.object.metadata.uid));
        } else this.queue.add(nsKey(event.object));
      } else if (event.resource === "pods") {
        const owner = (event.object.metadata.ownerReferences ?? []).find((r) => r.kind === "Job" && r.controller);
        if (!owner) return;
        if (event.type === "DELETED") this.countDeleted(owner.uid, event.object);
        this.queue.add(`${event.object.metadata.namespace}/${owner.name}`);
      }
    });
    for (const job of store.list("jobs")) this.queue.add(nsKey(job));
  }

  stop(): void {
    this.unsubscribe();
    this.queue.stop();
  }

  /** A pod deleted before it finished (its node lost, or deleted by hand) counts as failed. */
  private countDeleted(jobUid: string, pod: KubeObject): void {
    const seen = this.counted.get(jobUid);
    if (seen?.has(String(pod.metadata.uid))) return;
    const phase = String(field(pod, "status", "phase") ?? "");
    const job = this.store.list("jobs", pod.metadata.namespace, (j) => j.metadata.uid === jobUid)[0];
    if (!job || hasCondition(job, "Complete") || hasCondition(job, "Failed")) return;
    this.mark(jobUid, String(pod.metadata.uid));
    this.bump(job, phase === "Succeeded" ? "succeeded" : "failed");
  }

  private mark(jobUid: string, podUid: string): void {
    let seen = this.counted.get(jobUid);
    if (!seen) {
      seen = new Set();
      this.counted.set(jobUid, seen);
    }
    seen.add(podUid);
  }

  private bump(job: KubeObject, counter: "succeeded" | "failed"): void {
    this.store.update("jobs", job.metadata.namespace, job.metadata.name, (j) => ({
      ...j,
      status: { ...((j.status as Any) ?? {}), [counter]: Number(field(j, "status", counter) ?? 0) + 1 },
    }));
  }

  private reconcile(key: string): void {
    const { namespace, name } = splitKey(key);
    const job = this.store.get("jobs", namespace, name);
    if (!job) return;
    const spec = job.spec as Any;
    const uid = String(job.metadata.uid);
    const pods = this.store.list("pods", namespace, (p) => ownedBy(p, uid));
    for (const pod of pods) {
      const phase = String(field(pod, "status", "phase") ?? "");
      if (TERMINAL.has(phase) && !this.counted.get(uid)?.has(String(pod.metadata.uid))) {
        this.mark(uid, String(pod.metadata.uid));
        this.bump(job, phase === "Succeeded" ? "succeeded" : "failed");
      }
    }
    const current = this.store.get("jobs", namespace, name);
    if (!current) return;
    const status = { ...((current.status as Any) ?? {}) } as Any;
    const live = pods.filter((p) => !TERMINAL.has(String(field(p, "status", "phase") ?? "")));
    const active = live.filter((p) => !p.metadata.deletionTimestamp);
    const terminating = live.length - active.length;
    const now = Date.now();
    let conditions = (status.conditions as Condition[] | undefined) ?? [];

    if (hasCondition(current, "Complete") || hasCondition(current, "Failed")) {
      this.expireAfterTtl(current);
      return;
    }
    if (current.metadata.deletionTimestamp) return;
    status.startTime ??= timestamp(now);
    const succeeded = Number(status.succeeded ?? 0);
    const failed = Number(status.failed ?? 0);
    if (failed > (this.failures.get(uid)?.count ?? 0)) this.failures.set(uid, { count: failed, at: now });
    const backoffLimit = Number(spec.backoffLimit ?? 6);
    const deadline =
      spec.activeDeadlineSeconds === undefined
        ? undefined
        : Date.parse(String(status.startTime)) + Number(spec.activeDeadlineSeconds) * 1000;

    let failure: { reason: string; message: string } | undefined;
    const target = conditions.find((c) => c.type === "FailureTarget" && c.status === "True");
    if (target) failure = { reason: String(target.reason), message: String(target.message) };
    else if (failed > backoffLimit)
      failure = { reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit" };
    else if (deadline !== undefined && now >= deadline)
      failure = { reason: "DeadlineExceeded", message: "Job was active longer than specified deadline" };

    if (failure) {
      if (!target) {
        conditions = setCondition(conditions, { type: "FailureTarget", status: "True", ...failure });
        recordEvent(this.store, current, "Warning", failure.reason, failure.message, "job-controller");
      }
      for (const pod of active) this.deleter.delete("pods", namespace, pod.metadata.name);
      if (live.length === 0) conditions = setCondition(conditions, { type: "Failed", status: "True", ...failure });
    } else if (succeeded >= Number(spec.completions ?? 1)) {
      conditions = setCondition(conditions, {
        type: "SuccessCriteriaMet",
        status: "True",
        reason: "CompletionsReached",
        message: "Reached expected number of succeeded pods",
      });
      if (live.length === 0) {
        conditions = setCondition(conditions, {
          type: "Complete",
          status: "True",
          reason: "CompletionsReached",
          message: "Reached expected number of succeeded pods",
        });
        status.completionTime = timestamp(now);
        recordEvent(this.store, current, "Normal", "Completed", "Job completed", "job-controller");
      }
    } else if (live.length === 0 && spec.suspend !== true) {
      // Replace a failed pod after its back-off; the first starts at once.
      const lastFailure = this.failures.get(uid)?.at ?? 0;
      const wait = failed === 0 ? 0 : lastFailure + this.options.podBackoffMs * 2 ** Math.min(failed - 1, 6) - now;
      if (wait > 0) this.queue.addAfter(key, wait);
      else this.createPod(current);
    }
    status.active = active.length;
    status.terminating = terminating;
    status.ready = active.filter((p) =>
      (field<Condition[]>(p, "status", "conditions") ?? []).some((c) => c.type === "Ready" && c.status === "True"),
    ).length;
    status.uncountedTerminatedPods = {};
    status.conditions = conditions;
    this.store.update("jobs", namespace, name, (j) => ({ ...j, status: cleanStatus(status) }));
    if (deadline !== undefined && !failure) this.queue.addAfter(key, deadline - now);
  }

  private createPod(job: KubeObject): void {
    const template = field<Any>(job, "spec", "template") ?? {};
    const metadata = (template.metadata as Any) ?? {};
    const pod = this.store.create("pods", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        ...metadata,
        name: `${job.metadata.name}-${randomSuffix()}`,
        generateName: `${job.metadata.name}-`,
        namespace: job.metadata.namespace,
        labels: (metadata.labels as Record<string, string>) ?? {},
        ownerReferences: [controllerRef(job)],
      },
      spec: defaultPodSpec((template.spec as Any) ?? {}),
      status: { phase: "Pending", qosClass: "Burstable" },
    });
    recordEvent(this.store, job, "Normal", "SuccessfulCreate", `Created pod: ${pod.metadata.name}`, "job-controller");
  }

  private expireAfterTtl(job: KubeObject): void {
    const ttl = field<number>(job, "spec", "ttlSecondsAfterFinished");
    if (ttl === undefined || job.metadata.deletionTimestamp) return;
    const finished = (field<Condition[]>(job, "status", "conditions") ?? []).find(
      (c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True",
    );
    const at = Date.parse(String(finished?.lastTransitionTime ?? "")) + ttl * 1000;
    if (Date.now() >= at) {
      try {
        this.deleter.delete("jobs", job.metadata.namespace, job.metadata.name, { propagationPolicy: "Background" });
      } catch {
        // Deleted meanwhile.
      }
    } else this.queue.addAfter(nsKey(job), at - Date.now());
  }
}

/** Zero counters are left out, as Kubernetes leaves them. */
function cleanStatus(status: Any): Any {
  const out = { ...status };
  for (const k of ["failed", "succeeded"]) if (out[k] === 0) delete out[k];
  return out;
}

/**
 * The DaemonSet controller: one pod per node whose labels match the template's node selector and
 * whose taints it tolerates; `status` counts them.
 */
export class DaemonSetController {
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: ObjectStore,
    private readonly deleter: Deleter,
    private readonly fits: (podSpec: Any, node: KubeObject) => boolean,
  ) {
    this.unsubscribe = store.subscribe((event) => {
      if (event.resource === "daemonsets" && event.type !== "DELETED") this.queue.add(nsKey(event.object));
      else if (event.resource === "nodes") for (const ds of store.list("daemonsets")) this.queue.add(nsKey(ds));
      else if (event.resource === "pods") {
        const owner = (event.object.metadata.ownerReferences ?? []).find((r) => r.kind === "DaemonSet");
        if (owner) this.queue.add(`${event.object.metadata.namespace}/${owner.name}`);
      }
    });
    for (const ds of store.list("daemonsets")) this.queue.add(nsKey(ds));
  }

  stop(): void {
    this.unsubscribe();
    this.queue.stop();
  }

  private reconcile(key: string): void {
    const { namespace, name } = splitKey(key);
    const ds = this.store.get("daemonsets", namespace, name);
    if (!ds || ds.metadata.deletionTimestamp) return;
    const template = field<Any>(ds, "spec", "template") ?? {};
    const podSpec = (template.spec as Any) ?? {};
    const nodes = this.store.list("nodes").filter((n) => this.fits(podSpec, n));
    const pods = this.store.list("pods", namespace, (p) => ownedBy(p, ds.metadata.uid));
    for (const node of nodes) {
      if (pods.some((p) => field(p, "spec", "nodeName") === node.metadata.name)) continue;
      const metadata = (template.metadata as Any) ?? {};
      const pod = this.store.create("pods", {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          ...metadata,
          name: `${name}-${randomSuffix()}`,
          generateName: `${name}-`,
          namespace,
          ownerReferences: [controllerRef(ds)],
        },
        spec: { ...defaultPodSpec(podSpec), nodeName: node.metadata.name },
        status: { phase: "Pending", qosClass: "Burstable" },
      });
      recordEvent(
        this.store,
        ds,
        "Normal",
        "SuccessfulCreate",
        `Created pod: ${pod.metadata.name}`,
        "daemonset-controller",
      );
    }
    const nodeNames = new Set(nodes.map((n) => n.metadata.name));
    for (const pod of pods) {
      if (!nodeNames.has(String(field(pod, "spec", "nodeName")))) {
        try {
          this.deleter.delete("pods", namespace, pod.metadata.name);
        } catch {
          // gone
        }
      }
    }
    const current = this.store.list(
      "pods",
      namespace,
      (p) => ownedBy(p, ds.metadata.uid) && !p.metadata.deletionTimestamp,
    );
    const ready = current.filter((p) =>
      (field<Condition[]>(p, "status", "conditions") ?? []).some((c) => c.type === "Ready" && c.status === "True"),
    ).length;
    this.store.update("daemonsets", namespace, name, (d) => ({
      ...d,
      status: {
        currentNumberScheduled: current.length,
        desiredNumberScheduled: nodes.length,
        numberMisscheduled: 0,
        numberReady: ready,
        numberAvailable: ready,
        updatedNumberScheduled: current.length,
        observedGeneration: d.metadata.generation,
      },
    }));
  }
}

const isReady = (p: KubeObject) =>
  (field<Condition[]>(p, "status", "conditions") ?? []).some((c) => c.type === "Ready" && c.status === "True");

/** The pod-template-hash label of a Deployment's template (ten hex digits of its digest). */
export function templateHash(template: unknown): string {
  return createHash("sha256")
    .update(JSON.stringify(template ?? {}))
    .digest("hex")
    .slice(0, 10);
}

/**
 * The Deployment controller, without ReplicaSets (the pods are the Deployment's own, labelled with
 * their template's `pod-template-hash`): keeps `replicas` pods of the current template, replaces
 * the others per strategy (`Recreate`: all old pods gone before a new one starts; `RollingUpdate`:
 * an old pod goes once a new one is ready), and writes the status `kubectl rollout status` and the
 * deploy orchestration read: observedGeneration, replicas, updated/ready/available/unavailable
 * replicas, and the Available and Progressing conditions (ProgressDeadlineExceeded after
 * `progressDeadlineSeconds` without a complete rollout).
 */
export class DeploymentController {
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  private readonly unsubscribe: () => void;
  /** When each Deployment (uid) last made progress: a template change or a new ready pod. */
  private readonly progress = new Map<string, { hash: string; ready: number; at: number }>();

  constructor(
    private readonly store: ObjectStore,
    private readonly deleter: Deleter,
    private readonly admitPod: (namespace: string, pod: KubeObject) => KubeObject,
  ) {
    this.unsubscribe = store.subscribe((event) => {
      if (event.resource === "deployments") {
        if (event.type === "DELETED") this.progress.delete(String(event.object.metadata.uid));
        else this.queue.add(nsKey(event.object));
      } else if (event.resource === "pods") {
        const owner = (event.object.metadata.ownerReferences ?? []).find((r) => r.kind === "Deployment");
        if (owner) this.queue.add(`${event.object.metadata.namespace}/${owner.name}`);
      }
    });
    for (const d of store.list("deployments")) this.queue.add(nsKey(d));
  }

  stop(): void {
    this.unsubscribe();
    this.queue.stop();
  }

  private reconcile(key: string): void {
    const { namespace, name } = splitKey(key);
    const deployment = this.store.get("deployments", namespace, name);
    if (!deployment || deployment.metadata.deletionTimestamp) return;
    const uid = String(deployment.metadata.uid);
    const spec = (deployment.spec as Any) ?? {};
    const replicas = Number(spec.replicas ?? 1);
    const template = (spec.template as Any) ?? {};
    const hash = templateHash(template);
    const recreate = field(spec, "strategy", "type") === "Recreate";
    const owned = this.store.list("pods", namespace, (p) => ownedBy(p, uid));
    const live = owned.filter((p) => !p.metadata.deletionTimestamp);
    const isCurrent = (p: KubeObject) => p.metadata.labels?.["pod-template-hash"] === hash;
    const current = live.filter(isCurrent);
    const old = live.filter((p) => !isCurrent(p));
    const readyCurrent = current.filter(isReady).length;
    const remove = (pod: KubeObject) => {
      try {
        this.deleter.delete("pods", namespace, pod.metadata.name);
      } catch {
        // gone already
      }
    };
    if (old.length > 0) {
      // Recreate: every old pod goes, and the new ones start once none is left (terminating ones included).
      if (recreate) for (const pod of old) remove(pod);
      else for (const pod of old.slice(0, Math.max(0, old.length + readyCurrent - replicas))) remove(pod);
    }
    const oldLeft = owned.some((p) => !isCurrent(p));
    if (!(recreate && oldLeft)) {
      for (let i = current.length; i < replicas; i++) current.push(this.createPod(deployment, template, hash));
    }
    for (const pod of current.slice(replicas)) remove(pod);

    const now = Date.now();
    const seen = this.progress.get(uid);
    if (!seen || seen.hash !== hash || seen.ready !== readyCurrent)
      this.progress.set(uid, { hash, ready: readyCurrent, at: now });
    const since = this.progress.get(uid)?.at ?? now;
    const complete = readyCurrent >= replicas && old.length === 0;
    const deadlineSeconds = Number(spec.progressDeadlineSeconds ?? 600);
    const stalled = !complete && now - since >= deadlineSeconds * 1000;
    if (!complete && !stalled) this.queue.addAfter(key, since + deadlineSeconds * 1000 - now);
    const ready = live.filter(isReady).length;
    this.store.update("deployments", namespace, name, (d) => {
      let conditions = field<Condition[]>(d, "status", "conditions");
      conditions = setCondition(
        conditions,
        readyCurrent >= replicas
          ? {
              type: "Available",
              status: "True",
              reason: "MinimumReplicasAvailable",
              message: "Deployment has minimum availability.",
            }
          : {
              type: "Available",
              status: "False",
              reason: "MinimumReplicasUnavailable",
              message: "Deployment does not have minimum availability.",
            },
      );
      conditions = setCondition(
        conditions,
        complete
          ? {
              type: "Progressing",
              status: "True",
              reason: "NewReplicaSetAvailable",
              message: `Deployment "${name}" has successfully progressed.`,
            }
          : stalled
            ? {
                type: "Progressing",
                status: "False",
                reason: "ProgressDeadlineExceeded",
                message: `Deployment "${name}" has timed out progressing.`,
              }
            : {
                type: "Progressing",
                status: "True",
                reason: "ReplicaSetUpdated",
                message: `Deployment "${name}" is progressing.`,
              },
      );
      const total = live.length;
      return {
        ...d,
        status: {
          observedGeneration: d.metadata.generation,
          replicas: total,
          updatedReplicas: current.length,
          readyReplicas: ready,
          availableReplicas: ready,
          ...(total - ready > 0 ? { unavailableReplicas: total - ready } : {}),
          conditions,
        },
      };
    });
  }

  private createPod(deployment: KubeObject, template: Any, hash: string): KubeObject {
    const namespace = String(deployment.metadata.namespace);
    const metadata = (template.metadata as Any) ?? {};
    const generateName = `${deployment.metadata.name}-${hash}-`;
    const admitted = this.admitPod(namespace, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        ...metadata,
        name: "",
        generateName,
        namespace,
        labels: { ...((metadata.labels as Record<string, string>) ?? {}), "pod-template-hash": hash },
        ownerReferences: [controllerRef(deployment)],
      },
      spec: structuredClone((template.spec as Any) ?? {}),
    });
    const pod = this.store.create("pods", admitted);
    recordEvent(
      this.store,
      deployment,
      "Normal",
      "SuccessfulCreate",
      `Created pod: ${pod.metadata.name}`,
      "deployment-controller",
    );
    return pod;
  }
}

/** The type of a Secret the token controller fills with its service account's token. */
export const SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token";
const SERVICE_ACCOUNT_NAME = "kubernetes.io/service-account.name";
const SERVICE_ACCOUNT_UID = "kubernetes.io/service-account.uid";

/**
 * The token controller's part for long-lived tokens: a Secret of type
 * `kubernetes.io/service-account-token` annotated with an existing service account's name gets
 * `token`, `namespace` and `ca.crt` (and the account's uid annotation), as Kubernetes fills it —
 * infra/k8s/terminal.yaml's `blastplane-terminal-token`, which the terminal's container mounts.
 * The local API server knows one bearer token (the kubeconfig's) and no RBAC, so the token put here
 * is a random one it does not accept: a container gets its files where it expects them, not the
 * account's rights.
 */
export class ServiceAccountTokenController {
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: ObjectStore,
    private readonly caCert: string,
  ) {
    this.unsubscribe = store.subscribe((event) => {
      if (event.type === "DELETED") return;
      if (event.resource === "secrets" && field(event.object, "type") === SERVICE_ACCOUNT_TOKEN_TYPE)
        this.queue.add(nsKey(event.object));
      else if (event.resource === "serviceaccounts") {
        const { namespace, name } = event.object.metadata;
        for (const secret of store.list("secrets", namespace, (s) => tokenAccount(s) === name))
          this.queue.add(nsKey(secret));
      }
    });
    for (const secret of store.list("secrets", undefined, (s) => tokenAccount(s) !== undefined))
      this.queue.add(nsKey(secret));
  }

  stop(): void {
    this.unsubscribe();
    this.queue.stop();
  }

  private reconcile(key: string): void {
    const { namespace, name } = splitKey(key);
    const secret = this.store.get("secrets", namespace, name);
    const account = secret && tokenAccount(secret);
    if (!secret || !account || secret.metadata.deletionTimestamp) return;
    const sa = this.store.get("serviceaccounts", namespace, account);
    if (!sa || field(secret, "data", "token")) return;
    const b64 = (text: string) => Buffer.from(text).toString("base64");
    this.store.update("secrets", namespace, name, (s) => ({
      ...s,
      metadata: {
        ...s.metadata,
        annotations: { ...(s.metadata.annotations ?? {}), [SERVICE_ACCOUNT_UID]: String(sa.metadata.uid) },
      },
      data: {
        ...((s.data as Record<string, string> | undefined) ?? {}),
        token: b64(randomBytes(32).toString("base64url")),
        namespace: b64(namespace),
        "ca.crt": b64(this.caCert),
      },
    }));
  }
}

/** The service account a token Secret is for (undefined: not a token Secret). */
function tokenAccount(secret: KubeObject): string | undefined {
  if (field(secret, "type") !== SERVICE_ACCOUNT_TOKEN_TYPE) return undefined;
  const name = secret.metadata.annotations?.[SERVICE_ACCOUNT_NAME];
  return typeof name === "string" && name ? name : undefined;
}
