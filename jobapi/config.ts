import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { type Env, envEnum, envInt, envPort, envUrl, LOG_LEVELS, type LogLevel, parseEnv } from "../shared/config/env.js";

const schema = z.object({
  JOBAPI_PORT: envPort().default(8080),
  JOBAPI_HOST: z.string().default("127.0.0.1"),
  JOBAPI_STORAGE_CONNECTION_STRING: z.string(),
  JOBAPI_DATA_DIR: z.string().default(".data/jobapi"),
  JOBAPI_DATABASES_DIR: z.string().optional(),
  JOBAPI_SECRETS_DIR: z.string().optional(),
  JOBAPI_KEY_VAULT_URL: envUrl().optional(),
  JOBAPI_EXECUTOR: envEnum(["local"]).default("local"),
  JOBAPI_MAX_ACTIVE_JOBS: envInt(1, 1000).default(2),
  JOBAPI_MAX_QUEUED_JOBS: envInt(1, 100_000).default(100),
  JOBAPI_RETRY_AFTER_SECONDS: envInt(1, 3600).default(30),
  JOBAPI_SHARD_CONCURRENCY: envInt(1, 512).default(os.availableParallelism()),
  JOBAPI_THREADS_PER_SHARD: z
    .string()
    .refine((value) => value === "auto" || (/^\d+$/.test(value) && Number(value) >= 1 && Number(value) <= 64), "must be auto or a whole number from 1 to 64")
    .transform((value): number | "auto" => (value === "auto" ? "auto" : Number(value)))
    .default("auto"),
  JOBAPI_SHARD_ATTEMPTS: envInt(1, 10).default(2),
  JOBAPI_NODE_MEMORY_BYTES: envInt(1, Number.MAX_SAFE_INTEGER).default(os.totalmem()),
  JOBAPI_MEMORY_MARGIN_BYTES: envInt(0, Number.MAX_SAFE_INTEGER).default(2 * 1024 ** 3),
  JOBAPI_BODY_LIMIT_BYTES: envInt(1024, 64 * 1024 * 1024).default(12 * 1024 * 1024),
  LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
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
  readonly logLevel: LogLevel;
}

/** The job API's one validated configuration; throws `ConfigError` naming every bad setting. */
export function loadJobApiConfig(env: Env, cwd = process.cwd()): JobApiConfig {
  return parseEnv(schema, env, (c) => {
    const dataDir = path.resolve(cwd, c.JOBAPI_DATA_DIR);
    return {
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
      logLevel: c.LOG_LEVEL,
    };
  });
}
