import { z } from "zod";

/**
 * The Functions app's one validated configuration. Every setting the app reads is here and in
 * `local.settings.sample.json`; the README explains each. `loadConfig` fails fast on a bad value.
 */
const TASK_HUB_NAME = /^[A-Za-z][A-Za-z0-9]{2,44}$/;

const configSchema = z.object({
  AzureWebJobsStorage: z.string().min(1, "AzureWebJobsStorage is required"),
  TASKHUB_NAME: z
    .string()
    .regex(TASK_HUB_NAME, "TASKHUB_NAME must be 3-45 letters or digits, starting with a letter")
    .default("blastplane"),
  AUTH_TENANT_ID: z.string().min(1, "AUTH_TENANT_ID is required"),
  AUTH_CLIENT_ID: z.string().min(1, "AUTH_CLIENT_ID is required"),
  AUTH_DISCOVERY_URL: z.preprocess((v) => (v === "" ? undefined : v), z.url().optional()),
  AUTH_CLOCK_SKEW_SECONDS: z.coerce.number().int().min(0).max(600).default(60),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  NOOP_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).max(10_000).default(30),
  HEALTH_DEPENDENCY_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(2000),
  JOBAPI_URL: z.preprocess((v) => (v === "" ? undefined : v), z.url().optional()),
  SECRETS_DIR: z.preprocess((v) => (v === "" ? undefined : v), z.string().optional()),
  KEY_VAULT_URL: z.preprocess((v) => (v === "" ? undefined : v), z.url().optional()),
  API_TOKEN_GRACE_SECONDS: z.coerce.number().int().min(0).max(7 * 86_400).default(3600),
  JOB_POLL_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(3600).default(5),
  JOBAPI_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(15_000),
  DATABASES_DIR: z.preprocess((v) => (v === "" ? undefined : v), z.string().optional()),
  DATABASE_SOURCE_URL: z.preprocess((v) => (v === "" ? undefined : v), z.url().optional()),
  DATABASE_PARTITIONS: z.coerce.number().int().min(0).max(64).default(2),
  SVC_DB_UPDATE_CHECK_SCHEDULE: z.string().min(1).default("0 0 3 * * *"),
});

export interface AppConfig {
  readonly storageConnectionString: string;
  readonly taskHubName: string;
  readonly auth: {
    readonly tenantId: string;
    readonly clientId: string;
    /** Override of the Entra ID discovery document; the local stack points it at its dev IdP. */
    readonly discoveryUrl: string | undefined;
    readonly clockSkewSeconds: number;
  };
  readonly logLevel: "debug" | "info" | "warn" | "error";
  readonly noopRateLimitPerMinute: number;
  readonly healthDependencyTimeoutMs: number;
  /** Where the dashboard reaches the job API (in Azure: its in-cluster service address). */
  readonly jobApiUrl: string | undefined;
  /** The local secret store folder (the local stack's stand-in for Key Vault). */
  readonly secretsDir: string | undefined;
  /** Key Vault holding the shared job-API token (Azure); wins over `secretsDir`. */
  readonly keyVaultUrl: string | undefined;
  /** How long a regenerated API token's predecessor stays valid. */
  readonly apiTokenGraceSeconds: number;
  /** How often the submit orchestration polls the job API. */
  readonly jobPollIntervalSeconds: number;
  readonly jobApiTimeoutMs: number;
  /** Where prepared databases live for the executors (the local stack: the job API's folder). */
  readonly databasesDir: string | undefined;
  /** Base URL of a release source laid out like NCBI's BLAST database distribution. */
  readonly databaseSourceUrl: string | undefined;
  /** Partitions built for each prepared database (for the sharded execution profile). */
  readonly databasePartitions: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join("; ")}`);
    this.name = "ConfigError";
  }
}

/** Validates the environment and returns a frozen, typed configuration. */
export function loadConfig(env: Record<string, string | undefined> = process.env): AppConfig {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`));
  }
  const c = parsed.data;
  return Object.freeze({
    storageConnectionString: c.AzureWebJobsStorage,
    taskHubName: c.TASKHUB_NAME,
    auth: Object.freeze({
      tenantId: c.AUTH_TENANT_ID,
      clientId: c.AUTH_CLIENT_ID,
      discoveryUrl: c.AUTH_DISCOVERY_URL,
      clockSkewSeconds: c.AUTH_CLOCK_SKEW_SECONDS,
    }),
    logLevel: c.LOG_LEVEL,
    noopRateLimitPerMinute: c.NOOP_RATE_LIMIT_PER_MINUTE,
    healthDependencyTimeoutMs: c.HEALTH_DEPENDENCY_TIMEOUT_MS,
    jobApiUrl: c.JOBAPI_URL?.replace(/\/+$/, ""),
    secretsDir: c.SECRETS_DIR,
    keyVaultUrl: c.KEY_VAULT_URL,
    apiTokenGraceSeconds: c.API_TOKEN_GRACE_SECONDS,
    jobPollIntervalSeconds: c.JOB_POLL_INTERVAL_SECONDS,
    jobApiTimeoutMs: c.JOBAPI_TIMEOUT_MS,
    databasesDir: c.DATABASES_DIR,
    databaseSourceUrl: c.DATABASE_SOURCE_URL,
    databasePartitions: c.DATABASE_PARTITIONS,
  });
}
