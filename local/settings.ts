import path from "node:path";
import { z } from "zod";
import {
  type Env,
  envEnum,
  envFlag,
  envInt,
  envNumber,
  envPort,
  LOG_LEVELS,
  type LogLevel,
  parseEnv,
} from "../shared/config/env.js";

/** Settings of the embedded local stack (not of the Functions app, which has its own config). */
export const localStackSettingsSchema = z.object({
  PORT: envPort().default(7071),
  HOST: z.string().default("127.0.0.1"),
  BLASTPLANE_DATA_DIR: z.string().default(".data"),
  BLASTPLANE_IN_MEMORY: envFlag().default(false),
  /** 0 turns off Azurite's durable writes (acknowledged = on disk); only to measure their cost. */
  BLASTPLANE_AZURITE_DURABLE: envFlag().default(true),
  /** How long Azurite may take to listen before the stack gives up starting. */
  BLASTPLANE_AZURITE_START_SECONDS: envInt(5, 600).default(30),
  AZURITE_BLOB_PORT: envPort().default(0),
  AZURITE_QUEUE_PORT: envPort().default(0),
  AZURITE_TABLE_PORT: envPort().default(0),
  IDP_PORT: envPort().default(7072),
  JOBAPI_PORT: envPort().default(8080),
  BLASTPLANE_SKIP_DEMO_DB: envFlag().default(false),
  TASKHUB_NAME: z.string().default("blastplane"),
  AUTH_TENANT_ID: z.string().default("blastplane-local"),
  AUTH_CLIENT_ID: z.string().default("blastplane-local-api"),
  DURABLE_ACTIVITY_CONCURRENCY: envInt(1, 64).default(4),
  LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
  /** Where shards run: BLAST+ processes of the job API (`local`), or Jobs on the local Kubernetes API (`kubernetes`). */
  BLASTPLANE_EXECUTOR: envEnum(["local", "kubernetes"]).default("local"),
  BLASTPLANE_KUBE_NODES: envInt(1, 16).default(2),
  BLASTPLANE_KUBE_NODE_MEMORY_BYTES: envInt(1, Number.MAX_SAFE_INTEGER).default(8 * 1024 ** 3),
  BLASTPLANE_KUBE_NODE_CPU: envNumber(0, 256, true).optional(),
  BLASTPLANE_KUBE_PORT: envPort().default(0),
  /** The local Resource Manager (local/arm), so cluster provisioning and image builds work without Azure. */
  BLASTPLANE_LOCAL_ARM: envFlag().default(true),
  /** Another Functions app bundle to host instead of ours (the durable protocol tests use one). */
  BLASTPLANE_FUNCTIONS_ENTRY: z.string().optional(),
  /** First wait before the job API is restarted after it died (doubled per failed restart). */
  BLASTPLANE_RESTART_BACKOFF_MS: envInt(10, 60_000).default(250),
});

export interface LocalStackSettings {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly inMemory: boolean;
  readonly azurite: {
    blobPort: number;
    queuePort: number;
    tablePort: number;
    durableWrites: boolean;
    startTimeoutMs: number;
  };
  readonly idpPort: number;
  readonly jobApiPort: number;
  readonly skipDemoDatabase: boolean;
  /** JOBAPI_* settings passed through to the job API process. */
  readonly jobApiEnv: Record<string, string>;
  readonly taskHubName: string;
  readonly tenantId: string;
  readonly clientId: string;
  readonly activityConcurrency: number;
  readonly logLevel: LogLevel;
  readonly functionsEntry: string | undefined;
  /** First wait before a dead job API is restarted. */
  readonly restartBackoffMs: number;
  readonly executor: "local" | "kubernetes";
  /** The local cluster's simulated nodes (BLASTPLANE_EXECUTOR=kubernetes). */
  readonly kube: { nodes: number; nodeMemoryBytes: number; nodeCpu: number | undefined; port: number };
  /** Whether the local Resource Manager runs (and the app is pointed at it). */
  readonly localArm: boolean;
}

/** The local stack's validated settings; throws `ConfigError` naming every bad setting. */
export function loadLocalStackSettings(env: Env, cwd: string): LocalStackSettings {
  return parseEnv(localStackSettingsSchema, env, (s) => ({
    port: s.PORT,
    host: s.HOST,
    dataDir: path.resolve(cwd, s.BLASTPLANE_DATA_DIR),
    inMemory: s.BLASTPLANE_IN_MEMORY,
    azurite: {
      blobPort: s.AZURITE_BLOB_PORT,
      queuePort: s.AZURITE_QUEUE_PORT,
      tablePort: s.AZURITE_TABLE_PORT,
      durableWrites: s.BLASTPLANE_AZURITE_DURABLE,
      startTimeoutMs: s.BLASTPLANE_AZURITE_START_SECONDS * 1000,
    },
    idpPort: s.IDP_PORT,
    jobApiPort: s.JOBAPI_PORT,
    skipDemoDatabase: s.BLASTPLANE_SKIP_DEMO_DB,
    jobApiEnv: Object.fromEntries(
      Object.entries(env).filter(
        (e): e is [string, string] => e[0].startsWith("JOBAPI_") && e[0] !== "JOBAPI_PORT" && e[1] !== undefined,
      ),
    ),
    taskHubName: s.TASKHUB_NAME,
    tenantId: s.AUTH_TENANT_ID,
    clientId: s.AUTH_CLIENT_ID,
    activityConcurrency: s.DURABLE_ACTIVITY_CONCURRENCY,
    logLevel: s.LOG_LEVEL,
    functionsEntry: s.BLASTPLANE_FUNCTIONS_ENTRY ? path.resolve(cwd, s.BLASTPLANE_FUNCTIONS_ENTRY) : undefined,
    executor: s.BLASTPLANE_EXECUTOR,
    restartBackoffMs: s.BLASTPLANE_RESTART_BACKOFF_MS,
    kube: {
      nodes: s.BLASTPLANE_KUBE_NODES,
      nodeMemoryBytes: s.BLASTPLANE_KUBE_NODE_MEMORY_BYTES,
      nodeCpu: s.BLASTPLANE_KUBE_NODE_CPU,
      port: s.BLASTPLANE_KUBE_PORT,
    },
    localArm: s.BLASTPLANE_LOCAL_ARM,
  }));
}
