import os from "node:os";
import path from "node:path";
import { z } from "zod";

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

const schema = z.object({
  JOBAPI_PORT: int(0, 65535).default(8080),
  JOBAPI_HOST: z.string().min(1).default("127.0.0.1"),
  JOBAPI_STORAGE_CONNECTION_STRING: z.string().min(1, "JOBAPI_STORAGE_CONNECTION_STRING is required"),
  JOBAPI_DATA_DIR: z.string().min(1).default(".data/jobapi"),
  JOBAPI_DATABASES_DIR: z.string().min(1).optional(),
  JOBAPI_SECRETS_DIR: z.string().min(1).optional(),
  JOBAPI_KEY_VAULT_URL: z.preprocess((v) => (v === "" ? undefined : v), z.url().optional()),
  JOBAPI_EXECUTOR: z.enum(["local", "kubernetes"]).default("local"),
  JOBAPI_K8S_NAMESPACE: z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "a namespace name").default("blastplane"),
  JOBAPI_K8S_IMAGE: z.string().min(1).default("blastplane-jobapi:local"),
  JOBAPI_K8S_NODE_SELECTOR: z.string().default("blastplane.io/pool=blast"),
  JOBAPI_K8S_TOLERATIONS: z.string().default("blastplane.io/pool=blast:NoSchedule"),
  JOBAPI_K8S_BACKOFF_LIMIT: int(0, 10).default(1),
  JOBAPI_K8S_ACTIVE_DEADLINE_SECONDS: int(1, 7 * 24 * 3600).default(6 * 3600),
  JOBAPI_K8S_TTL_SECONDS_AFTER_FINISHED: int(0, 30 * 24 * 3600).default(3600),
  JOBAPI_K8S_WORKING_SET_BYTES: z.coerce.number().int().min(0).default(512 * 1024 ** 2),
  JOBAPI_K8S_DB_CACHE_DIR: z.string().min(1).optional(),
  JOBAPI_K8S_MAX_JOBS: int(1, 10_000).default(16),
  JOBAPI_K8S_MAX_JOBS_PER_SEARCH: int(1, 10_000).default(8),
  JOBAPI_K8S_SCHEDULE_TIMEOUT_SECONDS: int(1, 24 * 3600).default(600),
  JOBAPI_MAX_ACTIVE_JOBS: int(1, 1000).default(2),
  JOBAPI_MAX_QUEUED_JOBS: int(1, 100_000).default(100),
  JOBAPI_RETRY_AFTER_SECONDS: int(1, 3600).default(30),
  JOBAPI_SHARD_CONCURRENCY: int(1, 512).default(os.availableParallelism()),
  JOBAPI_THREADS_PER_SHARD: z.union([z.literal("auto"), int(1, 64)]).default("auto"),
  JOBAPI_SHARD_ATTEMPTS: int(1, 10).default(2),
  JOBAPI_NODE_MEMORY_BYTES: z.coerce.number().int().positive().default(os.totalmem()),
  JOBAPI_MEMORY_MARGIN_BYTES: z.coerce.number().int().min(0).default(2 * 1024 ** 3),
  JOBAPI_BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(12 * 1024 * 1024),
  JOBAPI_DISPATCH_LEASE_SECONDS: int(2, 3600).default(60),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
});

export interface JobApiConfig {
  readonly port: number;
  readonly host: string;
  readonly storageConnectionString: string;
  readonly databasesDir: string;
  readonly secretsDir: string;
  /** Key Vault holding the API token (Azure); wins over `secretsDir`. */
  readonly keyVaultUrl: string | undefined;
  readonly workDir: string;
  readonly executor: "local" | "kubernetes";
  /** The Kubernetes executor's settings (used when `executor` is "kubernetes"). */
  readonly kubernetes: KubernetesSettings;
  readonly maxActiveJobs: number;
  readonly maxQueuedJobs: number;
  readonly retryAfterSeconds: number;
  readonly shardConcurrency: number;
  /** `-num_threads` per shard, or "auto" (see shardThreads). */
  readonly threadsPerShard: number | "auto";
  readonly shardAttempts: number;
  readonly nodeMemoryBytes: number;
  readonly memoryMarginBytes: number;
  readonly bodyLimitBytes: number;
  /** How long the dispatch lease outlives its holder's last renewal (see DispatchLease). */
  readonly dispatchLeaseSeconds: number;
  readonly logLevel: "debug" | "info" | "warn" | "error";
}

/** Shard Jobs on the cluster (`JOBAPI_K8S_*`). */
export interface KubernetesSettings {
  readonly namespace: string;
  readonly image: string;
  readonly nodeSelector: Readonly<Record<string, string>>;
  readonly tolerations: readonly { key: string; operator: "Equal" | "Exists"; value?: string; effect: string }[];
  readonly backoffLimit: number;
  readonly activeDeadlineSeconds: number;
  readonly ttlSecondsAfterFinished: number;
  readonly workingSetBytes: number;
  /** Node-local database cache (a hostPath): `<dir>/<database>/<release>/`. */
  readonly dbCacheDir: string;
  readonly maxJobs: number;
  readonly maxJobsPerSearch: number;
  readonly scheduleTimeoutSeconds: number;
}

const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** `k=v,k2=v2`; a key given twice is refused (a Job template would silently keep only one). */
function parseNodeSelector(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [key = "", value = "", ...rest] = pair.split("=");
    if (rest.length > 0 || !LABEL_KEY.test(key) || !LABEL_VALUE.test(value)) throw new Error(`JOBAPI_K8S_NODE_SELECTOR: "${pair}" is not key=value`);
    if (key in out) throw new Error(`JOBAPI_K8S_NODE_SELECTOR: the key ${key} is given twice`);
    out[key] = value;
  }
  return out;
}

/** `key=value:Effect` (Equal) or `key:Effect` (Exists), comma-separated. */
function parseTolerations(text: string): KubernetesSettings["tolerations"] {
  return text
    .split(",")
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const m = /^([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$/.exec(t);
      if (!m || !LABEL_KEY.test(m[1] ?? "")) throw new Error(`JOBAPI_K8S_TOLERATIONS: "${t}" is not key=value:Effect or key:Effect`);
      return m[2] === undefined ? { key: m[1] as string, operator: "Exists" as const, effect: m[3] as string } : { key: m[1] as string, operator: "Equal" as const, value: m[2], effect: m[3] as string };
    });
}

/** The job API's one validated configuration; fails fast on a bad value. */
export function loadJobApiConfig(env: Record<string, string | undefined>, cwd = process.cwd()): JobApiConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid job API configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  const c = parsed.data;
  const dataDir = path.resolve(cwd, c.JOBAPI_DATA_DIR);
  return Object.freeze({
    port: c.JOBAPI_PORT,
    host: c.JOBAPI_HOST,
    storageConnectionString: c.JOBAPI_STORAGE_CONNECTION_STRING,
    databasesDir: path.resolve(cwd, c.JOBAPI_DATABASES_DIR ?? path.join(dataDir, "databases")),
    secretsDir: path.resolve(cwd, c.JOBAPI_SECRETS_DIR ?? path.join(dataDir, "secrets")),
    keyVaultUrl: c.JOBAPI_KEY_VAULT_URL,
    workDir: path.join(dataDir, "work"),
    executor: c.JOBAPI_EXECUTOR,
    kubernetes: Object.freeze({
      namespace: c.JOBAPI_K8S_NAMESPACE,
      image: c.JOBAPI_K8S_IMAGE,
      nodeSelector: parseNodeSelector(c.JOBAPI_K8S_NODE_SELECTOR),
      tolerations: parseTolerations(c.JOBAPI_K8S_TOLERATIONS),
      backoffLimit: c.JOBAPI_K8S_BACKOFF_LIMIT,
      activeDeadlineSeconds: c.JOBAPI_K8S_ACTIVE_DEADLINE_SECONDS,
      ttlSecondsAfterFinished: c.JOBAPI_K8S_TTL_SECONDS_AFTER_FINISHED,
      workingSetBytes: c.JOBAPI_K8S_WORKING_SET_BYTES,
      dbCacheDir: path.resolve(cwd, c.JOBAPI_K8S_DB_CACHE_DIR ?? c.JOBAPI_DATABASES_DIR ?? path.join(dataDir, "databases")),
      maxJobs: c.JOBAPI_K8S_MAX_JOBS,
      maxJobsPerSearch: c.JOBAPI_K8S_MAX_JOBS_PER_SEARCH,
      scheduleTimeoutSeconds: c.JOBAPI_K8S_SCHEDULE_TIMEOUT_SECONDS,
    }),
    maxActiveJobs: c.JOBAPI_MAX_ACTIVE_JOBS,
    maxQueuedJobs: c.JOBAPI_MAX_QUEUED_JOBS,
    retryAfterSeconds: c.JOBAPI_RETRY_AFTER_SECONDS,
    shardConcurrency: c.JOBAPI_SHARD_CONCURRENCY,
    threadsPerShard: c.JOBAPI_THREADS_PER_SHARD,
    shardAttempts: c.JOBAPI_SHARD_ATTEMPTS,
    nodeMemoryBytes: c.JOBAPI_NODE_MEMORY_BYTES,
    memoryMarginBytes: c.JOBAPI_MEMORY_MARGIN_BYTES,
    bodyLimitBytes: c.JOBAPI_BODY_LIMIT_BYTES,
    dispatchLeaseSeconds: c.JOBAPI_DISPATCH_LEASE_SECONDS,
    logLevel: c.LOG_LEVEL,
  });
}
