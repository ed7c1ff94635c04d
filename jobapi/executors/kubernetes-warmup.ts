import { createHash } from "node:crypto";
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Job, type V1Pod } from "@kubernetes/client-node";
import type { DatabaseCatalog } from "../../shared/databases/database-catalog.js";
import { NotFoundError } from "../../shared/errors.js";
import type { Logger } from "../../shared/logging/logger.js";
import {
  LABEL,
  labelValue,
  POD_PATHS,
  POD_USER,
  type ShardJobSettings,
  STORAGE_SECRET,
  WORKLOAD_IDENTITY_LABEL,
} from "./kubernetes-manifests.js";
import type { StorageConnection } from "../../shared/storage/storage-connection.js";

/** `app.kubernetes.io/managed-by` of warm-up Jobs (apart from shard Jobs, which the executor watches). */
export const WARMUP_MANAGED_BY = "blastplane-warmup";
const NODE_LABEL = "blastplane.io/node";
const HOSTNAME = "kubernetes.io/hostname";
/** Memory of a warm-up pod: it streams files, it does not hold them. */
const WARMUP_MEMORY = "256Mi";

/** One node's part of a warm-up. */
export interface NodeWarmup {
  node: string;
  state: "pending" | "running" | "succeeded" | "failed";
  bytes_done: number;
  bytes_total: number;
  files_done: number;
  files_total: number;
  /** Why the node failed (the pod's last log lines), when it did. */
  error?: string;
}

/** A warm-up of one release across the BLAST pool. */
export interface WarmupView {
  database: string;
  release: string;
  state: "running" | "succeeded" | "failed";
  nodes: NodeWarmup[];
}

export interface KubernetesWarmupOptions {
  kubeConfig: KubeConfig;
  catalog: Pick<DatabaseCatalog, "get">;
  settings: Pick<
    ShardJobSettings,
    | "namespace"
    | "image"
    | "nodeSelector"
    | "tolerations"
    | "dbCacheHostPath"
    | "ttlSecondsAfterFinished"
    | "activeDeadlineSeconds"
  >;
  /**
   * Where the pods read the release and the catalog: an Azurite connection string is written to the
   * Secret the shard pods read too (created or replaced before the first warm-up); with the managed
   * identity the pods get the account URLs and the workload identity's service account instead.
   */
  storage: StorageConnection;
  /** The workload identity's service account (identity-based storage only). */
  serviceAccountName?: string;
  logger: Logger;
}

/** A Job name per database, release and node: starting a warm-up twice finds the same Jobs. */
export function warmupJobName(database: string, release: string, node: string): string {
  return `bp-warm-${createHash("sha256").update(`${database}/${release}/${node}`).digest("hex").slice(0, 16)}`;
}

const selectorOf = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");

/** The warm-up Job of one node: pinned to it, filling its cache with the release (`warm.js`). */
export function buildWarmupJob(
  o: Pick<KubernetesWarmupOptions, "settings" | "storage" | "serviceAccountName">,
  database: string,
  version: string,
  node: string,
): V1Job {
  const { namespace } = o.settings;
  const identity = o.storage.kind === "identity" ? o.storage : undefined;
  const storageEnv = identity
    ? [
        { name: "SHARD_STORAGE_BLOB_URL", value: identity.blobUrl ?? "" },
        { name: "SHARD_STORAGE_TABLE_URL", value: identity.tableUrl ?? "" },
      ]
    : [
        {
          name: "SHARD_STORAGE_CONNECTION_STRING",
          valueFrom: { secretKeyRef: { name: STORAGE_SECRET.name, key: STORAGE_SECRET.key } },
        },
      ];
  const labels = {
    [LABEL.name]: "blastplane-warmup",
    [LABEL.managedBy]: WARMUP_MANAGED_BY,
    [LABEL.database]: labelValue(database),
    [LABEL.release]: version,
    [NODE_LABEL]: labelValue(node),
  };
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name: warmupJobName(database, version, node), namespace, labels },
    spec: {
      backoffLimit: 2,
      activeDeadlineSeconds: o.settings.activeDeadlineSeconds,
      ttlSecondsAfterFinished: o.settings.ttlSecondsAfterFinished,
      template: {
        metadata: { labels: identity ? { ...labels, [WORKLOAD_IDENTITY_LABEL]: "true" } : labels },
        spec: {
          ...(identity && o.serviceAccountName ? { serviceAccountName: o.serviceAccountName } : {}),
          restartPolicy: "Never",
          automountServiceAccountToken: false,
          nodeSelector: { ...o.settings.nodeSelector, [HOSTNAME]: node },
          tolerations: o.settings.tolerations,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: POD_USER.uid,
            runAsGroup: POD_USER.gid,
            fsGroup: POD_USER.gid,
            seccompProfile: { type: "RuntimeDefault" },
          },
          containers: [
            {
              name: "warm",
              image: o.settings.image,
              command: ["node", "--enable-source-maps", "dist/jobapi/warm.js"],
              env: [
                { name: "WARM_DB_NAME", value: database },
                { name: "WARM_DB_RELEASE", value: version },
                { name: "WARM_DB_CACHE_ROOT", value: POD_PATHS.dbCache },
                { name: "WARM_NODE", value: node },
                ...storageEnv,
              ],
              resources: { requests: { memory: WARMUP_MEMORY, cpu: "100m" }, limits: { memory: WARMUP_MEMORY } },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ["ALL"] },
              },
              terminationMessagePolicy: "FallbackToLogsOnError",
              volumeMounts: [{ name: "blastdb", mountPath: POD_PATHS.dbCache }],
            },
          ],
          volumes: [{ name: "blastdb", hostPath: { path: o.settings.dbCacheHostPath, type: "Directory" } }],
        },
      },
    },
  };
}

/**
 * Warm-up on the cluster: one `batch/v1` Job per node of the BLAST pool, pinned to its node
 * (`kubernetes.io/hostname`), whose pod fills that node's cache with the release (`warm.js`).
 * Progress per node comes from its Job's state and its pod's last `warm progress` log line.
 */
export function createKubernetesWarmup(o: KubernetesWarmupOptions) {
  const batch = o.kubeConfig.makeApiClient(BatchV1Api);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const { namespace } = o.settings;
  let secretWritten: Promise<void> | undefined;

  const statusOf = (error: unknown) => (error as { code?: number }).code;

  function writeSecret(): Promise<void> {
    if (o.storage.kind !== "connection-string") return Promise.resolve();
    const { connectionString } = o.storage;
    secretWritten ??= (async () => {
      const body = {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: STORAGE_SECRET.name, namespace },
        type: "Opaque",
        stringData: { [STORAGE_SECRET.key]: connectionString },
      };
      try {
        await core.createNamespacedSecret({ namespace, body });
      } catch (error) {
        if (statusOf(error) !== 409) throw error;
        await core.replaceNamespacedSecret({ name: STORAGE_SECRET.name, namespace, body });
      }
    })().catch((error: unknown) => {
      secretWritten = undefined;
      throw error;
    });
    return secretWritten;
  }

  async function release(database: string): Promise<string> {
    const entry = await o.catalog.get(database);
    if (!entry) throw new NotFoundError(`database '${database}' is not prepared`);
    return entry.manifest.version;
  }

  /** The last `warm progress` line of a pod's log (one small read per running node). */
  async function progressOf(pod: V1Pod | undefined): Promise<Partial<NodeWarmup>> {
    if (!pod?.metadata?.name || pod.status?.phase === "Pending") return {};
    try {
      const log = String(
        await core.readNamespacedPodLog({ name: pod.metadata.name, namespace, tailLines: 5, limitBytes: 16 * 1024 }),
      );
      for (const line of log.trimEnd().split("\n").reverse()) {
        if (!line.includes('"warm progress"')) continue;
        const p = JSON.parse(line) as Record<string, number>;
        return {
          bytes_done: p.bytes_done ?? 0,
          bytes_total: p.bytes_total ?? 0,
          files_done: p.files_done ?? 0,
          files_total: p.files_total ?? 0,
        };
      }
    } catch {
      // A log that cannot be read yet shows no progress.
    }
    return {};
  }

  async function view(database: string, version: string): Promise<WarmupView | undefined> {
    const selector = selectorOf({
      [LABEL.managedBy]: WARMUP_MANAGED_BY,
      [LABEL.database]: labelValue(database),
      [LABEL.release]: version,
    });
    const [jobs, pods] = await Promise.all([
      batch.listNamespacedJob({ namespace, labelSelector: selector }),
      core.listNamespacedPod({ namespace, labelSelector: selector }),
    ]);
    if (jobs.items.length === 0) return undefined;
    const nodes: NodeWarmup[] = [];
    for (const job of jobs.items) {
      const node = String(job.spec?.template.spec?.nodeSelector?.[HOSTNAME] ?? "");
      const mine = pods.items.filter(
        (p) =>
          p.metadata?.labels?.["batch.kubernetes.io/job-name"] === job.metadata?.name ||
          p.metadata?.labels?.["job-name"] === job.metadata?.name,
      );
      const latest = mine.sort((a, b) =>
        String(b.metadata?.creationTimestamp ?? "").localeCompare(String(a.metadata?.creationTimestamp ?? "")),
      )[0];
      const done = job.status?.conditions?.find(
        (c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True",
      )?.type;
      const state: NodeWarmup["state"] =
        done === "Complete"
          ? "succeeded"
          : done === "Failed"
            ? "failed"
            : latest?.status?.phase === "Running"
              ? "running"
              : "pending";
      const progress = await progressOf(latest);
      const entry: NodeWarmup = {
        node,
        state,
        bytes_done: 0,
        bytes_total: 0,
        files_done: 0,
        files_total: 0,
        ...progress,
      };
      if (state === "succeeded") entry.bytes_done = entry.bytes_total;
      if (state === "failed")
        entry.error =
          latest?.status?.containerStatuses?.[0]?.state?.terminated?.message?.trim().slice(-1024) ??
          String(job.status?.conditions?.find((c) => c.type === "Failed")?.message ?? "failed");
      nodes.push(entry);
    }
    nodes.sort((a, b) => a.node.localeCompare(b.node));
    const state = nodes.some((n) => n.state === "failed")
      ? "failed"
      : nodes.every((n) => n.state === "succeeded")
        ? "succeeded"
        : "running";
    return { database, release: version, state, nodes };
  }

  return {
    /**
     * Starts warming the current release of `database` on every node of the BLAST pool (a Job per
     * node; one that exists already is kept, so a second start changes nothing). Answers the view.
     */
    async start(database: string): Promise<WarmupView> {
      const version = await release(database);
      await writeSecret();
      const nodes = await core.listNode({ labelSelector: selectorOf(o.settings.nodeSelector) });
      for (const node of nodes.items) {
        const name = String(node.metadata?.name);
        try {
          await batch.createNamespacedJob({ namespace, body: buildWarmupJob(o, database, version, name) });
        } catch (error) {
          if (statusOf(error) !== 409) throw error;
        }
      }
      o.logger.info("database warm-up started", { database, release: version, nodes: nodes.items.length });
      return (await view(database, version)) ?? { database, release: version, state: "succeeded", nodes: [] };
    },

    /** The warm-up of the current release of `database`, node by node (404 when none was started). */
    async status(database: string): Promise<WarmupView> {
      const version = await release(database);
      const found = await view(database, version);
      if (!found) throw new NotFoundError(`no warm-up of database '${database}' release ${version} was started`);
      return found;
    },
  };
}

export type KubernetesWarmup = ReturnType<typeof createKubernetesWarmup>;
