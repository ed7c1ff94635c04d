import { app } from "@azure/functions";
import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import { checkForUpdates, prepareDatabaseRelease } from "../../shared/databases/prepare.js";
import { warmDatabaseFiles } from "../../shared/databases/warmup.js";
import { newOperationId } from "../../shared/dashboard/operations.js";
import { Orchestrations } from "../../shared/ops/queue-labels.js";
import type { ClusterWarmup } from "../../shared/dashboard/job-api-client.js";
import { ConflictError } from "../../shared/errors.js";
import { appContext } from "../app-context.js";
import { databaseCatalog, databaseState } from "../dashboard-deps.js";

export const DatabaseActivities = {
  prepare: "prepareDatabaseRelease",
  warm: "warmDatabaseRelease",
  startClusterWarm: "startClusterWarmupActivity",
  readClusterWarm: "readClusterWarmupActivity",
  checkUpdates: "checkDatabaseUpdatesActivity",
} as const;

function databasesDir(): string {
  const dir = appContext.config.databasesDir;
  if (!dir) throw new Error("DATABASES_DIR is not configured");
  return dir;
}

function source() {
  const baseUrl = appContext.config.databaseSourceUrl;
  if (!baseUrl) throw new Error("DATABASE_SOURCE_URL is not configured");
  return createNcbiSource({ baseUrl });
}

df.app.activity(DatabaseActivities.prepare, {
  handler: async (input: { name: string; partitions: number }) => {
    const manifest = await prepareDatabaseRelease({ source: source(), name: input.name, databasesDir: databasesDir(), partitions: input.partitions, publisher: databaseCatalog() });
    await databaseState().patch(input.name, { update_available: false, warm_state: "cold", warmed_version: null });
    appContext.logger.info("database prepared", { name: manifest.name, version: manifest.version });
    return { name: manifest.name, version: manifest.version, sequences: manifest.sequences, letters: manifest.letters, partitions: manifest.partitions.length };
  },
});

df.app.activity(DatabaseActivities.warm, {
  handler: async (input: { name: string }) => {
    const entry = await databaseCatalog().get(input.name);
    if (!entry) throw new Error(`database ${input.name} is not prepared`);
    await databaseState().patch(input.name, { warm_state: "warming" });
    try {
      const bytes = await warmDatabaseFiles(entry.root);
      await databaseState().patch(input.name, { warm_state: "warm", warmed_version: entry.manifest.version, warmed_at: new Date().toISOString() });
      return { name: input.name, version: entry.manifest.version, bytes };
    } catch (error) {
      await databaseState().patch(input.name, { warm_state: "failed" });
      throw error;
    }
  },
});

/** Records a finished cluster warm-up in the database's state. */
async function recordClusterWarmup(view: ClusterWarmup): Promise<void> {
  if (view.state === "succeeded") await databaseState().patch(view.database, { warm_state: "warm", warmed_version: view.release, warmed_at: new Date().toISOString() });
  else if (view.state === "failed") await databaseState().patch(view.database, { warm_state: "failed" });
}

/** Starts warming every node of the cluster through the job API; `local` when shards run on its own machine. */
df.app.activity(DatabaseActivities.startClusterWarm, {
  handler: async (input: { name: string }): Promise<{ mode: "local" } | { mode: "cluster"; view: ClusterWarmup; poll_seconds: number }> => {
    try {
      const view = await appContext.jobApi.startWarmup(input.name);
      await databaseState().patch(input.name, { warm_state: "warming" });
      await recordClusterWarmup(view);
      return { mode: "cluster", view, poll_seconds: appContext.config.jobPollIntervalSeconds };
    } catch (error) {
      if (error instanceof ConflictError) return { mode: "local" };
      throw error;
    }
  },
});

df.app.activity(DatabaseActivities.readClusterWarm, {
  handler: async (input: { name: string }): Promise<ClusterWarmup> => {
    const view = await appContext.jobApi.getWarmup(input.name);
    await recordClusterWarmup(view);
    return view;
  },
});

df.app.activity(DatabaseActivities.checkUpdates, {
  handler: async () => {
    const results = await checkForUpdates({ source: source(), catalog: databaseCatalog() });
    const now = new Date().toISOString();
    for (const r of results) {
      await databaseState().patch(r.name, { update_available: r.update_available, latest_release: r.latest_release, checked_at: now });
      if (r.update_available) {
        appContext.logger.info("database update available", { name: r.name, latest_release: r.latest_release });
        await appContext.events.record({
          idempotency_key: `database.update_available/${r.name}/${r.latest_release}`,
          source: "database.update_check",
          event_type: "database.update_available",
          correlation_id: r.name,
          resource_ref: `blast_database/${r.name}`,
          payload: { current_version: r.current_version, latest_release: r.latest_release, latest_last_updated: r.latest_last_updated },
        });
      }
    }
    return results.map((r) => ({ name: r.name, update_available: r.update_available, latest_release: r.latest_release }));
  },
});

/**
 * An orchestration that runs one activity and reports its outcome as the operation's result, so a
 * failed activity becomes a `failed` operation with a focused error rather than a failed instance.
 */
function singleActivityOperation(activity: string, phase: string): OrchestrationHandler {
  return function* (context: OrchestrationContext) {
    const input = context.df.getInput<Record<string, unknown> | null>();
    context.df.setCustomStatus({ phase, ...(input ?? {}) });
    try {
      const result: unknown = yield context.df.callActivity(activity, input);
      return { outcome: "succeeded", ...(Array.isArray(result) ? { databases: result } : (result as object)) };
    } catch (error) {
      return { outcome: "failed", error: error instanceof Error ? error.message.split("\n")[0] : String(error) };
    }
  };
}

const prepareDatabase = singleActivityOperation(DatabaseActivities.prepare, "preparing");
/**
 * Warm-up: on a cluster, one Job per node fills that node's cache (the job API runs them); the
 * operation reports each node's progress (custom status) until every node is done. With the local
 * executor, this machine reads its copy of the release into the page cache instead.
 */
const warmDatabase: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<{ name: string }>();
  context.df.setCustomStatus({ phase: "warming", ...input });
  try {
    const started: { mode: "local" } | { mode: "cluster"; view: ClusterWarmup; poll_seconds: number } = yield context.df.callActivity(DatabaseActivities.startClusterWarm, input);
    if (started.mode === "local") {
      const result: object = yield context.df.callActivity(DatabaseActivities.warm, input);
      return { outcome: "succeeded", ...result };
    }
    let view = started.view;
    while (view.state === "running") {
      context.df.setCustomStatus({ phase: "warming", name: view.database, release: view.release, nodes: view.nodes });
      yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + started.poll_seconds * 1000));
      view = yield context.df.callActivity(DatabaseActivities.readClusterWarm, input);
    }
    context.df.setCustomStatus({ phase: view.state, name: view.database, release: view.release, nodes: view.nodes });
    if (view.state === "failed") {
      const failed = view.nodes.filter((n) => n.state === "failed");
      return { outcome: "failed", error: `warm-up failed on ${failed.map((n) => `${n.node}${n.error ? ` (${n.error.split("\n").pop()})` : ""}`).join(", ")}`, nodes: view.nodes };
    }
    return { outcome: "succeeded", name: view.database, version: view.release, nodes: view.nodes };
  } catch (error) {
    return { outcome: "failed", error: error instanceof Error ? error.message.split("\n")[0] : String(error) };
  }
};
const checkDatabaseUpdates = singleActivityOperation(DatabaseActivities.checkUpdates, "checking");

df.app.orchestration(Orchestrations.prepareDatabase, prepareDatabase);
df.app.orchestration(Orchestrations.warmDatabase, warmDatabase);
df.app.orchestration(Orchestrations.checkDatabaseUpdates, checkDatabaseUpdates);

/** The scheduled update check (spec's check_database_updates): a timer starting the orchestration. */
app.timer("databaseUpdateCheckTimer", {
  // The validated setting (default included), so Azure's host and the config never disagree.
  schedule: appContext.config.dbUpdateCheckSchedule,
  extraInputs: [df.input.durableClient()],
  handler: async (timer, context) => {
    const instanceId = await df.getClient(context).startNew(Orchestrations.checkDatabaseUpdates, { instanceId: newOperationId() });
    appContext.logger.info("database update check started", { operation_id: instanceId, past_due: timer.isPastDue });
  },
});
