import { randomBytes, randomUUID } from "node:crypto";
import { apiVersionOf, type ResourceDef } from "./resources.js";
import type { KubeObject, OwnerReference } from "./selectors.js";
import { KubeStatusError, type ObjectStore } from "./store.js";

/** Timestamps as the API server writes them: RFC 3339, whole seconds. */
export function timestamp(at = Date.now()): string {
  return new Date(at).toISOString().replace(/\.\d+Z$/, "Z");
}

/** Five characters of [a-z0-9], as `generateName` appends. */
export function randomSuffix(): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789";
  return [...randomBytes(5)].map((b) => alphabet[b % alphabet.length]).join("");
}

export type Any = Record<string, unknown>;

export function field<T = unknown>(obj: unknown, ...path: string[]): T | undefined {
  let v: unknown = obj;
  for (const p of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Any)[p];
  }
  return v as T | undefined;
}

/** A reference from a dependent (a pod) to its controller (a Job, a DaemonSet). */
export function controllerRef(owner: KubeObject): OwnerReference {
  return {
    apiVersion: String(owner.apiVersion),
    kind: String(owner.kind),
    name: owner.metadata.name,
    uid: String(owner.metadata.uid),
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function ownedBy(obj: KubeObject, uid: string | undefined): boolean {
  return uid !== undefined && (obj.metadata.ownerReferences ?? []).some((r) => r.uid === uid);
}

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  lastProbeTime?: string | null;
}

/** Sets a condition, keeping its transition time when the status does not change. */
export function setCondition(conditions: Condition[] | undefined, next: Condition): Condition[] {
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const prev = i >= 0 ? list[i] : undefined;
  const merged: Condition = {
    ...next,
    lastTransitionTime: prev && prev.status === next.status ? prev.lastTransitionTime : timestamp(),
    lastProbeTime: null,
  };
  if (i >= 0) list[i] = merged;
  else list.push(merged);
  return list;
}

/** Records a core/v1 Event about `about` (what `kubectl describe` lists under Events). */
export function recordEvent(
  store: ObjectStore,
  about: KubeObject,
  type: "Normal" | "Warning",
  reason: string,
  message: string,
  component: string,
): void {
  const namespace = about.metadata.namespace ?? "default";
  if (!store.get("namespaces", undefined, namespace)) return;
  const now = timestamp();
  store.create("events", {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${about.metadata.name}.${randomBytes(8).toString("hex")}`, namespace },
    involvedObject: {
      apiVersion: about.apiVersion,
      kind: about.kind,
      name: about.metadata.name,
      namespace: about.metadata.namespace,
      uid: about.metadata.uid,
      resourceVersion: about.metadata.resourceVersion,
    },
    reason,
    message,
    type,
    source: { component },
    reportingComponent: component,
    reportingInstance: "",
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  });
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
/** A DNS-1123 label: names of containers and volumes (a volume's is part of a path on the node). */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

interface Cause {
  field: string;
  message: string;
  reason: string;
}

function invalid(def: ResourceDef, name: string, causes: Cause[]): KubeStatusError {
  const kind = def.group ? `${def.kind}.${def.group}` : def.kind;
  return new KubeStatusError(
    422,
    "Invalid",
    `${kind} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join(", ")}`,
    {
      name,
      group: def.group,
      kind: def.kind,
      causes: causes.map((c) => ({ reason: c.reason, message: c.message, field: c.field })),
    },
  );
}

function checkContainers(spec: unknown, at: string, causes: Cause[]): void {
  // A volume's name is part of a path on the node (the kubelet's emptyDir and secret folders).
  const volumes = field<unknown>(spec, "volumes");
  if (volumes !== undefined && !Array.isArray(volumes))
    causes.push({ field: `${at}.volumes`, message: "Invalid value: must be a list", reason: "FieldValueTypeInvalid" });
  (Array.isArray(volumes) ? volumes : []).forEach((v, i) => {
    const name = (v as Any | null)?.name;
    if (typeof name !== "string" || name.length > 63 || !DNS_LABEL.test(name))
      causes.push({
        field: `${at}.volumes[${i}].name`,
        message: `Invalid value: ${JSON.stringify(name) ?? String(name)}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character`,
        reason: "FieldValueInvalid",
      });
  });
  const containers = field<Any[]>(spec, "containers");
  if (!Array.isArray(containers) || containers.length === 0) {
    causes.push({ field: `${at}.containers`, message: "Required value", reason: "FieldValueRequired" });
    return;
  }
  containers.forEach((c, i) => {
    if (typeof c.name !== "string" || !DNS_LABEL.test(c.name))
      causes.push({ field: `${at}.containers[${i}].name`, message: "Required value", reason: "FieldValueRequired" });
    if (typeof c.image !== "string" || c.image === "")
      causes.push({ field: `${at}.containers[${i}].image`, message: "Required value", reason: "FieldValueRequired" });
    // The kubelet builds argv from these: anything but a list of strings is refused here, not run.
    for (const key of ["command", "args"] as const) {
      const value = c[key];
      if (value !== undefined && (!Array.isArray(value) || value.some((v) => typeof v !== "string"))) {
        causes.push({
          field: `${at}.containers[${i}].${key}`,
          message: `Invalid value: ${JSON.stringify(value) ?? String(value)}: must be a list of strings`,
          reason: "FieldValueTypeInvalid",
        });
      }
    }
  });
}

function checkInteger(value: unknown, at: string, min: number, causes: Cause[]): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || (value as number) < min) {
    causes.push({
      field: at,
      message: `Invalid value: ${JSON.stringify(value)}: must be greater than or equal to ${min}`,
      reason: "FieldValueInvalid",
    });
  }
}

/** Pod defaults the API server fills in, so `kubectl describe` and controllers see a whole spec. */
export function defaultPodSpec(spec: Any): Any {
  const containers = (field<Any[]>(spec, "containers") ?? []).map((c) => ({
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
    imagePullPolicy:
      String(c.image ?? "").endsWith(":latest") || !String(c.image ?? "").includes(":") ? "Always" : "IfNotPresent",
    resources: {},
    ...c,
  }));
  return {
    restartPolicy: "Always",
    terminationGracePeriodSeconds: 30,
    dnsPolicy: "ClusterFirst",
    schedulerName: "default-scheduler",
    securityContext: {},
    ...spec,
    containers,
  };
}

/**
 * Admission for a create: identity, defaults and the validation a real API server would refuse
 * the object on (422 Invalid with causes), for the resources this server serves.
 */
export function admit(
  def: ResourceDef,
  namespace: string | undefined,
  input: KubeObject,
  store: ObjectStore,
): KubeObject {
  const obj = structuredClone(input);
  obj.apiVersion = apiVersionOf(def);
  obj.kind = def.kind;
  obj.metadata = { ...(obj.metadata ?? {}) };
  if (!obj.metadata.name && typeof obj.metadata.generateName === "string")
    obj.metadata.name = obj.metadata.generateName + randomSuffix();
  const name = String(obj.metadata.name ?? "");
  if (input.kind !== undefined && input.kind !== def.kind) {
    throw new KubeStatusError(
      400,
      "BadRequest",
      `the object provided is unrecognized (kind ${String(input.kind)} at the ${def.plural} endpoint)`,
    );
  }
  const causes: Cause[] = [];
  if (!name)
    causes.push({
      field: "metadata.name",
      message: "Required value: name or generateName is required",
      reason: "FieldValueRequired",
    });
  else if (
    !(def.plural === "namespaces" || def.plural === "jobs"
      ? DNS_LABEL.test(name) && name.length <= 63
      : DNS_SUBDOMAIN.test(name) && name.length <= 253)
  ) {
    causes.push({
      field: "metadata.name",
      message: `Invalid value: "${name}": a lowercase RFC 1123 name must consist of lower case alphanumeric characters or '-'`,
      reason: "FieldValueInvalid",
    });
  }
  for (const [k, v] of Object.entries(obj.metadata.labels ?? {})) {
    if (!LABEL_NAME.test(k) || typeof v !== "string" || v.length > 63 || !LABEL_VALUE.test(v)) {
      causes.push({
        field: `metadata.labels`,
        message: `Invalid value: "${String(v)}": label ${k} must be 63 characters or less, start and end with an alphanumeric character`,
        reason: "FieldValueInvalid",
      });
    }
  }
  if (def.namespaced) {
    if (obj.metadata.namespace !== undefined && obj.metadata.namespace !== namespace) {
      throw new KubeStatusError(
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    obj.metadata.namespace = namespace;
    if (!store.get("namespaces", undefined, String(namespace)))
      throw new KubeStatusError(404, "NotFound", `namespaces "${namespace}" not found`, {
        name: namespace,
        kind: "namespaces",
      });
  } else delete obj.metadata.namespace;
  delete obj.metadata.resourceVersion;
  delete obj.metadata.uid;
  delete obj.metadata.deletionTimestamp;
  obj.metadata.uid = randomUUID();

  if (def.plural === "jobs") {
    const spec = (obj.spec ?? {}) as Any;
    const template = (spec.template ?? {}) as Any;
    const podSpec = (template.spec ?? {}) as Any;
    checkContainers(podSpec, "spec.template.spec", causes);
    if (podSpec.restartPolicy !== "Never" && podSpec.restartPolicy !== "OnFailure") {
      causes.push({
        field: "spec.template.spec.restartPolicy",
        message: `Unsupported value: "${String(podSpec.restartPolicy ?? "Always")}": supported values: "OnFailure", "Never"`,
        reason: "FieldValueNotSupported",
      });
    }
    checkInteger(spec.backoffLimit, "spec.backoffLimit", 0, causes);
    checkInteger(spec.activeDeadlineSeconds, "spec.activeDeadlineSeconds", 1, causes);
    checkInteger(spec.ttlSecondsAfterFinished, "spec.ttlSecondsAfterFinished", 0, causes);
    if (causes.length > 0) throw invalid(def, name, causes);
    const uid = String(obj.metadata.uid);
    const controllerLabels = {
      "batch.kubernetes.io/controller-uid": uid,
      "batch.kubernetes.io/job-name": name,
      "controller-uid": uid,
      "job-name": name,
    };
    obj.metadata.labels = { ...controllerLabels, ...(obj.metadata.labels ?? {}) };
    obj.spec = {
      parallelism: 1,
      completions: 1,
      backoffLimit: 6,
      completionMode: "NonIndexed",
      suspend: false,
      podReplacementPolicy: "TerminatingOrFailed",
      manualSelector: false,
      ...spec,
      selector: { matchLabels: { "batch.kubernetes.io/controller-uid": uid } },
      template: {
        ...template,
        metadata: {
          ...((template.metadata as Any) ?? {}),
          labels: {
            ...controllerLabels,
            ...((field<Any>(template, "metadata", "labels") as Record<string, string>) ?? {}),
          },
        },
        spec: defaultPodSpec(podSpec),
      },
    };
    obj.status = {};
  } else if (def.plural === "pods") {
    checkContainers(obj.spec, "spec", causes);
    if (causes.length > 0) throw invalid(def, name, causes);
    obj.spec = defaultPodSpec((obj.spec ?? {}) as Any);
    obj.status = { phase: "Pending", qosClass: "Burstable" };
  } else if (def.plural === "daemonsets") {
    const spec = (obj.spec ?? {}) as Any;
    checkContainers(field(spec, "template", "spec"), "spec.template.spec", causes);
    const selector = field<Record<string, string>>(spec, "selector", "matchLabels");
    const labels = field<Record<string, string>>(spec, "template", "metadata", "labels") ?? {};
    if (!selector || Object.entries(selector).some(([k, v]) => labels[k] !== v)) {
      causes.push({
        field: "spec.template.metadata.labels",
        message: "Invalid value: `selector` does not match template `labels`",
        reason: "FieldValueInvalid",
      });
    }
    if (causes.length > 0) throw invalid(def, name, causes);
    obj.spec = {
      revisionHistoryLimit: 10,
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
      ...spec,
      template: {
        ...(spec.template as Any),
        spec: { ...defaultPodSpec(field<Any>(spec, "template", "spec") ?? {}), restartPolicy: "Always" },
      },
    };
    obj.status = { currentNumberScheduled: 0, numberMisscheduled: 0, desiredNumberScheduled: 0, numberReady: 0 };
  } else if (def.plural === "deployments") {
    const spec = (obj.spec ?? {}) as Any;
    checkContainers(field(spec, "template", "spec"), "spec.template.spec", causes);
    const selector = field<Record<string, string>>(spec, "selector", "matchLabels");
    const labels = field<Record<string, string>>(spec, "template", "metadata", "labels") ?? {};
    if (!selector || Object.entries(selector).some(([k, v]) => labels[k] !== v)) {
      causes.push({
        field: "spec.template.metadata.labels",
        message: "Invalid value: `selector` does not match template `labels`",
        reason: "FieldValueInvalid",
      });
    }
    checkInteger(spec.replicas, "spec.replicas", 0, causes);
    if (causes.length > 0) throw invalid(def, name, causes);
    // The template's pod spec is left as given: its hash names the rollout, and defaults added here
    // would differ from what the next apply sends (the pods get the pod defaults when created).
    obj.spec = {
      replicas: 1,
      revisionHistoryLimit: 10,
      progressDeadlineSeconds: 600,
      ...spec,
      strategy: (spec.strategy as Any | undefined) ?? {
        type: "RollingUpdate",
        rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" },
      },
    };
    obj.status = {};
  } else if (def.plural === "namespaces") {
    if (causes.length > 0) throw invalid(def, name, causes);
    obj.spec = { finalizers: ["kubernetes"] };
    obj.status = { phase: "Active" };
    obj.metadata.labels = { "kubernetes.io/metadata.name": name, ...(obj.metadata.labels ?? {}) };
  } else if (def.plural === "secrets") {
    if (causes.length > 0) throw invalid(def, name, causes);
    Object.assign(obj, withSecretData(obj));
  } else if (causes.length > 0) throw invalid(def, name, causes);
  return obj;
}

/** A Secret's `stringData` is write-only: the API server folds it into `data` (base64) on every write. */
export function withSecretData(secret: KubeObject): KubeObject {
  const stringData = (secret.stringData ?? {}) as Record<string, string>;
  const out: KubeObject = {
    ...secret,
    type: secret.type ?? "Opaque",
    data: {
      ...((secret.data as Record<string, string>) ?? {}),
      ...Object.fromEntries(Object.entries(stringData).map(([k, v]) => [k, Buffer.from(String(v)).toString("base64")])),
    },
  };
  delete out.stringData;
  return out;
}
