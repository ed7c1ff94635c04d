import { randomUUID } from "node:crypto";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, inject } from "vitest";
import { type AzuriteOptions, type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { localStackSettingsSchema } from "../../local/settings.js";
import type { JobApiClient } from "../../shared/dashboard/job-api-client.js";
import { createLogger, type LogFields, type Logger } from "../../shared/logging/logger.js";
import type {
  OrchestrationClient,
  OrchestrationInstance,
  StartOrchestrationOptions,
} from "../../shared/orchestrations/orchestration-client.js";
import type { TableClientFactory } from "../../shared/storage/table-source.js";
import { claimSharedAccount } from "./shared-azurite.js";

const root = path.resolve(import.meta.dirname, "../..");

/**
 * How long a test's own Azurite may take to listen: BLASTPLANE_AZURITE_START_SECONDS, read as the
 * local stack reads it (default 30 s), so one setting serves a loaded machine for stacks and tests alike.
 */
export function testAzuriteStartMs(env: NodeJS.ProcessEnv = process.env): number {
  return (
    localStackSettingsSchema.shape.BLASTPLANE_AZURITE_START_SECONDS.parse(env.BLASTPLANE_AZURITE_START_SECONDS) * 1000
  );
}

/** Real Azurite (in memory) for the unit tests of services whose stores are Table and Blob storage; `oauth` serves HTTPS with bearer tokens. */
export function startTestAzurite(options: Pick<AzuriteOptions, "oauth"> = {}): Promise<RunningAzurite> {
  return startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger: createLogger({ level: "error" }),
    watchdogPath: path.join(root, "local/parent-watchdog.cjs"),
    startTimeoutMs: testAzuriteStartMs(),
    ...options,
  });
}

/**
 * Storage for a file that only reads and writes it: an account of its own on the run's shared
 * Azurite (test/support/shared-azurite.ts), else an Azurite of its own. `stop()` ends only an own one.
 * A file that restarts, cuts or configures its Azurite uses {@link startTestAzurite}.
 */
export async function testAzurite(): Promise<RunningAzurite> {
  const shared = inject("sharedAzurite");
  return (shared ? claimSharedAccount(shared) : undefined) ?? startTestAzurite();
}

/** Table clients on `connectionString` whose table names carry `prefix`, so tests do not share tables. */
export function prefixedTables(connectionString: string, prefix: string): TableClientFactory {
  return (tableName) =>
    TableClient.fromConnectionString(connectionString, `${prefix}${tableName}`, { allowInsecureConnection: true });
}

/** A logger that keeps its entries, so a test can read what was logged. */
export function captureLogger(): Logger & { entries: { level: string; msg: string; fields: LogFields }[] } {
  const entries: { level: string; msg: string; fields: LogFields }[] = [];
  const logger = createLogger({
    level: "debug",
    write: (line) => {
      const { level, msg, ...fields } = JSON.parse(line) as { level: string; msg: string } & LogFields;
      entries.push({ level, msg, fields });
    },
  });
  return Object.assign(logger, { entries });
}

/** One start the fake task hub received. */
export interface RecordedStart {
  name: string;
  options: StartOrchestrationOptions | undefined;
}

/**
 * A task hub in memory behind the {@link OrchestrationClient} port. Like the durable host, it
 * refuses a second start of an instance that is pending or running. `beforeStart` lets a test
 * act just before a start lands (another request starting the same instance first).
 */
export function fakeOrchestrations() {
  const instances = new Map<string, OrchestrationInstance>();
  const starts: RecordedStart[] = [];
  const events: { instanceId: string; eventName: string; eventData: unknown }[] = [];
  const hooks: { beforeStart?: (name: string, instanceId: string) => void; raiseEventError?: Error } = {};

  function put(instance: Partial<OrchestrationInstance> & { name: string; instanceId: string }): OrchestrationInstance {
    const now = new Date();
    const stored: OrchestrationInstance = {
      runtimeStatus: "Pending",
      input: null,
      output: null,
      createdAt: now,
      lastUpdatedAt: now,
      ...instance,
    };
    instances.set(stored.instanceId, stored);
    return stored;
  }

  const client: OrchestrationClient = {
    async startNew(name, options) {
      const instanceId = options?.instanceId ?? randomUUID();
      hooks.beforeStart?.(name, instanceId);
      const existing = instances.get(instanceId);
      if (existing && ["Pending", "Running"].includes(existing.runtimeStatus))
        throw new Error(`an instance with id ${instanceId} is already running`);
      starts.push({ name, options });
      put({ name, instanceId, input: options?.input ?? null });
      return instanceId;
    },
    async getInstance(instanceId) {
      return instances.get(instanceId);
    },
    async *listInstances(options) {
      for (const instance of instances.values()) {
        if (options.runtimeStatus.length === 0 || options.runtimeStatus.includes(instance.runtimeStatus))
          yield instance;
      }
    },
    async raiseEvent(instanceId, eventName, eventData) {
      if (hooks.raiseEventError) throw hooks.raiseEventError;
      if (!instances.has(instanceId)) throw new Error(`no instance ${instanceId}`);
      events.push({ instanceId, eventName, eventData });
    },
  };
  return { client, instances, starts, events, hooks, put };
}

/** A job-API client whose every method fails unless the test gives it an answer. */
export function fakeJobApi(
  overrides: Partial<JobApiClient> = {},
): JobApiClient & { calls: { method: string; args: unknown[] }[] } {
  const calls: { method: string; args: unknown[] }[] = [];
  const unexpected =
    (method: string) =>
    async (...args: unknown[]): Promise<never> => {
      calls.push({ method, args });
      throw new Error(`unexpected job API call: ${method}`);
    };
  const recorded = <K extends keyof JobApiClient>(method: K): JobApiClient[K] => {
    const implementation = overrides[method];
    if (!implementation) return unexpected(method) as JobApiClient[K];
    return ((...args: unknown[]) => {
      calls.push({ method, args });
      return (implementation as (...inner: unknown[]) => unknown)(...args);
    }) as JobApiClient[K];
  };
  return {
    calls,
    submit: recorded("submit"),
    getStatus: recorded("getStatus"),
    cancel: recorded("cancel"),
    openResults: recorded("openResults"),
    resultPage: recorded("resultPage"),
    startWarmup: recorded("startWarmup"),
    getWarmup: recorded("getWarmup"),
    nodeMemory: recorded("nodeMemory"),
  };
}

/**
 * One Azurite for a test file (started before its tests, stopped after) and tables of their own
 * for each test: `tables()` gives a fresh table-name prefix every call.
 */
export function azuriteTables(prefix: string): { tables: () => TableClientFactory; connectionString: () => string } {
  let azurite: RunningAzurite | undefined;
  let counter = 0;
  beforeAll(async () => {
    azurite = await testAzurite();
  });
  afterAll(async () => {
    await azurite?.stop();
  });
  const connectionString = () => {
    if (!azurite) throw new Error("Azurite is not started yet");
    return azurite.connectionString;
  };
  return {
    tables: () => prefixedTables(connectionString(), `${prefix}${++counter}x${Date.now().toString(36)}`),
    connectionString,
  };
}
