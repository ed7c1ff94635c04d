import { app } from "@azure/functions";
import type { OrchestrationContext, OrchestrationHandler, RegisteredActivity } from "durable-functions";
import * as df from "durable-functions";
import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import { clusterWarmupFailure, createClusterWarmupRecorder } from "../../shared/databases/cluster-warmup-recorder.js";
import os from "node:os";
import path from "node:path";
import {
  type AddDatabaseInput,
  createAddDatabaseActivity,
  createCheckDatabaseUpdatesActivity,
  createPrepareDatabaseActivity,
  createReleaseAddClaimActivity,
  createWarmDatabaseActivity,
  type DatabaseActivityDependencies,
} from "../../shared/databases/database-activities.js";
import { sweepStaleClaims } from "../../shared/databases/name-claims.js";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import { ConflictError } from "../../shared/errors.js";
import type { ClusterWarmup } from "../../shared/jobs/cluster-warmup.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { newOperationId } from "../../shared/orchestrations/operations.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { databaseCatalog, databaseClaims, databaseState, databaseUploads } from "../composition/dashboard-deps.js";
import { orchestrationClient } from "../composition/http-route.js";

export const DatabaseActivities = {
  prepare: "prepareDatabaseRelease",
  add: "addDatabaseFromUpload",
  releaseClaim: "releaseDatabaseNameClaim",
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

const activityDependencies = (): DatabaseActivityDependencies => ({
  databasesDir,
  source,
  catalog: () => databaseCatalog(),
  publisher: () => databaseCatalog(),
  state: databaseState(),
  events: appContext.events,
  logger: appContext.logger,
  uploads: databaseUploads,
  claims: databaseClaims,
  // The catalog's own cache root: a release built here is already where this machine reads it.
  buildRoot: () => appContext.config.databasesDir ?? path.join(os.tmpdir(), "blastplane-databases"),
});

/** An activity whose refusals for want of a role name the role (its error) and become `role_assignment.missing` events. */
function explained<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return explainCloudAuthorization(fn, reportMissingRoles(appContext.events, appContext.logger, "functions.activity"));
}

// The typed handles the registrations return: the orchestrators call these, never a bare name.
const prepareReleaseActivity = df.app.activity(DatabaseActivities.prepare, {
  handler: explained((input: { name: string; partitions: number }) =>
    createPrepareDatabaseActivity(activityDependencies())(input),
  ),
});
const addDatabaseActivity = df.app.activity(DatabaseActivities.add, {
  handler: explained((input: AddDatabaseInput) => createAddDatabaseActivity(activityDependencies())(input)),
});
const releaseClaimActivity = df.app.activity(DatabaseActivities.releaseClaim, {
  handler: explained((input: AddDatabaseInput) => createReleaseAddClaimActivity(activityDependencies())(input)),
});
const warmReleaseActivity = df.app.activity(DatabaseActivities.warm, {
  handler: explained((input: WarmupInput) => createWarmDatabaseActivity(activityDependencies())(input)),
});
const checkUpdatesActivity = df.app.activity(DatabaseActivities.checkUpdates, {
  handler: explained(() => createCheckDatabaseUpdatesActivity(activityDependencies())()),
});

/** A warm-up's activity input: the database, and the operation (the warm-up's id for its failure event). */
type WarmupInput = { name: string; operation_id?: string };

/** Records a finished cluster warm-up in the database's state; a failed one also as an event (once per warm-up). */
function recordClusterWarmup(view: ClusterWarmup, operationId: string | undefined): Promise<void> {
  return createClusterWarmupRecorder({ state: databaseState(), events: appContext.events, logger: appContext.logger })(
    view,
    operationId,
  );
}

type ClusterWarmStart = { mode: "local" } | { mode: "cluster"; view: ClusterWarmup; poll_seconds: number };

/** Starts warming every node of the cluster through the job API; `local` when shards run on its own machine. */
const startClusterWarmActivity = df.app.activity(DatabaseActivities.startClusterWarm, {
  handler: explained(async (input: WarmupInput): Promise<ClusterWarmStart> => {
    try {
      const view = await appContext.jobApi.startWarmup(input.name);
      await databaseState().patch(input.name, { warm_state: "warming" });
      await recordClusterWarmup(view, input.operation_id);
      return { mode: "cluster", view, poll_seconds: appContext.config.jobPollIntervalSeconds };
    } catch (error) {
      if (error instanceof ConflictError) return { mode: "local" };
      throw error;
    }
  }),
});

const readClusterWarmActivity = df.app.activity(DatabaseActivities.readClusterWarm, {
  handler: explained(async (input: WarmupInput): Promise<ClusterWarmup> => {
    const view = await appContext.jobApi.getWarmup(input.name);
    await recordClusterWarmup(view, input.operation_id);
    return view;
  }),
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
      return {
        outcome: "failed",
        error: error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error),
      };
    }
  };
}

const prepareDatabase = singleActivityOperation(prepareReleaseActivity, "preparing");
/**
 * Adding a database from an upload: the build (its steps recorded with the name's claim while it
 * runs), then the claim let go — after the orchestration took the steps into its own status, so
 * the operation reports them throughout.
 */
const addDatabase: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<AddDatabaseInput>();
  context.df.setCustomStatus({ phase: "building", ...input });
  let result: { outcome: string; error?: string; steps?: unknown };
  try {
    result = yield addDatabaseActivity(input);
  } catch (error) {
    // The library words an activity failure as "<reason> \n <details>": keep the reason alone.
    result = {
      outcome: "failed",
      error: error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error),
    };
  }
  context.df.setCustomStatus({ phase: "releasing", ...input, ...(result.steps ? { steps: result.steps } : {}) });
  try {
    yield releaseClaimActivity(input);
  } catch {
    // A claim not let go is collected by the upload sweep once its operation has ended.
  }
  return result;
};
/**
 * Warm-up: on a cluster, one Job per node fills that node's cache (the job API runs them); the
 * operation reports each node's progress (custom status) until every node is done. With the local
 * executor, this machine reads its copy of the release into the page cache instead.
 */
const warmDatabase: OrchestrationHandler = function* (context: OrchestrationContext) {
  const requested = context.df.getInput<{ name: string }>();
  context.df.setCustomStatus({ phase: "warming", ...requested });
  // The instance id names this warm-up, so its failure is one event however often an activity runs.
  const input: WarmupInput = { ...requested, operation_id: context.df.instanceId };
  try {
    const started: ClusterWarmStart = yield startClusterWarmActivity(input);
    if (started.mode === "local") {
      const result: object = yield warmReleaseActivity(input);
      return { outcome: "succeeded", ...result };
    }
    let view = started.view;
    while (view.state === "running") {
      context.df.setCustomStatus({ phase: "warming", name: view.database, release: view.release, nodes: view.nodes });
      yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + started.poll_seconds * 1000));
      view = yield readClusterWarmActivity(input);
    }
    context.df.setCustomStatus({ phase: view.state, name: view.database, release: view.release, nodes: view.nodes });
    if (view.state === "failed") return { outcome: "failed", error: clusterWarmupFailure(view), nodes: view.nodes };
    return { outcome: "succeeded", name: view.database, version: view.release, nodes: view.nodes };
  } catch (error) {
    return {
      outcome: "failed",
      error: error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error),
    };
  }
};
const checkDatabaseUpdates = singleActivityOperation(checkUpdatesActivity, "checking");

df.app.orchestration(Orchestrations.prepareDatabase, prepareDatabase);
df.app.orchestration(Orchestrations.addDatabase, addDatabase);
df.app.orchestration(Orchestrations.warmDatabase, warmDatabase);
df.app.orchestration(Orchestrations.checkDatabaseUpdates, checkDatabaseUpdates);

/** The scheduled update check (spec's check_database_updates): a timer starting the orchestration. */
app.timer("databaseUpdateCheckTimer", {
  // The validated setting (default included), so Azure's host and the config never disagree.
  schedule: appContext.config.dbUpdateCheckSchedule,
  extraInputs: [df.input.durableClient()],
  handler: async (timer, context) => {
    const instanceId = await df
      .getClient(context)
      .startNew(Orchestrations.checkDatabaseUpdates, { instanceId: newOperationId() });
    appContext.logger.info("database update check started", { operation_id: instanceId, past_due: timer.isPastDue });
  },
});

/**
 * The sweep of database uploads a crash left behind (a claim untouched for ten minutes whose build
 * never started or has ended, and stored uploads no claim records): both are removed, so the name
 * is free again and no file waits forever (shared/databases/name-claims.ts).
 */
app.timer("databaseUploadSweepTimer", {
  schedule: appContext.config.dbUploadSweepSchedule,
  extraInputs: [df.input.durableClient()],
  handler: async (_timer, context) => {
    const swept = await sweepStaleClaims({
      claims: databaseClaims(),
      uploads: databaseUploads(),
      orchestrations: orchestrationClient(context),
      logger: appContext.logger,
    });
    if (swept.claims + swept.uploads > 0) appContext.logger.info("database uploads swept", { ...swept });
  },
});
