import type { Caller } from "../auth/roles.js";
import type { MoleculeType } from "../blast/programs.js";
import { ConflictError, DependencyUnavailableError, InvalidFieldError, NotFoundError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import { newOperationId, OPERATION_TYPES, type OperationView, operationView } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { DatabaseCatalog, DatabaseEntry } from "./catalog-types.js";
import { databaseSummary } from "./database-catalog.js";
import type { DatabaseState, DatabaseStateStore } from "./database-state.js";
import { initialAddSteps } from "./build-steps.js";
import { FastaUploadCheck, type FastaUploadSummary, UploadTooLargeError } from "./fasta-upload.js";
import { collectIfAbandoned, type DatabaseNameClaims, type HeldClaim, keepAlive } from "./name-claims.js";
import type { DatabaseUploadStore } from "./upload-store.js";

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
  /** Where uploaded FASTA files wait for their build; undefined when uploads are not offered. */
  uploads?: DatabaseUploadStore;
  /** Names being added from uploads: makes a name's claim atomic (required with `uploads`). */
  claims?: DatabaseNameClaims;
  /** Largest FASTA upload, in bytes (`DATABASE_UPLOAD_MAX_BYTES`). */
  uploadMaxBytes?: number;
  /** Memory of a search node and what a search may use of it (the job API's view); null when unknown. */
  nodeMemory?: () => Promise<NodeMemory | null>;
}

/** A search node's memory as the job API reports it. */
export interface NodeMemory {
  memory_bytes: number;
  /** Memory less the job API's margin: what one search may cache. */
  usable_bytes: number;
}

/** What the Databases page needs to offer adding a database: whether prepare works, the upload limit, node memory. */
export interface AddingOptions {
  prepare: { available: boolean; reason: string | null };
  upload: { available: boolean; reason: string | null; max_bytes: number };
  node: NodeMemory | null;
}

/** A database to build from an uploaded FASTA, as the user confirmed it. */
export interface UploadRequest {
  name: string;
  type: MoleculeType;
  partitions: number;
}

/** The answer to an upload: the build operation it started and what the file holds. */
export interface UploadStarted {
  operation: OperationView;
  upload: FastaUploadSummary;
}

/** The reason prepare is not offered without a release source, as the page shows it. */
export const PREPARE_NEEDS_SOURCE =
  "Prepare downloads a database's releases from a source in NCBI's layout; set DATABASE_SOURCE_URL to one (for example https://ftp.ncbi.nlm.nih.gov/blast/db/v5/) to use it. Without one, add a database by uploading a FASTA file.";

/** Options of the service's privileged acts: the request they are audited under. */
export interface DatabaseActOptions {
  requestId: string;
  /** The operation (orchestration instance) id to start; a caller that must not start twice fixes it in advance. */
  operationId?: string;
}

/** The audit action of each database operation. */
const ACTIONS: Readonly<Record<string, string>> = {
  [Orchestrations.prepareDatabase]: "prepare",
  [Orchestrations.warmDatabase]: "warmup",
  [Orchestrations.addDatabase]: "add",
};

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
      action: `database.${ACTIONS[orchestration] ?? "warmup"}`,
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

  /** A 409 for a name a prepared database has. */
  async function refuseExisting(name: string): Promise<void> {
    if (await catalog().get(name))
      throw new ConflictError(
        `a database named '${name}' exists already; choose another name (a prepared database gets new releases with Prepare)`,
      );
  }

  /** The 409 for a name another upload holds. */
  function beingAdded(name: string, held: HeldClaim): ConflictError {
    return new ConflictError(
      `a database named '${name}' is being added by another upload (operation ${held.operation_id}); wait for it to finish or choose another name`,
    );
  }

  /** A release as listed: its summary and the state of the release now serving. */
  async function listing(entry: DatabaseEntry): Promise<DatabaseListing> {
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
  }

  return {
    /** Every prepared database with its warm-up and update state. */
    async list(): Promise<DatabaseListing[]> {
      const entries = await catalog().list();
      return Promise.all(entries.map(listing));
    },

    /** One prepared database with its warm-up and update state; undefined when it is not prepared. */
    async get(name: string): Promise<DatabaseListing | undefined> {
      const entry = await catalog().get(name);
      return entry ? listing(entry) : undefined;
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

    /** Whether prepare and upload are offered (with the reason when not), the upload limit and the nodes' memory. */
    async addingOptions(): Promise<AddingOptions> {
      const node = await (dependencies.nodeMemory?.() ?? Promise.resolve(null)).catch((error: unknown) => {
        logger.warn("node memory unknown", { error: error instanceof Error ? error.message : String(error) });
        return null;
      });
      const uploadReason = !dependencies.catalog
        ? "no database store is configured (DATABASES_DIR)"
        : !dependencies.uploads || !dependencies.claims
          ? "uploads are not configured"
          : null;
      return {
        prepare: {
          available: dependencies.sourceConfigured,
          reason: dependencies.sourceConfigured ? null : PREPARE_NEEDS_SOURCE,
        },
        upload: { available: uploadReason === null, reason: uploadReason, max_bytes: dependencies.uploadMaxBytes ?? 0 },
        node,
      };
    },

    /**
     * Adds a database from an uploaded FASTA (audited): the body is checked while it streams to the
     * upload store (never held whole), then the build runs as an operation. A refused file (422,
     * 413) leaves nothing stored and nothing registered.
     */
    async upload(
      caller: Caller,
      request: UploadRequest,
      body: AsyncIterable<Uint8Array> | null,
      options: DatabaseActOptions & { declaredBytes?: number },
    ): Promise<UploadStarted> {
      const { uploads, claims } = dependencies;
      if (!uploads || !claims) throw new DependencyUnavailableError("uploads are not configured");
      const maxBytes = dependencies.uploadMaxBytes ?? 0;
      if (options.declaredBytes !== undefined && options.declaredBytes > maxBytes)
        throw new UploadTooLargeError(maxBytes);
      await refuseExisting(request.name);
      const operationId = options.operationId ?? newOperationId();
      const blob = `${operationId}.fa`;
      // The name is claimed before a byte is stored: of simultaneous uploads of one name, one wins.
      const owner = { operation_id: operationId, upload: blob };
      let claimed = await claims.claim(request.name, owner);
      if ("held" in claimed && (await collectIfAbandoned(claimed.held, { claims, uploads, orchestrations, logger })))
        claimed = await claims.claim(request.name, owner);
      if ("held" in claimed) throw beingAdded(request.name, claimed.held);
      const { claim } = claimed;
      try {
        // A database published (and its claim let go) between the first check and the claim.
        await refuseExisting(request.name);
        const check = new FastaUploadCheck(request.type, maxBytes);
        let summary: FastaUploadSummary | undefined;
        const alive = keepAlive(claim);
        let stillHeld = false;
        try {
          await uploads.write(
            blob,
            (async function* () {
              if (body) {
                for await (const chunk of body) {
                  check.push(chunk);
                  yield chunk;
                }
              }
              summary = check.finish();
            })(),
          );
        } finally {
          stillHeld = await alive.stop();
        }
        if (!summary) throw new Error("the upload ended without its check");
        if (request.partitions > summary.sequences) {
          await uploads.delete(blob);
          throw new InvalidFieldError(
            ["query", "partitions"],
            `cannot split ${summary.sequences} sequences into ${request.partitions} partitions: choose at most ${summary.sequences}`,
          );
        }
        // Still the name's claim (not swept as abandoned) right before its build starts; the claim
        // now shows the build's steps, the upload's check done.
        const steps = initialAddSteps(request.partitions >= 2, new Date().toISOString());
        if (!stillHeld || !(await claim.touch(steps))) {
          await uploads.delete(blob);
          throw new ConflictError(
            `the upload of '${request.name}' stopped showing it was alive and its name was given up; upload it again`,
          );
        }
        logger.info("database upload stored", { name: request.name, bytes: summary.bytes, oid: caller.oid });
        try {
          const operation = await startOperation(
            caller,
            Orchestrations.addDatabase,
            { name: request.name, type: request.type, partitions: request.partitions, upload: blob },
            { ...options, operationId },
          );
          return { operation, upload: summary };
        } catch (error) {
          await uploads.delete(blob).catch(() => undefined);
          throw error;
        }
      } catch (error) {
        // Refused or failed before its build started: the name is free again (the build lets it go otherwise).
        await claim.release().catch((releaseError: unknown) =>
          logger.warn("database name claim not released", {
            name: request.name,
            error: releaseError instanceof Error ? releaseError.message : String(releaseError),
          }),
        );
        throw error;
      }
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
