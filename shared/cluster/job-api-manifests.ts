import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { KEY_VAULT_CERTIFICATE_URI, TERMINAL_HOST } from "./terminal-ingress.js";

/** A Kubernetes object as the deploy applies it. */
export interface KubeManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/** An image digest as registries report it: the only way the job API's image is named on a cluster. */
export const IMAGE_DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * The workspace's values the job API's manifests (`infra/k8s/jobapi.yaml`) are rendered with. The
 * image is pinned by digest (a moving tag would let a node pull a different image than the one
 * built and deployed).
 */
export const jobApiValuesSchema = z
  .strictObject({
    namespace: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a namespace name"),
    /** The registry's login server (`myregistry.azurecr.io`). */
    registry: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$/, "must be a registry login server such as 'x.azurecr.io'"),
    image_digest: z.string().regex(IMAGE_DIGEST, "must be an image digest 'sha256:<64 hex digits>'"),
    workload_identity_client_id: z
      .string()
      .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, "must be a client id (GUID)"),
    key_vault_url: z.url({ protocol: /^https$/ }),
    storage_account_name: z.string().regex(/^[a-z0-9]{3,24}$/, "must be 3-24 lowercase letters or digits"),
    app_subnet_cidr: z.string().regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, "must be an IPv4 CIDR such as 10.1.0.0/24"),
    /** The dashboard's app registration: the browser terminal validates the browser's token with it. */
    auth_client_id: z.string().regex(/^[A-Za-z0-9._:/-]{1,200}$/, "must be an application (client) id"),
    auth_tenant_id: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, "must be a tenant id"),
    /** The web app's origin, the only one that may open the terminal; empty: the terminal refuses every origin. */
    web_app_origin: z.union([
      z.literal(""),
      z.url({ protocol: /^https?$/ }).refine((u) => new URL(u).origin === u, "must be an origin"),
    ]),
    /**
     * The browser terminal's public ingress (decision 0022): the host `wss://<host>/v1/terminal`
     * answers on, and the Key Vault certificate it serves. Both or neither; without them the job API
     * has no ingress and stays private.
     */
    terminal_host: z.union([z.literal(""), z.string().regex(TERMINAL_HOST, "must be a DNS name")]).optional(),
    terminal_tls_cert_uri: z
      .union([z.literal(""), z.string().regex(KEY_VAULT_CERTIFICATE_URI, "must be a Key Vault certificate URI")])
      .optional(),
  })
  .refine((v) => Boolean(v.terminal_host) === Boolean(v.terminal_tls_cert_uri), {
    message: "the terminal's ingress needs both terminal_host and terminal_tls_cert_uri",
    path: ["terminal_tls_cert_uri"],
  });
export type JobApiValues = z.infer<typeof jobApiValuesSchema>;

/**
 * The node folder (a hostPath) the deployed job API's shard and warm-up pods cache databases in,
 * on every BLAST node: the manifest's node-prep DaemonSet makes it (0700, the pods' user's) in its
 * parent, which the kubelet makes when missing. Fixed, not a workspace value: one blastplane per
 * cluster (as the cluster-scoped objects already assume).
 */
export const NODE_DB_CACHE_PARENT = "/var/lib/blastplane";
export const NODE_DB_CACHE_DIR = `${NODE_DB_CACHE_PARENT}/databases`;

/** The manifest's placeholders, by the value that fills each. */
const PLACEHOLDERS: Record<string, (v: JobApiValues) => string> = {
  WORKLOAD_IDENTITY_CLIENT_ID: (v) => v.workload_identity_client_id,
  REGISTRY: (v) => v.registry,
  IMAGE_DIGEST: (v) => v.image_digest,
  KEY_VAULT_URL: (v) => v.key_vault_url,
  STORAGE_ACCOUNT_NAME: (v) => v.storage_account_name,
  APP_SUBNET_CIDR: (v) => v.app_subnet_cidr,
  AUTH_CLIENT_ID: (v) => v.auth_client_id,
  AUTH_TENANT_ID: (v) => v.auth_tenant_id,
  WEB_APP_ORIGIN: (v) => v.web_app_origin,
  TERMINAL_HOST: (v) => v.terminal_host ?? "",
  TERMINAL_TLS_CERT_URI: (v) => v.terminal_tls_cert_uri ?? "",
  DB_CACHE_DIR: () => NODE_DB_CACHE_DIR,
  DB_CACHE_PARENT: () => NODE_DB_CACHE_PARENT,
  DISPATCH_FLEET: (v) => deployedFleet(v.namespace),
};

/**
 * The dispatch fleet of the job API deployed into `namespace` (`JOBAPI_DISPATCH_FLEET`): its jobs
 * are dispatched by it alone, never by another job API sharing the storage account (`npm start`'s
 * own, fleet `default`). Stable across redeploys, so a job queued before one runs after it.
 */
export function deployedFleet(namespace: string): string {
  return `cluster-${namespace}`.slice(0, 63).replace(/-+$/, "");
}

/** The manifest's namespace as written; the workspace's namespace replaces it. */
const MANIFEST_NAMESPACE = "blastplane";

/**
 * Where `jobapi.yaml` is: `k8s/` beside the bundle (the build copies it into `dist/functions/k8s/`),
 * a folder or two up (a chunk's, the sources' `shared/cluster/`), else the repository's `infra/k8s/`.
 */
export function jobApiManifestPath(moduleDir = import.meta.dirname, file = "jobapi.yaml"): string {
  const candidates = [
    path.join(moduleDir, "k8s"),
    path.join(path.dirname(moduleDir), "k8s"),
    path.join(path.dirname(path.dirname(moduleDir)), "infra", "k8s"),
    path.resolve("infra", "k8s"),
  ].map((dir) => path.join(dir, file));
  return candidates.find((candidate) => existsSync(candidate)) ?? (candidates.at(-1) as string);
}

/** Where `terminal.yaml` (the browser terminal's account, token Secret, Role and admission policy) is: beside `jobapi.yaml`. */
export function terminalManifestPath(moduleDir = import.meta.dirname): string {
  return jobApiManifestPath(moduleDir, "terminal.yaml");
}

/**
 * The job API's objects, rendered: every `${NAME}` placeholder filled (an unknown one is an error,
 * not a literal left on the cluster), namespaced objects moved into `values.namespace`, in the
 * manifest's order (the Namespace first, the objects that use it after). When the pod runs the
 * browser terminal's container (a web app origin is set), the terminal's objects
 * (`infra/k8s/terminal.yaml`: its service account, that account's token Secret the container
 * mounts, its Role and RoleBinding, the admission policy keeping its exec to shard pods) come just
 * before the Deployment: the Secret exists when the pod starts (else the container would wait in
 * ContainerCreating and the rollout time out), the policy before the shell does.
 */
export function renderJobApiManifests(
  values: JobApiValues,
  text = readFileSync(jobApiManifestPath(), "utf8"),
  terminalText: () => string = () => readFileSync(terminalManifestPath(), "utf8"),
): KubeManifest[] {
  const objects: KubeManifest[] = [];
  for (const obj of parseManifests(fillPlaceholders(text, values), "job API")) {
    if (obj.kind === "Ingress" && obj.metadata.name === TERMINAL_INGRESS && !terminalIngressWanted(values)) continue;
    objects.push(withoutUnusedTerminal(inNamespace(obj, values.namespace), values));
  }
  if (!runsTerminal(objects)) return objects;
  const terminal = parseManifests(fillPlaceholders(terminalText(), values), "terminal").map((obj) =>
    inNamespace(obj, values.namespace),
  );
  const at = objects.findIndex((o) => o.kind === "Deployment");
  objects.splice(at < 0 ? objects.length : at, 0, ...terminal);
  return objects;
}

function fillPlaceholders(text: string, values: JobApiValues): string {
  return text.replace(/\$\{([A-Z_]+)\}/g, (_, name: string) => {
    const fill = PLACEHOLDERS[name];
    if (!fill) throw new Error(`the job API manifest names an unknown placeholder \${${name}}`);
    // Every value is a quoted YAML scalar in the manifest; the schema admits no quote or newline.
    return fill(values);
  });
}

function parseManifests(text: string, what: string): KubeManifest[] {
  const objects: KubeManifest[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`the ${what} manifest is not valid YAML: ${doc.errors[0]?.message}`);
    const obj = doc.toJS() as KubeManifest | null;
    if (obj) objects.push(obj);
  }
  return objects;
}

/** Whether the rendered Deployment's pod runs the browser terminal's container. */
function runsTerminal(objects: readonly KubeManifest[]): boolean {
  const pod = (objects.find((o) => o.kind === "Deployment")?.spec as { template?: { spec?: { containers?: unknown } } })
    ?.template?.spec;
  return (
    Array.isArray(pod?.containers) && pod.containers.some((c) => (c as { name?: unknown }).name === TERMINAL_CONTAINER)
  );
}

/** The Ingress that exposes `/v1/terminal` only (decision 0022). */
export const TERMINAL_INGRESS = "blastplane-terminal";

/**
 * The terminal's ingress is rendered only when its host and certificate are configured and the
 * terminal runs at all (a web app origin may open it): otherwise the job API has no public path.
 */
function terminalIngressWanted(values: JobApiValues): boolean {
  return Boolean(values.terminal_host && values.terminal_tls_cert_uri && values.web_app_origin);
}

/** The browser terminal's container and volumes in the job API's pod (decision 0020). */
const TERMINAL_CONTAINER = "terminal";
const TERMINAL_VOLUMES = new Set(["terminal-token", "terminal-home"]);

/**
 * Without a web app origin no browser may open the terminal (the job API refuses every origin),
 * so its daemon is not run at all: the pod is the job API alone, and no shell exists to reach.
 */
function withoutUnusedTerminal(obj: KubeManifest, values: JobApiValues): KubeManifest {
  if (values.web_app_origin !== "" || obj.kind !== "Deployment") return obj;
  const pod = (obj.spec as { template?: { spec?: { containers?: { name: string }[]; volumes?: { name: string }[] } } })
    ?.template?.spec;
  if (!pod?.containers?.some((c) => c.name === TERMINAL_CONTAINER)) return obj;
  pod.containers = pod.containers.filter((c) => c.name !== TERMINAL_CONTAINER);
  if (pod.volumes) pod.volumes = pod.volumes.filter((v) => !TERMINAL_VOLUMES.has(v.name));
  return obj;
}

function inNamespace(obj: KubeManifest, namespace: string): KubeManifest {
  const out = structuredClone(obj);
  if (out.kind === "Namespace") out.metadata.name = namespace;
  else if (out.metadata.namespace === MANIFEST_NAMESPACE) out.metadata.namespace = namespace;
  // Bindings name their service accounts by namespace too.
  for (const subject of (out.subjects as { namespace?: string }[] | undefined) ?? []) {
    if (subject.namespace === MANIFEST_NAMESPACE) subject.namespace = namespace;
  }
  // An admission policy's CEL names the namespace as a string and in service account user names.
  if (out.kind === "ValidatingAdmissionPolicy") {
    const spec = out.spec as { matchConditions?: { expression?: string }[]; validations?: { expression?: string }[] };
    for (const entry of [...(spec?.matchConditions ?? []), ...(spec?.validations ?? [])]) {
      if (typeof entry.expression !== "string") continue;
      // A namespace name is a DNS label: nothing in it can end the CEL string.
      entry.expression = entry.expression
        .replaceAll(`"${MANIFEST_NAMESPACE}"`, `"${namespace}"`)
        .replaceAll(`system:serviceaccount:${MANIFEST_NAMESPACE}:`, `system:serviceaccount:${namespace}:`);
    }
  }
  return out;
}

/**
 * The job API's service account: its Deployment's `serviceAccountName` in the manifest (the one
 * federated with the workload identity). Read from the manifest, not repeated elsewhere.
 */
export function jobApiServiceAccountName(text = readFileSync(jobApiManifestPath(), "utf8")): string {
  for (const doc of parseAllDocuments(text)) {
    const obj = doc.toJS() as KubeManifest | null;
    if (obj?.kind !== "Deployment") continue;
    const name = (obj.spec as { template?: { spec?: { serviceAccountName?: unknown } } } | undefined)?.template?.spec
      ?.serviceAccountName;
    if (typeof name === "string" && name) return name;
  }
  throw new Error("the job API manifest's Deployment names no serviceAccountName");
}

/** The Deployment among the rendered objects (the one the rollout waits for). */
export function deploymentOf(objects: readonly KubeManifest[]): KubeManifest {
  const deployment = objects.find((o) => o.kind === "Deployment");
  if (!deployment) throw new Error("the job API manifest has no Deployment");
  return deployment;
}
