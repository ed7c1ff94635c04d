import type { KubeObject } from "./selectors.js";

/** One resource type the local API server serves. */
export interface ResourceDef {
  /** Plural name, the store's key and the URL segment (`jobs`). */
  plural: string;
  singular: string;
  kind: string;
  /** API group ("" for the core group). */
  group: string;
  version: string;
  namespaced: boolean;
  shortNames?: string[];
  categories?: string[];
  verbs: string[];
}

const ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/** What the executor, the kubelet and `kubectl get/describe/delete/logs` need; nothing more. */
export const RESOURCES: readonly ResourceDef[] = [
  {
    plural: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    group: "",
    version: "v1",
    namespaced: false,
    shortNames: ["ns"],
    verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
  },
  {
    plural: "nodes",
    singular: "node",
    kind: "Node",
    group: "",
    version: "v1",
    namespaced: false,
    shortNames: ["no"],
    verbs: ALL,
  },
  {
    plural: "pods",
    singular: "pod",
    kind: "Pod",
    group: "",
    version: "v1",
    namespaced: true,
    shortNames: ["po"],
    categories: ["all"],
    verbs: ALL,
  },
  {
    plural: "events",
    singular: "event",
    kind: "Event",
    group: "",
    version: "v1",
    namespaced: true,
    shortNames: ["ev"],
    verbs: ALL,
  },
  { plural: "secrets", singular: "secret", kind: "Secret", group: "", version: "v1", namespaced: true, verbs: ALL },
  {
    plural: "jobs",
    singular: "job",
    kind: "Job",
    group: "batch",
    version: "v1",
    namespaced: true,
    categories: ["all"],
    verbs: ALL,
  },
  {
    plural: "deployments",
    singular: "deployment",
    kind: "Deployment",
    group: "apps",
    version: "v1",
    namespaced: true,
    shortNames: ["deploy"],
    categories: ["all"],
    verbs: ALL,
  },
  {
    plural: "daemonsets",
    singular: "daemonset",
    kind: "DaemonSet",
    group: "apps",
    version: "v1",
    namespaced: true,
    shortNames: ["ds"],
    categories: ["all"],
    verbs: ALL,
  },
  // Stored and served, with no controller: what `kubectl apply` of infra/k8s/ creates besides the above.
  ...(
    [
      ["serviceaccounts", "serviceaccount", "ServiceAccount", "", true, ["sa"]],
      ["services", "service", "Service", "", true, ["svc"]],
      ["roles", "role", "Role", "rbac.authorization.k8s.io", true, []],
      ["rolebindings", "rolebinding", "RoleBinding", "rbac.authorization.k8s.io", true, []],
      ["clusterroles", "clusterrole", "ClusterRole", "rbac.authorization.k8s.io", false, []],
      ["clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", "rbac.authorization.k8s.io", false, []],
      ["poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "policy", true, ["pdb"]],
      ["networkpolicies", "networkpolicy", "NetworkPolicy", "networking.k8s.io", true, ["netpol"]],
      // Stored only (no controller routes anything locally): the terminal's Ingress applies as on AKS.
      ["ingresses", "ingress", "Ingress", "networking.k8s.io", true, ["ing"]],
      // Stored only, not enforced (the local API serves no exec or attach for a policy to refuse):
      // infra/k8s/terminal.yaml's policy keeping the browser terminal's exec to shard pods.
      [
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        "ValidatingAdmissionPolicy",
        "admissionregistration.k8s.io",
        false,
        [],
      ],
      [
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        "ValidatingAdmissionPolicyBinding",
        "admissionregistration.k8s.io",
        false,
        [],
      ],
    ] as const
  ).map(
    ([plural, singular, kind, group, namespaced, shortNames]): ResourceDef => ({
      plural,
      singular,
      kind,
      group,
      version: "v1",
      namespaced,
      ...(shortNames.length > 0 ? { shortNames: [...shortNames] } : {}),
      verbs: ALL,
    }),
  ),
];

export function apiVersionOf(def: ResourceDef): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}

export function findResource(group: string, version: string, plural: string): ResourceDef | undefined {
  return RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

/** `GET /api/v1`, `/apis/batch/v1`…: the resources of one group version. */
export function resourceList(group: string, version: string): Record<string, unknown> | undefined {
  const defs = RESOURCES.filter((r) => r.group === group && r.version === version);
  if (defs.length === 0) return undefined;
  const resources: Record<string, unknown>[] = [];
  for (const r of defs) {
    resources.push({
      name: r.plural,
      singularName: r.singular,
      namespaced: r.namespaced,
      kind: r.kind,
      verbs: r.verbs,
      ...(r.shortNames ? { shortNames: r.shortNames } : {}),
      ...(r.categories ? { categories: r.categories } : {}),
    });
    if (r.plural === "pods")
      resources.push({ name: "pods/log", singularName: "", namespaced: true, kind: "Pod", verbs: ["get"] });
    resources.push({
      name: `${r.plural}/status`,
      singularName: "",
      namespaced: r.namespaced,
      kind: r.kind,
      verbs: ["get", "patch", "update"],
    });
  }
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}

/** `GET /apis`: the named groups. */
export function groupList(): Record<string, unknown> {
  const groups = [...new Set(RESOURCES.filter((r) => r.group).map((r) => r.group))].map(groupOf);
  return { kind: "APIGroupList", apiVersion: "v1", groups };
}

export function groupOf(name: string): Record<string, unknown> {
  const gv = { groupVersion: `${name}/v1`, version: "v1" };
  return { kind: "APIGroup", apiVersion: "v1", name, versions: [gv], preferredVersion: gv };
}

/** kubectl's short ages: `45s`, `3m12s`, `25m`, `5h3m`, `30h`, `4d`. */
export function age(since: string | undefined, now = Date.now()): string {
  if (!since) return "<unknown>";
  const s = Math.max(0, Math.floor((now - Date.parse(since)) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60}s`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

interface Column {
  name: string;
  type: string;
  description: string;
  priority?: number;
  cell: (obj: KubeObject) => string | number;
}

type Any = Record<string, unknown>;
const at = (obj: unknown, ...path: string[]): unknown =>
  path.reduce<unknown>((v, p) => (v && typeof v === "object" ? (v as Any)[p] : undefined), obj);
const list = (v: unknown): Any[] => (Array.isArray(v) ? (v as Any[]) : []);

/** The STATUS column of `kubectl get pods`: a container's waiting or terminated reason wins over the phase. */
export function podStatusText(pod: KubeObject): string {
  if (pod.metadata.deletionTimestamp) return "Terminating";
  const reason = at(pod, "status", "reason");
  if (typeof reason === "string" && reason) return reason;
  for (const c of list(at(pod, "status", "containerStatuses"))) {
    const waiting = at(c, "state", "waiting", "reason");
    if (typeof waiting === "string" && waiting && waiting !== "ContainerCreating") return waiting;
    const terminated = at(c, "state", "terminated", "reason");
    if (typeof terminated === "string" && terminated) return terminated;
  }
  const phase = String(at(pod, "status", "phase") ?? "Pending");
  if (phase === "Pending" && at(pod, "spec", "nodeName")) return "ContainerCreating";
  return phase;
}

function jobStatusText(job: KubeObject): string {
  const conditions = list(at(job, "status", "conditions")).filter((c) => c.status === "True");
  for (const type of ["Failed", "Complete", "Suspended", "FailureTarget", "SuccessCriteriaMet"]) {
    if (conditions.some((c) => c.type === type)) return type;
  }
  return job.metadata.deletionTimestamp ? "Terminating" : "Running";
}

function duration(from: unknown, to: unknown): string {
  if (typeof from !== "string") return "";
  const end = typeof to === "string" ? Date.parse(to) : Date.now();
  return age(from, end);
}

const NAME: Column = {
  name: "Name",
  type: "string",
  description: "Name must be unique within a namespace.",
  cell: (o) => o.metadata.name,
};
const AGE: Column = {
  name: "Age",
  type: "string",
  description: "CreationTimestamp of the object.",
  cell: (o) => age(o.metadata.creationTimestamp),
};

const COLUMNS: Record<string, Column[]> = {
  pods: [
    NAME,
    {
      name: "Ready",
      type: "string",
      description: "The aggregate readiness state of this pod for accepting traffic.",
      cell: (o) => {
        const statuses = list(at(o, "status", "containerStatuses"));
        const total = list(at(o, "spec", "containers")).length;
        return `${statuses.filter((c) => c.ready === true).length}/${total}`;
      },
    },
    {
      name: "Status",
      type: "string",
      description: "The aggregate status of the containers in this pod.",
      cell: podStatusText,
    },
    {
      name: "Restarts",
      type: "string",
      description: "The number of times the containers in this pod have been restarted.",
      cell: (o) =>
        String(list(at(o, "status", "containerStatuses")).reduce((n, c) => n + Number(c.restartCount ?? 0), 0)),
    },
    AGE,
    {
      name: "IP",
      type: "string",
      priority: 1,
      description: "IP address allocated to the pod.",
      cell: (o) => String(at(o, "status", "podIP") ?? "<none>"),
    },
    {
      name: "Node",
      type: "string",
      priority: 1,
      description: "Name of the Node this pod runs on.",
      cell: (o) => String(at(o, "spec", "nodeName") ?? "<none>"),
    },
  ],
  jobs: [
    NAME,
    { name: "Status", type: "string", description: "Status of the job.", cell: jobStatusText },
    {
      name: "Completions",
      type: "string",
      description: "The completion status of the job.",
      cell: (o) => `${Number(at(o, "status", "succeeded") ?? 0)}/${Number(at(o, "spec", "completions") ?? 1)}`,
    },
    {
      name: "Duration",
      type: "string",
      description: "Time required to complete the job.",
      cell: (o) => duration(at(o, "status", "startTime"), at(o, "status", "completionTime")),
    },
    AGE,
    {
      name: "Containers",
      type: "string",
      priority: 1,
      description: "Names of each container in the template.",
      cell: (o) =>
        list(at(o, "spec", "template", "spec", "containers"))
          .map((c) => String(c.name))
          .join(","),
    },
    {
      name: "Images",
      type: "string",
      priority: 1,
      description: "Images referenced by each container in the template.",
      cell: (o) =>
        list(at(o, "spec", "template", "spec", "containers"))
          .map((c) => String(c.image))
          .join(","),
    },
  ],
  nodes: [
    NAME,
    {
      name: "Status",
      type: "string",
      description: "The status of the node",
      cell: (o) =>
        list(at(o, "status", "conditions")).some((c) => c.type === "Ready" && c.status === "True")
          ? "Ready"
          : "NotReady",
    },
    { name: "Roles", type: "string", description: "The roles of the node", cell: () => "<none>" },
    AGE,
    {
      name: "Version",
      type: "string",
      description: "Kubelet Version reported by the node.",
      cell: (o) => String(at(o, "status", "nodeInfo", "kubeletVersion") ?? ""),
    },
  ],
  namespaces: [
    NAME,
    {
      name: "Status",
      type: "string",
      description: "The status of the namespace",
      cell: (o) => String(at(o, "status", "phase") ?? "Active"),
    },
    AGE,
  ],
  daemonsets: [
    NAME,
    {
      name: "Desired",
      type: "integer",
      description: "The desired number of pods.",
      cell: (o) => Number(at(o, "status", "desiredNumberScheduled") ?? 0),
    },
    {
      name: "Current",
      type: "integer",
      description: "The current number of pods.",
      cell: (o) => Number(at(o, "status", "currentNumberScheduled") ?? 0),
    },
    {
      name: "Ready",
      type: "integer",
      description: "The number of pods ready.",
      cell: (o) => Number(at(o, "status", "numberReady") ?? 0),
    },
    {
      name: "Up-to-date",
      type: "integer",
      description: "The number of pods updated.",
      cell: (o) => Number(at(o, "status", "updatedNumberScheduled") ?? 0),
    },
    {
      name: "Available",
      type: "integer",
      description: "The number of pods available.",
      cell: (o) => Number(at(o, "status", "numberAvailable") ?? 0),
    },
    {
      name: "Node Selector",
      type: "string",
      description: "The node selector of the pods.",
      cell: (o) =>
        Object.entries((at(o, "spec", "template", "spec", "nodeSelector") as Record<string, string>) ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(",") || "<none>",
    },
    AGE,
  ],
  events: [
    {
      name: "Last Seen",
      type: "string",
      description: "Time of the last occurrence.",
      cell: (o) => age(String(at(o, "lastTimestamp") ?? o.metadata.creationTimestamp)),
    },
    { name: "Type", type: "string", description: "Type of this event.", cell: (o) => String(at(o, "type") ?? "") },
    {
      name: "Reason",
      type: "string",
      description: "Why the action was taken.",
      cell: (o) => String(at(o, "reason") ?? ""),
    },
    {
      name: "Object",
      type: "string",
      description: "The object this event is about.",
      cell: (o) =>
        `${String(at(o, "involvedObject", "kind") ?? "").toLowerCase()}/${String(at(o, "involvedObject", "name") ?? "")}`,
    },
    {
      name: "Message",
      type: "string",
      description: "A description of the status of this operation.",
      cell: (o) => String(at(o, "message") ?? ""),
    },
  ],
  secrets: [
    NAME,
    {
      name: "Type",
      type: "string",
      description: "The type of the secret.",
      cell: (o) => String(at(o, "type") ?? "Opaque"),
    },
    {
      name: "Data",
      type: "string",
      description: "The number of keys in the secret.",
      cell: (o) => String(Object.keys((at(o, "data") as Any) ?? {}).length),
    },
    AGE,
  ],
};

/**
 * A `meta.k8s.io/v1` Table of objects: what the API server returns when kubectl asks for
 * `application/json;as=Table` (server-side printing), so `kubectl get` shows the usual columns.
 */
export function toTable(resource: string, objects: KubeObject[], resourceVersion: string): Record<string, unknown> {
  const columns = COLUMNS[resource] ?? [NAME, AGE];
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion },
    columnDefinitions: columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.name === "Name" ? "name" : "",
      description: c.description,
      priority: c.priority ?? 0,
    })),
    rows: objects.map((o) => ({
      cells: columns.map((c) => c.cell(o)),
      object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata },
    })),
  };
}
