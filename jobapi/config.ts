import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { entraDiscoveryUrl } from "../shared/auth/jwt-validator.js";
import { DEFAULT_FLEET, FLEET_PATTERN } from "../shared/jobs/model.js";
import {
  type Env,
  envEnum,
  envInt,
  envParsed,
  envPort,
  envUrl,
  LOG_LEVELS,
  type LogLevel,
  parseEnv,
} from "../shared/config/env.js";
import {
  checkStorageSettings,
  JOBAPI_STORAGE_SETTINGS,
  type StorageConnection,
  storageConnectionFromSettings,
  storageSettingsShape,
  withLegacyConnectionString,
} from "../shared/storage/storage-connection.js";

export interface JobApiConfig {
  readonly port: number;
  readonly host: string;
  /** Job state (Tables) and artifacts (Blobs): Azurite by connection string, or account URLs with the workload identity. */
  readonly storage: StorageConnection;
  /**
   * The Azurite connection string (local mode only).
   * @deprecated Open storage through `storage`; with the workload identity reading this throws.
   */
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
  /** A streak of `streak` 429s within `windowSeconds` records one `queue.saturated` event. */
  readonly saturation: { readonly streak: number; readonly windowSeconds: number };
  readonly shardConcurrency: number;
  /** `-num_threads` per shard, or "auto" (see shardThreads). */
  readonly threadsPerShard: number | "auto";
  readonly shardAttempts: number;
  readonly nodeMemoryBytes: number;
  readonly memoryMarginBytes: number;
  readonly bodyLimitBytes: number;
  /** How long the dispatch lease outlives its holder's last renewal (see DispatchLease). */
  readonly dispatchLeaseSeconds: number;
  /** The jobs this job API runs: those a job API of its fleet accepted (docs/decisions/0026-dispatch-fleets.md). */
  readonly dispatchFleet: string;
  readonly logLevel: LogLevel;
  /** The browser terminal (decision 0020); off (503) without `auth`. */
  readonly terminal: TerminalSettings;
}

/** The browser terminal's settings (`JOBAPI_AUTH_*`, `JOBAPI_TERMINAL_*`). */
export interface TerminalSettings {
  /** How the job API validates the browser's access token: the dashboard's app registration. */
  readonly auth: { readonly clientId: string; readonly discoveryUrl: string } | undefined;
  readonly allowedOrigins: readonly string[];
  /** The PTY daemon's port on 127.0.0.1. */
  readonly daemonPort: number;
  readonly idleTimeoutSeconds: number;
  readonly maxSessionSeconds: number;
  readonly maxSessionsPerUser: number;
  readonly maxMessageBytes: number;
  readonly bufferBytes: number;
}

/** `https://a.example,http://127.0.0.1:4280`: exact origins, no paths. */
function parseOrigins(text: string): string[] {
  return text
    .split(",")
    .map((o) => o.trim())
    .filter(Boolean)
    .map((o) => {
      const url = new URL(o);
      if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== o.replace(/\/$/, ""))
        throw new Error(`"${o}" is not an origin (scheme://host[:port])`);
      return url.origin;
    });
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
  /** The shard pods' service account, federated with the workload identity (used with identity-based storage). */
  readonly serviceAccountName: string;
}

const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** `k=v,k2=v2`; a key given twice is refused (a Job template would silently keep only one). */
function parseNodeSelector(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [key = "", value = "", ...rest] = pair.split("=");
    if (rest.length > 0 || !LABEL_KEY.test(key) || !LABEL_VALUE.test(value))
      throw new Error(`"${pair}" is not key=value`);
    if (key in out) throw new Error(`the key ${key} is given twice`);
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
      if (!m || !LABEL_KEY.test(m[1] ?? "")) throw new Error(`"${t}" is not key=value:Effect or key:Effect`);
      return m[2] === undefined
        ? { key: m[1] as string, operator: "Exists" as const, effect: m[3] as string }
        : { key: m[1] as string, operator: "Equal" as const, value: m[2], effect: m[3] as string };
    });
}

/** The job API's settings (environment names), read by {@link loadJobApiConfig} and the configuration reference. */
export const jobApiSettingsSchema = z
  .object({
    JOBAPI_PORT: envPort().default(8080),
    JOBAPI_HOST: z.string().default("127.0.0.1"),
    // A connection string (Azurite only) or the account's name or URLs (the workload identity).
    ...storageSettingsShape(JOBAPI_STORAGE_SETTINGS),
    JOBAPI_DATA_DIR: z.string().default(".data/jobapi"),
    JOBAPI_DATABASES_DIR: z.string().optional(),
    JOBAPI_SECRETS_DIR: z.string().optional(),
    JOBAPI_KEY_VAULT_URL: envUrl().optional(),
    JOBAPI_EXECUTOR: envEnum(["local", "kubernetes"]).default("local"),
    JOBAPI_K8S_NAMESPACE: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a namespace name")
      .default("blastplane"),
    JOBAPI_K8S_IMAGE: z.string().default("blastplane-jobapi:local"),
    JOBAPI_K8S_NODE_SELECTOR: envParsed(parseNodeSelector).default(parseNodeSelector("blastplane.io/pool=blast")),
    JOBAPI_K8S_TOLERATIONS: envParsed(parseTolerations).default(
      parseTolerations("blastplane.io/pool=blast:NoSchedule"),
    ),
    JOBAPI_K8S_BACKOFF_LIMIT: envInt(0, 10).default(1),
    JOBAPI_K8S_ACTIVE_DEADLINE_SECONDS: envInt(1, 7 * 24 * 3600).default(6 * 3600),
    JOBAPI_K8S_TTL_SECONDS_AFTER_FINISHED: envInt(0, 30 * 24 * 3600).default(3600),
    JOBAPI_K8S_WORKING_SET_BYTES: envInt(0, Number.MAX_SAFE_INTEGER).default(512 * 1024 ** 2),
    JOBAPI_K8S_DB_CACHE_DIR: z.string().optional(),
    JOBAPI_K8S_MAX_JOBS: envInt(1, 10_000).default(16),
    JOBAPI_K8S_MAX_JOBS_PER_SEARCH: envInt(1, 10_000).default(8),
    JOBAPI_K8S_SCHEDULE_TIMEOUT_SECONDS: envInt(1, 24 * 3600).default(600),
    JOBAPI_K8S_SERVICE_ACCOUNT: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, "must be a service account name")
      .default("blastplane-shard"),
    JOBAPI_MAX_ACTIVE_JOBS: envInt(1, 1000).default(2),
    JOBAPI_MAX_QUEUED_JOBS: envInt(1, 100_000).default(100),
    JOBAPI_RETRY_AFTER_SECONDS: envInt(1, 3600).default(30),
    // A streak of this many 429s within the window is one `queue.saturated` event.
    JOBAPI_SATURATION_STREAK: envInt(1, 100_000).default(5),
    JOBAPI_SATURATION_WINDOW_SECONDS: envInt(1, 24 * 3600).default(60),
    JOBAPI_SHARD_CONCURRENCY: envInt(1, 512).default(os.availableParallelism()),
    JOBAPI_THREADS_PER_SHARD: z
      .string()
      .refine(
        (value) => value === "auto" || (/^\d+$/.test(value) && Number(value) >= 1 && Number(value) <= 64),
        "must be auto or a whole number from 1 to 64",
      )
      .transform((value): number | "auto" => (value === "auto" ? "auto" : Number(value)))
      .default("auto"),
    JOBAPI_SHARD_ATTEMPTS: envInt(1, 10).default(2),
    JOBAPI_NODE_MEMORY_BYTES: envInt(1, Number.MAX_SAFE_INTEGER).default(os.totalmem()),
    JOBAPI_MEMORY_MARGIN_BYTES: envInt(0, Number.MAX_SAFE_INTEGER).default(2 * 1024 ** 3),
    JOBAPI_BODY_LIMIT_BYTES: envInt(1024, 64 * 1024 * 1024).default(12 * 1024 * 1024),
    JOBAPI_DISPATCH_LEASE_SECONDS: envInt(2, 3600).default(60),
    JOBAPI_DISPATCH_FLEET: z
      .string()
      .regex(FLEET_PATTERN, "must be a DNS label (lowercase letters, digits and '-', at most 63)")
      .default(DEFAULT_FLEET),
    LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
    // The browser terminal: the dashboard's app registration, to validate the browser's token.
    JOBAPI_AUTH_CLIENT_ID: z.string().min(1).optional(),
    JOBAPI_AUTH_TENANT_ID: z.string().min(1).optional(),
    JOBAPI_AUTH_DISCOVERY_URL: envUrl().optional(),
    JOBAPI_TERMINAL_ALLOWED_ORIGINS: envParsed(parseOrigins).default([]),
    JOBAPI_TERMINAL_DAEMON_PORT: envPort().default(7681),
    JOBAPI_TERMINAL_IDLE_TIMEOUT_SECONDS: envInt(10, 24 * 3600).default(900),
    JOBAPI_TERMINAL_MAX_SESSION_SECONDS: envInt(60, 24 * 3600).default(3600),
    JOBAPI_TERMINAL_MAX_SESSIONS_PER_USER: envInt(1, 100).default(2),
    JOBAPI_TERMINAL_MAX_MESSAGE_BYTES: envInt(1024, 16 * 1024 * 1024).default(1024 * 1024),
    JOBAPI_TERMINAL_BUFFER_BYTES: envInt(16 * 1024, 64 * 1024 * 1024).default(1024 * 1024),
  })
  .superRefine(...checkStorageSettings(JOBAPI_STORAGE_SETTINGS));

/** The job API's one validated configuration; throws `ConfigError` naming every bad setting. */
export function loadJobApiConfig(env: Env, cwd = process.cwd()): JobApiConfig {
  return parseEnv(jobApiSettingsSchema, env, (c) => {
    const dataDir = path.resolve(cwd, c.JOBAPI_DATA_DIR);
    return withLegacyConnectionString({
      port: c.JOBAPI_PORT,
      host: c.JOBAPI_HOST,
      storage: storageConnectionFromSettings(c, JOBAPI_STORAGE_SETTINGS),
      databasesDir: path.resolve(cwd, c.JOBAPI_DATABASES_DIR ?? path.join(dataDir, "databases")),
      secretsDir: path.resolve(cwd, c.JOBAPI_SECRETS_DIR ?? path.join(dataDir, "secrets")),
      keyVaultUrl: c.JOBAPI_KEY_VAULT_URL,
      workDir: path.join(dataDir, "work"),
      executor: c.JOBAPI_EXECUTOR,
      kubernetes: {
        namespace: c.JOBAPI_K8S_NAMESPACE,
        image: c.JOBAPI_K8S_IMAGE,
        nodeSelector: c.JOBAPI_K8S_NODE_SELECTOR,
        tolerations: c.JOBAPI_K8S_TOLERATIONS,
        backoffLimit: c.JOBAPI_K8S_BACKOFF_LIMIT,
        activeDeadlineSeconds: c.JOBAPI_K8S_ACTIVE_DEADLINE_SECONDS,
        ttlSecondsAfterFinished: c.JOBAPI_K8S_TTL_SECONDS_AFTER_FINISHED,
        workingSetBytes: c.JOBAPI_K8S_WORKING_SET_BYTES,
        dbCacheDir: path.resolve(
          cwd,
          c.JOBAPI_K8S_DB_CACHE_DIR ?? c.JOBAPI_DATABASES_DIR ?? path.join(dataDir, "databases"),
        ),
        maxJobs: c.JOBAPI_K8S_MAX_JOBS,
        maxJobsPerSearch: c.JOBAPI_K8S_MAX_JOBS_PER_SEARCH,
        scheduleTimeoutSeconds: c.JOBAPI_K8S_SCHEDULE_TIMEOUT_SECONDS,
        serviceAccountName: c.JOBAPI_K8S_SERVICE_ACCOUNT,
      },
      maxActiveJobs: c.JOBAPI_MAX_ACTIVE_JOBS,
      maxQueuedJobs: c.JOBAPI_MAX_QUEUED_JOBS,
      retryAfterSeconds: c.JOBAPI_RETRY_AFTER_SECONDS,
      saturation: { streak: c.JOBAPI_SATURATION_STREAK, windowSeconds: c.JOBAPI_SATURATION_WINDOW_SECONDS },
      shardConcurrency: c.JOBAPI_SHARD_CONCURRENCY,
      threadsPerShard: c.JOBAPI_THREADS_PER_SHARD,
      shardAttempts: c.JOBAPI_SHARD_ATTEMPTS,
      nodeMemoryBytes: c.JOBAPI_NODE_MEMORY_BYTES,
      memoryMarginBytes: c.JOBAPI_MEMORY_MARGIN_BYTES,
      bodyLimitBytes: c.JOBAPI_BODY_LIMIT_BYTES,
      dispatchLeaseSeconds: c.JOBAPI_DISPATCH_LEASE_SECONDS,
      dispatchFleet: c.JOBAPI_DISPATCH_FLEET,
      logLevel: c.LOG_LEVEL,
      terminal: {
        auth:
          c.JOBAPI_AUTH_CLIENT_ID && (c.JOBAPI_AUTH_DISCOVERY_URL || c.JOBAPI_AUTH_TENANT_ID)
            ? {
                clientId: c.JOBAPI_AUTH_CLIENT_ID,
                discoveryUrl: c.JOBAPI_AUTH_DISCOVERY_URL ?? entraDiscoveryUrl(c.JOBAPI_AUTH_TENANT_ID ?? ""),
              }
            : undefined,
        allowedOrigins: c.JOBAPI_TERMINAL_ALLOWED_ORIGINS,
        daemonPort: c.JOBAPI_TERMINAL_DAEMON_PORT,
        idleTimeoutSeconds: c.JOBAPI_TERMINAL_IDLE_TIMEOUT_SECONDS,
        maxSessionSeconds: c.JOBAPI_TERMINAL_MAX_SESSION_SECONDS,
        maxSessionsPerUser: c.JOBAPI_TERMINAL_MAX_SESSIONS_PER_USER,
        maxMessageBytes: c.JOBAPI_TERMINAL_MAX_MESSAGE_BYTES,
        bufferBytes: c.JOBAPI_TERMINAL_BUFFER_BYTES,
      },
    });
  });
}
