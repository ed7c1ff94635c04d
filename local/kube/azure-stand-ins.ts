import { chmodSync, chownSync, type FSWatcher, mkdirSync, readFileSync, renameSync, rmSync, watch } from "node:fs";
import path from "node:path";
import { type ContainerSupplement, writeNewFile } from "./kubelet.js";
import { field } from "./objects.js";

/** The label AKS's workload identity webhook acts on: the pod was rendered for Azure. */
export const WORKLOAD_IDENTITY_USE = "azure.workload.identity/use";
/** The annotation naming the containers (`;`-separated) the webhook leaves without the identity. */
export const WORKLOAD_IDENTITY_SKIP_CONTAINERS = "azure.workload.identity/skip-containers";

/** What the local stack has in place of what AKS and Azure give a pod. */
export interface AzureStandInOptions {
  /**
   * The namespaces the job API is deployed into (the dashboard's `SVC_JOB_API_NAMESPACE`): only a
   * pod there is given the stand-ins.
   */
  namespaces: readonly string[];
  /**
   * The job API's service account (`serviceAccountName` of `infra/k8s/jobapi.yaml`'s Deployment,
   * {@link jobApiServiceAccountName}): on AKS only a pod running as the service account federated
   * with the identity gets its token; here only such a pod gets the stand-ins.
   */
  serviceAccountName: string;
  /** The embedded Azurite: the storage account the pod's identity would reach. */
  storageConnectionString: string;
  /** The stack's token store (the folder `SECRETS_DIR` names): the Key Vault the pod's identity would read. */
  tokenStoreDir: string;
  /** The secrets of the token store the pod may read (the job API's token). */
  secretNames: readonly string[];
  /** The local identity provider's OpenID discovery document: the Entra tenant's, here. */
  identityDiscoveryUrl: string;
  /** A kubeconfig for the local Kubernetes API: the pod's service account token and the in-cluster address. */
  kubeconfig: () => string;
  /**
   * The nodes' database cache folder (the one the stack's own job API gives its shard pods): what a
   * node-prep DaemonSet prepares on AKS at the hostPath `JOBAPI_K8S_DB_CACHE_DIR` names (infra/k8s/jobapi.yaml).
   */
  nodeCacheDir?: string;
}

/**
 * What the local kubelet supplies a pod rendered for Azure (labelled `azure.workload.identity/use`,
 * as `infra/k8s/jobapi.yaml`'s job API is, in the job API's namespace and running as its service
 * account) in place of what AKS and Azure supply it — the one place
 * where a deploy to the local cluster differs from one to AKS. The manifests are rendered and
 * applied exactly as for Azure; only the container's environment changes when it starts:
 *
 * | The pod has (Azure) | The local kubelet gives it instead |
 * |---|---|
 * | `<P>_STORAGE_ACCOUNT_NAME` (Blob and Table storage reached with the workload identity) | `<P>_STORAGE_CONNECTION_STRING`: the stack's Azurite (its account key is the identity's access) |
 * | `<P>_KEY_VAULT_URL` (the API token read from Key Vault with the workload identity) | `<P>_SECRETS_DIR`: a copy of the stack's token store (only `secretNames`), kept current as the dashboard rotates the token |
 * | `<P>_AUTH_TENANT_ID` (the browser terminal checks Entra tokens) | `<P>_AUTH_DISCOVERY_URL`: the local identity provider |
 * | the service account token and `KUBERNETES_SERVICE_HOST` (in-cluster Kubernetes access) | `KUBECONFIG`: a copy of the local API's kubeconfig |
 * | the node folder its shard and warm-up pods cache databases in (a hostPath, `JOBAPI_K8S_DB_CACHE_DIR`) | `JOBAPI_K8S_DB_CACHE_DIR`: the stack's node cache folder (`nodeCacheDir`) |
 *
 * The copies live in a folder the kubelet makes for each start of the container (its own, 0750,
 * group the pod's volume group: the container reads them, owned by its user, and cannot change the
 * folder) and go with it. The kubelet runs as root: were the folder the container's, it could put
 * a symlink in the place of the kubeconfig or of the token's folder and have root write or chown a
 * host file through it when the container starts again or the token is rotated.
 */
export function azureStandIns(options: AzureStandInOptions): ContainerSupplement {
  return ({ pod, container, env, dir, owner }) => {
    if (pod.metadata.labels?.[WORKLOAD_IDENTITY_USE] !== "true") return undefined;
    // A container the webhook skips (the terminal's shell) gets no Azure identity on AKS: nor here.
    const skipped = String(pod.metadata.annotations?.[WORKLOAD_IDENTITY_SKIP_CONTAINERS] ?? "").split(";");
    if (skipped.map((n) => n.trim()).includes(String(container.name))) return undefined;
    // The Azurite key, the API token and the admin kubeconfig are the job API's alone: a pod
    // elsewhere, or under another service account, gets nothing (on AKS it would get no token).
    if (!options.namespaces.includes(String(pod.metadata.namespace))) return undefined;
    if (field(pod, "spec", "serviceAccountName") !== options.serviceAccountName) return undefined;
    const out: Record<string, string> = { ...env };
    const stops: (() => void)[] = [];
    for (const name of Object.keys(env)) {
      const prefix = /^(.*)_STORAGE_ACCOUNT_NAME$/.exec(name)?.[1];
      if (prefix !== undefined) {
        delete out[name];
        out[`${prefix}_STORAGE_CONNECTION_STRING`] = options.storageConnectionString;
      }
      const vault = /^(.*)_KEY_VAULT_URL$/.exec(name)?.[1];
      if (vault !== undefined) {
        delete out[name];
        const secrets = path.join(dir(), "secrets");
        const mirror = mirrorSecrets(options.tokenStoreDir, secrets, options.secretNames, owner);
        stops.push(() => mirror.close());
        out[`${vault}_SECRETS_DIR`] = secrets;
      }
      const tenant = /^(.*)_AUTH_TENANT_ID$/.exec(name)?.[1];
      if (tenant !== undefined && env[`${tenant}_AUTH_DISCOVERY_URL`] === undefined)
        out[`${tenant}_AUTH_DISCOVERY_URL`] = options.identityDiscoveryUrl;
    }
    // Its shard and warm-up pods' hostPath: a folder of this machine they may use, in place of the
    // AKS node's folder the manifest names (the pod's own data folder, the default, is not open to
    // other pods).
    if (options.nodeCacheDir && env.JOBAPI_EXECUTOR === "kubernetes")
      out.JOBAPI_K8S_DB_CACHE_DIR = options.nodeCacheDir;
    const automount = field(pod, "spec", "automountServiceAccountToken") !== false;
    if (automount && out.KUBECONFIG === undefined) {
      const kubeconfig = path.join(dir(), "kubeconfig");
      writeNewFile(kubeconfig, options.kubeconfig(), 0o600, owner);
      out.KUBECONFIG = kubeconfig;
    }
    return {
      env: out,
      stop: () => {
        for (const stop of stops) stop();
      },
    };
  };
}

/**
 * Keeps `names` of the folder `from` copied into `to` (made here, in the kubelet's folder for the
 * container: the container reads it, cannot change it), each copy (0600, owned by `owner`) written
 * anew and renamed over the previous one (a reader never sees half a file) when the original
 * changes, removed when it goes.
 */
function mirrorSecrets(
  from: string,
  to: string,
  names: readonly string[],
  owner: { uid: number; gid: number } | undefined,
): { close(): void } {
  mkdirSync(to, { mode: 0o750 });
  chmodSync(to, 0o750);
  if (owner) chownSync(to, -1, owner.gid);
  let copies = 0;
  const copy = (name: string) => {
    const target = path.join(to, name);
    let staged: string | undefined;
    try {
      let data: Buffer;
      try {
        data = readFileSync(path.join(from, name));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") rmSync(target, { force: true });
        return;
      }
      staged = path.join(to, `.${name}.${++copies}.tmp`);
      writeNewFile(staged, data, 0o600, owner);
      renameSync(staged, target);
    } catch {
      // The original moved while being read: the watch's next event copies it again.
      if (staged) rmSync(staged, { force: true });
    }
  };
  for (const name of names) copy(name);
  mkdirSync(from, { recursive: true, mode: 0o700 });
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(from, (_event, file) => {
      for (const name of names) if (!file || String(file).startsWith(name)) copy(name);
    });
    watcher.on("error", () => undefined);
  } catch {
    // No watch on this file system: the copy made at start stands.
  }
  return { close: () => watcher?.close() };
}
