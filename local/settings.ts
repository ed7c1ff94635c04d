import path from "node:path";
import { z } from "zod";

const port = z.coerce.number().int().min(0).max(65535);

/** Settings of the embedded local stack (not of the Functions app, which has its own config). */
const schema = z.object({
  PORT: port.default(7071),
  HOST: z.string().min(1).default("127.0.0.1"),
  BLASTPLANE_DATA_DIR: z.string().min(1).default(".data"),
  BLASTPLANE_IN_MEMORY: z.enum(["0", "1"]).default("0"),
  AZURITE_BLOB_PORT: port.default(0),
  AZURITE_QUEUE_PORT: port.default(0),
  AZURITE_TABLE_PORT: port.default(0),
  IDP_PORT: port.default(7072),
  JOBAPI_PORT: port.default(8080),
  BLASTPLANE_SKIP_DEMO_DB: z.enum(["0", "1"]).default("0"),
  TASKHUB_NAME: z.string().default("blastplane"),
  AUTH_TENANT_ID: z.string().min(1).default("blastplane-local"),
  AUTH_CLIENT_ID: z.string().min(1).default("blastplane-local-api"),
  DURABLE_ACTIVITY_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
  /** Where shards run: BLAST+ processes of the job API (`local`), or Jobs on the local Kubernetes API (`kubernetes`). */
  BLASTPLANE_EXECUTOR: z.enum(["local", "kubernetes"]).default("local"),
  BLASTPLANE_KUBE_NODES: z.coerce.number().int().min(1).max(16).default(2),
  BLASTPLANE_KUBE_NODE_MEMORY_BYTES: z.coerce.number().int().positive().default(8 * 1024 ** 3),
  BLASTPLANE_KUBE_NODE_CPU: z.coerce.number().positive().max(256).optional(),
  BLASTPLANE_KUBE_PORT: port.default(0),
  /** Another Functions app bundle to host instead of ours (the durable protocol tests use one). */
  BLASTPLANE_FUNCTIONS_ENTRY: z.string().min(1).optional(),
});

export interface LocalStackSettings {
  port: number;
  host: string;
  dataDir: string;
  inMemory: boolean;
  azurite: { blobPort: number; queuePort: number; tablePort: number };
  idpPort: number;
  jobApiPort: number;
  skipDemoDatabase: boolean;
  /** JOBAPI_* settings passed through to the job API process. */
  jobApiEnv: Record<string, string>;
  taskHubName: string;
  tenantId: string;
  clientId: string;
  activityConcurrency: number;
  logLevel: "debug" | "info" | "warn" | "error";
  functionsEntry: string | undefined;
  executor: "local" | "kubernetes";
  /** The local cluster's simulated nodes (BLASTPLANE_EXECUTOR=kubernetes). */
  kube: { nodes: number; nodeMemoryBytes: number; nodeCpu: number | undefined; port: number };
}

export function loadLocalStackSettings(env: Record<string, string | undefined>, cwd: string): LocalStackSettings {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid local stack setting: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  const s = parsed.data;
  return {
    port: s.PORT,
    host: s.HOST,
    dataDir: path.resolve(cwd, s.BLASTPLANE_DATA_DIR),
    inMemory: s.BLASTPLANE_IN_MEMORY === "1",
    azurite: { blobPort: s.AZURITE_BLOB_PORT, queuePort: s.AZURITE_QUEUE_PORT, tablePort: s.AZURITE_TABLE_PORT },
    idpPort: s.IDP_PORT,
    jobApiPort: s.JOBAPI_PORT,
    skipDemoDatabase: s.BLASTPLANE_SKIP_DEMO_DB === "1",
    jobApiEnv: Object.fromEntries(
      Object.entries(env).filter((e): e is [string, string] => e[0].startsWith("JOBAPI_") && e[0] !== "JOBAPI_PORT" && e[1] !== undefined),
    ),
    taskHubName: s.TASKHUB_NAME,
    tenantId: s.AUTH_TENANT_ID,
    clientId: s.AUTH_CLIENT_ID,
    activityConcurrency: s.DURABLE_ACTIVITY_CONCURRENCY,
    logLevel: s.LOG_LEVEL,
    functionsEntry: s.BLASTPLANE_FUNCTIONS_ENTRY ? path.resolve(cwd, s.BLASTPLANE_FUNCTIONS_ENTRY) : undefined,
    executor: s.BLASTPLANE_EXECUTOR,
    kube: { nodes: s.BLASTPLANE_KUBE_NODES, nodeMemoryBytes: s.BLASTPLANE_KUBE_NODE_MEMORY_BYTES, nodeCpu: s.BLASTPLANE_KUBE_NODE_CPU, port: s.BLASTPLANE_KUBE_PORT },
  };
}
