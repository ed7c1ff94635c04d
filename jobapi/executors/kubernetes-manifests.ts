import path from "node:path";
import type { V1Job, V1Toleration } from "@kubernetes/client-node";
import { DATABASE_NAME } from "../../shared/blast/database-builder.js";
import { RELEASE_NAME } from "../../shared/databases/ncbi-source.js";
import { cpuQuantity, memoryQuantity } from "../../shared/cluster/quantity.js";
import type { ShardSpec } from "./executor.js";

/** Labels every shard Job and its pods carry; one selector finds all of a job's shards. */
export const LABEL = {
  name: "app.kubernetes.io/name",
  managedBy: "app.kubernetes.io/managed-by",
  jobId: "blastplane.io/job-id",
  shard: "blastplane.io/shard",
  attempt: "blastplane.io/attempt",
  database: "blastplane.io/database",
  release: "blastplane.io/release",
} as const;

/** `app.kubernetes.io/managed-by` of shard Jobs: the executor lists and watches exactly these. */
export const MANAGED_BY = "blastplane-jobapi";

/** Where the pod sees the node-local database cache and its scratch folder. */
export const POD_PATHS = {
  dbCache: "/blast/db",
  scratch: "/scratch",
  query: "/scratch/query.fa",
  output: "/scratch/out.xml",
} as const;

/** The shard worker's entrypoint in the job API image. */
export const SHARD_COMMAND = ["node", "--enable-source-maps", "dist/jobapi/shard.js"];

/**
 * The user and group shard and warm-up pods run as: the job API image's `USER 1000:1000`
 * (jobapi/Dockerfile) and infra/k8s/jobapi.yaml's `runAsUser`. Their hostPath database cache must be
 * writable by it (the shard fills it).
 */
export const POD_USER = { uid: 1000, gid: 1000 } as const;

/** Name of the Secret holding the shard worker's storage connection (the local Azurite only; in Azure the pod uses its workload identity). */
export const STORAGE_SECRET = { name: "blastplane-shard-storage", key: "connection-string" } as const;

/** What every shard Job of this deployment shares. */
export interface ShardJobSettings {
  namespace: string;
  image: string;
  nodeSelector: Record<string, string>;
  tolerations: V1Toleration[];
  backoffLimit: number;
  activeDeadlineSeconds: number;
  ttlSecondsAfterFinished: number;
  /** BLAST's working set and the worker's own memory, on top of the database bytes to cache. */
  workingSetBytes: number;
  /** The node-local database cache: `<root>/<database>/<release>/`, which the shard's init step fills. */
  dbCacheHostPath: string;
  /**
   * With identity-based storage: the pod runs as this service account (federated with the
   * user-assigned identity through its `azure.workload.identity/client-id` annotation), is
   * labelled `azure.workload.identity/use: "true"` so the webhook projects the identity token and
   * sets `AZURE_CLIENT_ID`/`AZURE_TENANT_ID`/`AZURE_FEDERATED_TOKEN_FILE`, and reaches Blob storage
   * at this URL. Without it, the worker reads the Azurite connection string from {@link STORAGE_SECRET}.
   */
  workloadIdentity?: { serviceAccountName: string; blobUrl: string };
}

/** The pod label that asks the Azure Workload Identity webhook to inject the identity's token and env. */
export const WORKLOAD_IDENTITY_LABEL = "azure.workload.identity/use";

/** A Job name per shard and attempt: the same shard and attempt always name the same Job. */
export function shardJobName(jobId: string, shardId: string, attempt: number): string {
  return `bp-${jobId}-${shardId}-a${attempt}`.toLowerCase();
}

/** A label value (≤ 63 characters, alphanumeric at both ends) from any text. */
export function labelValue(text: string): string {
  return text
    .replace(/[^A-Za-z0-9_.-]/g, "-")
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, "");
}

/** Replaces the value after `flag` in an argv (the job API's local paths become the pod's). */
function withFlag(args: readonly string[], flag: string, value: string): string[] {
  const out = [...args];
  const i = out.indexOf(flag);
  if (i < 0 || i + 1 >= out.length) throw new Error(`shard argv has no ${flag}`);
  out[i + 1] = value;
  return out;
}

/** Memory a shard's pod requests and is limited to: the pre-flight's bytes plus the working set. */
export function shardMemoryBytes(spec: ShardSpec, settings: Pick<ShardJobSettings, "workingSetBytes">): number {
  return (spec.memoryBytes ?? 0) + settings.workingSetBytes;
}

/**
 * The `batch/v1` Job of one shard attempt. Its pod runs the shard worker with BLAST's argv as
 * the job API built it (only the query and output paths become the pod's), requests the memory
 * the pre-flight computed plus the working set (and is limited to it) and one CPU per thread, runs
 * on the BLAST pool (node selector, toleration), non-root with a read-only root filesystem,
 * `seccompProfile: RuntimeDefault`, no privilege escalation, no capabilities and no
 * service-account token; a failed container's log tail becomes its termination message.
 */
export function buildShardJob(spec: ShardSpec, settings: ShardJobSettings): V1Job {
  if (spec.attempt === undefined || spec.batch === undefined || !spec.database)
    throw new Error("a cluster shard needs its attempt, batch and database");
  const name = shardJobName(spec.jobId, spec.shardId, spec.attempt);
  const labels = {
    [LABEL.name]: "blastplane-shard",
    [LABEL.managedBy]: MANAGED_BY,
    [LABEL.jobId]: spec.jobId,
    [LABEL.shard]: spec.shardId,
    [LABEL.attempt]: String(spec.attempt),
    [LABEL.database]: labelValue(spec.database.name),
    [LABEL.release]: spec.database.version,
  };
  const args = withFlag(withFlag(spec.args, "-query", POD_PATHS.query), "-out", POD_PATHS.output);
  const memory = memoryQuantity(shardMemoryBytes(spec, settings));
  const env = [
    { name: "SHARD_JOB_ID", value: spec.jobId },
    { name: "SHARD_ID", value: spec.shardId },
    { name: "SHARD_BATCH", value: String(spec.batch) },
    { name: "SHARD_DB_CACHE_ROOT", value: POD_PATHS.dbCache },
    { name: "SHARD_DB_NAME", value: spec.database.name },
    { name: "SHARD_DB_RELEASE", value: spec.database.version },
    { name: "SHARD_QUERY_FILE", value: POD_PATHS.query },
    { name: "SHARD_OUTPUT_FILE", value: POD_PATHS.output },
    { name: "TMPDIR", value: POD_PATHS.scratch },
    settings.workloadIdentity
      ? { name: "SHARD_STORAGE_BLOB_URL", value: settings.workloadIdentity.blobUrl }
      : {
          name: "SHARD_STORAGE_CONNECTION_STRING",
          valueFrom: { secretKeyRef: { name: STORAGE_SECRET.name, key: STORAGE_SECRET.key } },
        },
  ];
  const podLabels = settings.workloadIdentity ? { ...labels, [WORKLOAD_IDENTITY_LABEL]: "true" } : labels;
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, namespace: settings.namespace, labels },
    spec: {
      backoffLimit: settings.backoffLimit,
      activeDeadlineSeconds: settings.activeDeadlineSeconds,
      ttlSecondsAfterFinished: settings.ttlSecondsAfterFinished,
      completions: 1,
      parallelism: 1,
      template: {
        metadata: { labels: podLabels },
        spec: {
          restartPolicy: "Never",
          // The workload identity webhook mounts its own projected token (audience
          // api://AzureADTokenExchange); the API server's token is never needed.
          automountServiceAccountToken: false,
          ...(settings.workloadIdentity ? { serviceAccountName: settings.workloadIdentity.serviceAccountName } : {}),
          nodeSelector: settings.nodeSelector,
          tolerations: settings.tolerations,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: POD_USER.uid,
            runAsGroup: POD_USER.gid,
            fsGroup: POD_USER.gid,
            seccompProfile: { type: "RuntimeDefault" },
          },
          containers: [
            {
              name: "shard",
              image: settings.image,
              command: SHARD_COMMAND,
              args: [spec.program, ...args],
              env,
              resources: { requests: { memory, cpu: cpuQuantity(spec.threads ?? 1) }, limits: { memory } },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ["ALL"] },
              },
              terminationMessagePolicy: "FallbackToLogsOnError",
              volumeMounts: [
                // Writable: the worker's init step fills the node's cache before BLAST reads it.
                { name: "blastdb", mountPath: POD_PATHS.dbCache },
                { name: "scratch", mountPath: POD_PATHS.scratch },
              ],
            },
          ],
          volumes: [
            { name: "blastdb", hostPath: { path: settings.dbCacheHostPath, type: "Directory" } },
            { name: "scratch", emptyDir: {} },
          ],
        },
      },
    },
  };
}

/**
 * The node-local folder of a database release: `<cache root>/<database>/<release>/`, which the
 * shard's init step fills from the published release and verifies.
 */
export function releaseFolder(cacheRoot: string, database: string, release: string): string {
  if (!DATABASE_NAME.test(database) || !RELEASE_NAME.test(release) || database === "." || database === "..")
    throw new Error("invalid database or release name");
  return path.join(path.resolve(cacheRoot), database, release);
}
