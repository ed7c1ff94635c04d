import { app } from "@azure/functions";
import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler, RegisteredActivity } from "durable-functions";
import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import {
  createCheckDatabaseUpdatesActivity,
  createPrepareDatabaseActivity,
  createWarmDatabaseActivity,
  type DatabaseActivityDependencies,
} from "../../shared/databases/database-activities.js";
import { newOperationId } from "../../shared/dashboard/operations.js";
import { createFileDatabaseCatalog } from "../../shared/databases/database-catalog.js";
import { Orchestrations } from "../../shared/ops/queue-labels.js";
import { appContext } from "../app-context.js";
import { databaseState } from "../dashboard-deps.js";

export const DatabaseActivities = {
  prepare: "prepareDatabaseRelease",
  warm: "warmDatabaseRelease",
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

const activityDependencies = (): DatabaseActivityDependencies => ({
  databasesDir,
  source,
  catalog: createFileDatabaseCatalog,
  state: databaseState(),
  events: appContext.events,
  logger: appContext.logger,
});

// The typed handles the registrations return: the orchestrators call these, never a bare name.
const prepareReleaseActivity = df.app.activity(DatabaseActivities.prepare, {
  handler: explainCloudAuthorization((input: { name: string; partitions: number }) => createPrepareDatabaseActivity(activityDependencies())(input)),
});
const warmReleaseActivity = df.app.activity(DatabaseActivities.warm, {
  handler: explainCloudAuthorization((input: { name: string }) => createWarmDatabaseActivity(activityDependencies())(input)),
});
const checkUpdatesActivity = df.app.activity(DatabaseActivities.checkUpdates, {
  handler: explainCloudAuthorization(() => createCheckDatabaseUpdatesActivity(activityDependencies())()),
});

/**
 * An orchestration that runs one activity and reports its outcome as the operation's result, so a
 * failed activity becomes a `failed` operation with a focused error rather than a failed instance.
 */
function singleActivityOperation(activity: RegisteredActivity, phase: string): OrchestrationHandler {
  return function* (context: OrchestrationContext) {
    const input = context.df.getInput<Record<string, unknown> | null>();
    context.df.setCustomStatus({ phase, ...(input ?? {}) });
    try {
      const result: unknown = yield activity(input);
      return { outcome: "succeeded", ...(Array.isArray(result) ? { databases: result } : (result as object)) };
    } catch (error) {
      // The library words an activity failure as "<reason> \n <details>": keep the reason alone.
      return { outcome: "failed", error: error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error) };
    }
  };
}

const prepareDatabase = singleActivityOperation(prepareReleaseActivity, "preparing");
const warmDatabase = singleActivityOperation(warmReleaseActivity, "warming");
const checkDatabaseUpdates = singleActivityOperation(checkUpdatesActivity, "checking");

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
