import type { Caller } from "../auth/roles.js";
import { DependencyUnavailableError, NotFoundError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import { newOperationId, OPERATION_TYPES, type OperationView, operationView } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { DatabaseCatalog } from "./catalog-types.js";
import { databaseSummary } from "./database-catalog.js";
import type { DatabaseState, DatabaseStateStore } from "./database-state.js";

/** What the dashboard's database service is built from. */
export interface DatabaseServiceDependencies {
  /** The prepared databases; undefined when no database store is configured (`DATABASES_DIR`). */
  catalog: DatabaseCatalog | undefined;
  /** Warm-up and update-check state per database. */
  states: Pick<DatabaseStateStore, "get">;
  /** The durable client port: starts the prepare and warm-up orchestrations. */
  orchestrations: OrchestrationClient;
  audit: Pick<AuditLog, "record">;
  /** The request's logger. */
  logger: Logger;
  /** Whether a release source is configured (`DATABASE_SOURCE_URL`); prepare needs one. */
  sourceConfigured: boolean;
  /** Partitions each prepared release is built with. */
  partitions: number;
}

/** Options of the service's privileged acts: the request they are audited under. */
export interface DatabaseActOptions {
  requestId: string;
  /** The operation (orchestration instance) id to start; a caller that must not start twice fixes it in advance. */
  operationId?: string;
}

/** How long a caller of a database operation is asked to wait between polls. */
const OPERATION_POLL_AFTER_SECONDS = 5;

/** A database as the dashboard lists it: its release summary and what is known about it beyond. */
export type DatabaseListing = ReturnType<typeof databaseSummary> &
  Pick<DatabaseState, "warm_state" | "warmed_at" | "update_available" | "latest_release" | "checked_at">;

/**
 * The dashboard's databases: the prepared releases with their warm-up and update state, and the
 * prepare and warm-up operations (each started as an orchestration, audited, answered as a queued
 * operation to poll).
 */
export function createDatabaseService(dependencies: DatabaseServiceDependencies) {
  const { states, orchestrations, audit, logger } = dependencies;

  function catalog(): DatabaseCatalog {
    if (!dependencies.catalog) throw new DependencyUnavailableError("no database store is configured (DATABASES_DIR)");
    return dependencies.catalog;
  }

  async function startOperation(
    caller: Caller,
    orchestration: string,
    input: { name: string } & Record<string, unknown>,
    options: DatabaseActOptions,
  ): Promise<OperationView> {
    const operationId = options.operationId ?? newOperationId();
    await orchestrations.startNew(orchestration, { instanceId: operationId, input });
    await audit.record({
      actor: { oid: caller.oid, name: caller.name },
      action: `database.${orchestration === Orchestrations.prepareDatabase ? "prepare" : "warmup"}`,
      target: `blast_database/${input.name}`,
      outcome: "succeeded",
      request_id: options.requestId,
      details: { operation_id: operationId },
    });
    const now = new Date().toISOString();
    return operationView({
      operationId,
      operationType: OPERATION_TYPES[orchestration] ?? orchestration,
      state: "queued",
      createdAt: now,
      updatedAt: now,
      pollAfterSeconds: OPERATION_POLL_AFTER_SECONDS,
      target: { resource_type: "blast_database", name: input.name },
    });
  }

  return {
    /** Every prepared database with its warm-up and update state. */
    async list(): Promise<DatabaseListing[]> {
      const entries = await catalog().list();
      return Promise.all(
        entries.map(async (entry) => {
          const state = await states.get(entry.manifest.name);
          const serving = entry.manifest.version;
          return {
            ...databaseSummary(entry),
            // Warm-up state belongs to a release: a newer release serving is cold until warmed.
            warm_state: state.warmed_version === serving || state.warm_state === "warming" ? state.warm_state : "cold",
            warmed_at: state.warmed_version === serving ? state.warmed_at : null,
            // A check that read the catalog just before a prepare swapped in its release may flag the
            // release now serving; that is not an update.
            update_available: state.update_available && state.latest_release !== serving,
            latest_release: state.latest_release,
            checked_at: state.checked_at,
          };
        }),
      );
    },

    /** Starts preparing the source's latest release of `name` (audited). */
    async prepare(caller: Caller, name: string, options: DatabaseActOptions): Promise<OperationView> {
      if (!dependencies.sourceConfigured)
        throw new DependencyUnavailableError("no database source is configured (DATABASE_SOURCE_URL)");
      logger.info("database prepare requested", { name, oid: caller.oid });
      return startOperation(
        caller,
        Orchestrations.prepareDatabase,
        { name, partitions: dependencies.partitions },
        options,
      );
    },

    /** Starts reading a prepared database's files into the page cache (audited). */
    async warmUp(caller: Caller, name: string, options: DatabaseActOptions): Promise<OperationView> {
      if (!(await catalog().get(name))) throw new NotFoundError(`database '${name}' is not prepared`);
      logger.info("database warm-up requested", { name, oid: caller.oid });
      return startOperation(caller, Orchestrations.warmDatabase, { name }, options);
    },
  };
}

/** The database service's interface. */
export type DatabaseService = ReturnType<typeof createDatabaseService>;
