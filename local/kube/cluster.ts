import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { cpuQuantity, memoryQuantity } from "../../shared/cluster/quantity.js";
import type { Logger } from "../../shared/logging/logger.js";
import { writeFileDurablySync } from "../../shared/storage/durable-file.js";
import { ApiServer, KUBE_VERSION } from "./api-server.js";
import {
  DaemonSetController,
  DeploymentController,
  JobController,
  ServiceAccountTokenController,
} from "./controllers.js";
import { Deleter } from "./deletion.js";
import { type ContainerSupplement, Kubelet, type LocalImage } from "./kubelet.js";
import { giveTree } from "./node-files.js";
import { admit, timestamp } from "./objects.js";
import { findResource } from "./resources.js";
import { nodeMismatch, Scheduler } from "./scheduler.js";
import type { KubeObject } from "./selectors.js";
import { ObjectStore } from "./store.js";

/** A simulated node: what it offers the scheduler. */
export interface LocalNodeSpec {
  name: string;
  memoryBytes: number;
  cpu: number;
  labels?: Record<string, string>;
  taints?: { key: string; value?: string; effect: "NoSchedule" | "NoExecute" | "PreferNoSchedule" }[];
}

export interface LocalClusterOptions {
  logger: Logger;
  /** Where emptyDir volumes live, and the kubeconfig unless `kubeconfigPath` says otherwise. */
  dataDir: string;
  kubeconfigPath?: string;
  port?: number;
  host?: string;
  nodes: LocalNodeSpec[];
  images: LocalImage[];
  /** Namespaces created at start (besides `default` and `kube-system`). */
  namespaces?: string[];
  bookmarkIntervalMs?: number;
  /** Bytes a watch may have queued for a client that does not read before it is dropped (default 16 MiB). */
  watchBufferLimitBytes?: number;
  /** Bytes of recent changes kept for watches to resume from (default 64 MiB; 10 000 changes at most). */
  historyLimitBytes?: number;
  memorySampleMs?: number;
  /** First back-off before a Job replaces a failed pod (Kubernetes: 10 s). */
  podBackoffMs?: number;
  restartBackoffMs?: number;
  /** What the kubelet supplies containers beyond their spec (the local stack's Azure stand-ins). */
  supplement?: ContainerSupplement;
}

export interface LocalCluster {
  /** `https://127.0.0.1:<port>` */
  url: string;
  token: string;
  kubeconfigPath: string;
  store: ObjectStore;
  api: ApiServer;
  /**
   * Makes the nodes labelled `owner` exactly `nodes`: creates the missing ones, removes the others
   * (their pods go with them, as with a node lost). What the local Resource Manager's managed
   * cluster does to its node pools (local/arm/kube-backend.ts).
   */
  syncNodes(owner: string, nodes: LocalNodeSpec[]): void;
  /** The images the kubelet can run (an image built later is added here). */
  images: LocalImage[];
  stop(): Promise<void>;
}

/** The label that says which owner's {@link LocalCluster.syncNodes} made a node. */
export const NODE_OWNER_LABEL = "blastplane.local/owner";

/** The pool label and taint of the BLAST node pool, as the AKS pool would carry them. */
export const BLAST_POOL = { label: "blastplane.io/pool", value: "blast" };

/** `count` nodes named `local-blast-<i>`, labelled and tainted as the BLAST node pool. */
export function blastPoolNodes(count: number, memoryBytes: number, cpu: number): LocalNodeSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    name: `local-blast-${i}`,
    memoryBytes,
    cpu,
    labels: { [BLAST_POOL.label]: BLAST_POOL.value },
    taints: [{ key: BLAST_POOL.label, value: BLAST_POOL.value, effect: "NoSchedule" as const }],
  }));
}

export function nodeObject(spec: LocalNodeSpec): KubeObject {
  const resources = {
    cpu: cpuQuantity(spec.cpu),
    memory: memoryQuantity(spec.memoryBytes),
    pods: "110",
    "ephemeral-storage": "100Gi",
  };
  const now = timestamp();
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: spec.name,
      labels: {
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "local",
        ...(spec.labels ?? {}),
      },
    },
    spec: { ...(spec.taints && spec.taints.length > 0 ? { taints: spec.taints } : {}) },
    status: {
      capacity: resources,
      allocatable: resources,
      conditions: [
        {
          type: "MemoryPressure",
          status: "False",
          reason: "KubeletHasSufficientMemory",
          message: "kubelet has sufficient memory available",
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        },
        {
          type: "Ready",
          status: "True",
          reason: "KubeletReady",
          message: "kubelet is posting ready status",
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        },
      ],
      addresses: [
        { type: "InternalIP", address: "127.0.0.1" },
        { type: "Hostname", address: spec.name },
      ],
      nodeInfo: {
        kubeletVersion: KUBE_VERSION.gitVersion,
        kubeProxyVersion: KUBE_VERSION.gitVersion,
        osImage: "blastplane local kubelet",
        operatingSystem: "linux",
        architecture: "amd64",
        containerRuntimeVersion: "local://processes",
        kernelVersion: "",
        machineID: "",
        systemUUID: "",
        bootID: "",
      },
    },
  };
}

/**
 * Prepares a node folder for the hostPath volumes of pods that run as `owner` (a shard's database
 * cache), as a node's provisioning would: made if missing and, when this process is root (its
 * kubelet then runs such pods as that user), given to `owner` with everything in it. Without root
 * the kubelet runs pods as its own user, who already owns what it made. Returns the folder.
 */
export function prepareNodeFolder(dir: string, owner: { uid: number; gid: number }): string {
  mkdirSync(dir, { recursive: true });
  if (process.getuid?.() !== 0) return dir;
  if (!lstatSync(dir).isDirectory()) throw new Error(`${dir} is not a folder`);
  // What a previous stack's pods left in it: given without following a symlink they planted.
  giveTree(dir, owner);
  chmodSync(dir, 0o700);
  return dir;
}

/**
 * The API server's TLS certificate (self-signed, for 127.0.0.1 and localhost), made once with
 * openssl and kept in `dir`. kubectl sends a bearer token only over TLS, as a real cluster serves.
 * Other local HTTPS servers (the Bot Service–shaped issuer) name their own `file` and `commonName`.
 */
export function servingCertificate(
  dir: string,
  names: { file: string; commonName: string } = { file: "apiserver", commonName: "blastplane-local-apiserver" },
): { key: string; cert: string; certFile: string } {
  const keyFile = path.join(dir, `${names.file}.key`);
  const certFile = path.join(dir, `${names.file}.crt`);
  if (!existsSync(keyFile) || !existsSync(certFile)) {
    mkdirSync(dir, { recursive: true });
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "3650",
        "-subj",
        `/CN=${names.commonName}`,
        "-addext",
        "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyCertSign",
        "-addext",
        "extendedKeyUsage=serverAuth",
        "-keyout",
        keyFile,
        "-out",
        certFile,
      ],
      { stdio: "ignore" },
    );
  }
  return { key: readFileSync(keyFile, "utf8"), cert: readFileSync(certFile, "utf8"), certFile };
}

/** A kubeconfig naming this cluster (and the CA of its certificate), its bearer token and a context using `namespace`. */
export function kubeconfigText(url: string, caCert: string, token: string, namespace: string): string {
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "blastplane-local",
          cluster: { server: url, "certificate-authority-data": Buffer.from(caCert).toString("base64") },
        },
      ],
      users: [{ name: "blastplane-local", user: { token } }],
      contexts: [
        { name: "blastplane-local", context: { cluster: "blastplane-local", user: "blastplane-local", namespace } },
      ],
      "current-context": "blastplane-local",
      preferences: {},
    },
    null,
    2,
  );
}

/**
 * Starts the local Kubernetes-compatible cluster: API server on loopback (TLS, bearer token), store,
 * scheduler, Job, DaemonSet, Deployment and service-account token controllers, garbage collection, and one kubelet for all simulated
 * nodes; writes a kubeconfig (mode 600) whose context uses the first extra namespace.
 */
export async function startLocalCluster(options: LocalClusterOptions): Promise<LocalCluster> {
  const store = new ObjectStore(undefined, options.historyLimitBytes);
  const deleter = new Deleter(store);
  const token = randomBytes(24).toString("base64url");
  for (const ns of ["default", "kube-system", ...(options.namespaces ?? [])]) {
    if (!store.get("namespaces", undefined, ns)) {
      store.create("namespaces", {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: ns, labels: { "kubernetes.io/metadata.name": ns } },
        spec: { finalizers: ["kubernetes"] },
        status: { phase: "Active" },
      });
    }
  }
  for (const node of options.nodes) store.create("nodes", nodeObject(node));
  const kubelet = new Kubelet({
    store,
    deleter,
    logger: options.logger,
    rootDir: path.join(options.dataDir, "kubelet"),
    images: options.images,
    memorySampleMs: options.memorySampleMs,
    restartBackoffMs: options.restartBackoffMs,
    ...(options.supplement ? { supplement: options.supplement } : {}),
  });
  const scheduler = new Scheduler(store);
  const jobs = new JobController(store, deleter, { podBackoffMs: options.podBackoffMs ?? 1000 });
  const daemonSets = new DaemonSetController(
    store,
    deleter,
    (podSpec, node) => nodeMismatch(podSpec, node) === undefined,
  );
  const podsDef = findResource("", "v1", "pods");
  if (!podsDef) throw new Error("the pods resource is missing");
  const deployments = new DeploymentController(store, deleter, (namespace, pod) =>
    admit(podsDef, namespace, pod, store),
  );
  const api = new ApiServer({
    store,
    deleter,
    kubelet,
    token,
    logger: options.logger,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 10_000,
    ...(options.watchBufferLimitBytes === undefined ? {} : { watchBufferLimitBytes: options.watchBufferLimitBytes }),
  });
  const tls = servingCertificate(path.join(options.dataDir, "kube-pki"));
  const tokens = new ServiceAccountTokenController(store, tls.cert);
  const server = https.createServer({ key: tls.key, cert: tls.cert }, api.handle);
  server.requestTimeout = 0;
  const host = options.host ?? "127.0.0.1";
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve((server.address() as AddressInfo).port));
  });
  const url = `https://${host}:${port}`;
  const kubeconfigPath = options.kubeconfigPath ?? path.join(options.dataDir, "kubeconfig");
  mkdirSync(path.dirname(kubeconfigPath), { recursive: true });
  writeFileDurablySync(kubeconfigPath, kubeconfigText(url, tls.cert, token, options.namespaces?.[0] ?? "default"), {
    mode: 0o600,
  });
  options.logger.info("local Kubernetes API ready", { url, nodes: options.nodes.length, kubeconfig: kubeconfigPath });
  return {
    url,
    token,
    kubeconfigPath,
    store,
    api,
    images: options.images,
    syncNodes(owner, nodes) {
      const wanted = new Map(nodes.map((n) => [n.name, n]));
      for (const node of store.list("nodes", undefined, (n) => n.metadata.labels?.[NODE_OWNER_LABEL] === owner))
        if (!wanted.has(node.metadata.name)) deleter.delete("nodes", undefined, node.metadata.name);
      for (const spec of nodes)
        if (!store.get("nodes", undefined, spec.name))
          store.create("nodes", nodeObject({ ...spec, labels: { ...(spec.labels ?? {}), [NODE_OWNER_LABEL]: owner } }));
    },
    async stop() {
      jobs.stop();
      daemonSets.stop();
      deployments.stop();
      tokens.stop();
      scheduler.stop();
      kubelet.stop();
      api.closeWatches();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
