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
  JOBAPI_EXECUTOR: z.enum(["local"]).default("local"),
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
  readonly executor: "local";
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
