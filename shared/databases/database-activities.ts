import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { describeCloudAuthorizationError } from "../auth/cloud-authorization.js";
import type { Logger } from "../logging/logger.js";
import { failureText, recordSignal, warmupFailedEvent } from "../ops/emitters/signal-events.js";
import type { EventLog } from "../ops/events.js";
import type { DatabaseCatalog, ReleasePublisher } from "./catalog-types.js";
import { publishDatabase } from "./database-catalog.js";
import type { DatabaseState } from "./database-state.js";
import type { NcbiSource } from "./ncbi-source.js";
import { checkForUpdates, prepareDatabaseRelease } from "./prepare.js";
import { type AddStep, addStepTracker, initialAddSteps } from "./build-steps.js";
import type { DatabaseNameClaims } from "./name-claims.js";
import type { DatabaseUploadStore } from "./upload-store.js";
import { warmDatabaseFiles } from "./warmup.js";

/** What the database operations' activities work with; each is built from these, so tests pass fakes. */
export interface DatabaseActivityDependencies {
  /** Where releases are prepared (`DATABASES_DIR`); throws when that is not configured. */
  databasesDir: () => string;
  /** The release source (`DATABASE_SOURCE_URL`); throws when that is not configured. */
  source: () => NcbiSource;
  /** The prepared releases (the table catalog in the workload storage account; `databasesDir` for the folder one). */
  catalog: (databasesDir: string) => DatabaseCatalog;
  /** Where a prepared release is published so the job API and the Functions app see it (the table catalog). */
  publisher?: () => ReleasePublisher;
  /** The dashboard's per-database state (warm-up and update checks). */
  state: { patch(name: string, change: Partial<DatabaseState>): Promise<unknown> };
  events: Pick<EventLog, "record">;
  logger: Logger;
  /** Clock for the state's timestamps. */
  now?: () => Date;
  /** Uploaded FASTA files (the add activity reads and then removes its upload). */
  uploads?: () => DatabaseUploadStore;
  /** Names being added from uploads: the add activity lets its name go when its build ends. */
  claims?: () => DatabaseNameClaims;
  /** Where this machine builds releases from uploads (`DATABASES_DIR`, else a temporary folder). */
  buildRoot?: () => string;
}

/** What the prepare activity returns: the release it made current. */
export interface PreparedRelease {
  name: string;
  version: string;
  sequences: number;
  letters: number;
  partitions: number;
}

/** The release as the prepare and add activities report it. */
function releaseSummary(
  manifest: Omit<PreparedRelease, "partitions"> & { partitions: readonly unknown[] },
): PreparedRelease {
  const { name, version, sequences, letters } = manifest;
  return { name, version, sequences, letters, partitions: manifest.partitions.length };
}

/** One database as the update check reports it. */
export interface CheckedDatabase {
  name: string;
  update_available: boolean;
  latest_release: string;
}

const clock = (dependencies: DatabaseActivityDependencies) => (dependencies.now ?? (() => new Date()))();

/** Prepares the source's latest release of a database and makes it current; its warm-up starts over (cold). */
export function createPrepareDatabaseActivity(dependencies: DatabaseActivityDependencies) {
  return async (input: { name: string; partitions: number }): Promise<PreparedRelease> => {
    const manifest = await prepareDatabaseRelease({
      source: dependencies.source(),
      name: input.name,
      databasesDir: dependencies.databasesDir(),
      partitions: input.partitions,
      publisher: dependencies.publisher?.(),
    });
    await dependencies.state.patch(input.name, { update_available: false, warm_state: "cold", warmed_version: null });
    dependencies.logger.info("database prepared", { name: manifest.name, version: manifest.version });
    return releaseSummary(manifest);
  };
}

/**
 * Reads a prepared database's current release into the page cache, keeping its warm state current.
 * A failure records a `database.warmup_failed` event once per warm-up (`operation_id`).
 */
export function createWarmDatabaseActivity(dependencies: DatabaseActivityDependencies) {
  return async (input: {
    name: string;
    operation_id?: string;
  }): Promise<{ name: string; version: string; bytes: number }> => {
    const entry = await dependencies.catalog(dependencies.databasesDir()).get(input.name);
    if (!entry) throw new Error(`database ${input.name} is not prepared`);
    await dependencies.state.patch(input.name, { warm_state: "warming" });
    try {
      const bytes = await warmDatabaseFiles(entry.root);
      await dependencies.state.patch(input.name, {
        warm_state: "warm",
        warmed_version: entry.manifest.version,
        warmed_at: clock(dependencies).toISOString(),
      });
      return { name: input.name, version: entry.manifest.version, bytes };
    } catch (error) {
      await dependencies.state.patch(input.name, { warm_state: "failed" });
      const event = warmupFailedEvent({
        database: input.name,
        release: entry.manifest.version,
        attempt: input.operation_id ?? "unnamed",
        mode: "local",
        reason: failureText(error),
      });
      await recordSignal(dependencies.events, event, dependencies.logger);
      throw error;
    }
  };
}

/**
 * The scheduled update check: records for every prepared database whether the source has a newer
 * release, and an event (once per database and release) for each one that has.
 */
export function createCheckDatabaseUpdatesActivity(dependencies: DatabaseActivityDependencies) {
  return async (): Promise<CheckedDatabase[]> => {
    const results = await checkForUpdates({
      source: dependencies.source(),
      catalog: dependencies.catalog(dependencies.databasesDir()),
    });
    const checkedAt = clock(dependencies).toISOString();
    for (const result of results) {
      await dependencies.state.patch(result.name, {
        update_available: result.update_available,
        latest_release: result.latest_release,
        checked_at: checkedAt,
      });
      if (result.update_available) {
        dependencies.logger.info("database update available", {
          name: result.name,
          latest_release: result.latest_release,
        });
        await dependencies.events.record({
          idempotency_key: `database.update_available/${result.name}/${result.latest_release}`,
          source: "database.update_check",
          event_type: "database.update_available",
          correlation_id: result.name,
          resource_ref: `blast_database/${result.name}`,
          payload: {
            current_version: result.current_version,
            latest_release: result.latest_release,
            latest_last_updated: result.latest_last_updated,
          },
        });
      }
    }
    return results.map((result) => ({
      name: result.name,
      update_available: result.update_available,
      latest_release: result.latest_release,
    }));
  };
}

/** The add activity's input: the database as the user confirmed it, and its upload's name in the store. */
export interface AddDatabaseInput {
  name: string;
  type: "nucl" | "prot";
  partitions: number;
  upload: string;
}

/** What the add activity answers: the release it made current, or why the build failed; its steps either way. */
export type AddDatabaseResult =
  | ({ outcome: "succeeded"; steps: AddStep[] } & PreparedRelease)
  | { outcome: "failed"; error: string; steps: AddStep[] };

/**
 * Builds a database from an uploaded FASTA (makeblastdb, partitions with the whole database's
 * statistics), publishes it and makes it current; the upload is removed either way (the name's
 * claim by {@link createReleaseAddClaimActivity}). A failed build leaves nothing registered: `buildDatabase` removes its folder and
 * nothing was published. Each step (upload checked, makeblastdb, partitions, published) is
 * recorded in the name's claim as it starts and ends, so the operation reports it while it runs,
 * and answered at the end.
 */
export function createAddDatabaseActivity(dependencies: DatabaseActivityDependencies) {
  return async (input: AddDatabaseInput): Promise<AddDatabaseResult> => {
    const uploads = dependencies.uploads?.();
    if (!uploads || !dependencies.buildRoot) throw new Error("uploads are not configured");
    const claims = dependencies.claims?.();
    // The claim only carries the steps so far: unreadable, the build starts its steps afresh.
    const held = await claims?.get(input.name).catch(() => undefined);
    const tracker = addStepTracker(
      held?.upload === input.upload && held.steps
        ? held.steps
        : initialAddSteps(input.partitions >= 2, clock(dependencies).toISOString()),
      async (steps) => {
        // A step report lost (storage hiccup) must not fail the build: the result carries the steps.
        await claims?.recordSteps(input.name, input.upload, steps).catch((error: unknown) =>
          dependencies.logger.warn("database build step not recorded", {
            name: input.name,
            error: failureText(error),
          }),
        );
      },
      () => clock(dependencies),
    );
    const root = dependencies.buildRoot();
    const staging = path.join(root, ".uploads");
    await mkdir(staging, { recursive: true });
    // The upload's name is `op-<hex>.fa`: no whitespace, as makeblastdb's -in needs.
    const fastaPath = path.join(staging, input.upload);
    try {
      await uploads.downloadToFile(input.upload, fastaPath);
      const entry = await publishDatabase(
        root,
        { name: input.name, fastaPath, type: input.type, partitions: input.partitions },
        dependencies.publisher?.(),
        { onStep: (step, phase) => (phase === "started" ? tracker.start(step) : tracker.succeed(step)) },
      );
      await dependencies.state.patch(input.name, { update_available: false, warm_state: "cold", warmed_version: null });
      const { manifest } = entry;
      dependencies.logger.info("database added from an upload", { name: manifest.name, version: manifest.version });
      return { outcome: "succeeded", ...releaseSummary(manifest), steps: tracker.steps };
    } catch (error) {
      // A missing Azure role is thrown on, so the activity's wrapper reports it (the
      // role_assignment.missing event) and the operation names the role to assign.
      const refusal = describeCloudAuthorizationError(error);
      if (refusal) {
        await tracker.fail(refusal.message);
        throw error;
      }
      // The reason alone (a tool's first line), as the operation shows it.
      const reason = (error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error)).trim();
      await tracker.fail(reason);
      return { outcome: "failed", error: reason || "the build failed", steps: tracker.steps };
    } finally {
      await rm(fastaPath, { force: true });
      await uploads.delete(input.upload);
    }
  };
}

/**
 * Lets the name's claim go once its build ended, published (the catalog now refuses the name) or
 * failed (the name is free again). A separate activity, run after the orchestration took the
 * build's steps into its own status, so the operation shows them without a gap.
 */
export function createReleaseAddClaimActivity(dependencies: DatabaseActivityDependencies) {
  return async (input: AddDatabaseInput): Promise<void> => {
    await dependencies.claims?.().releaseUpload(input.name, input.upload);
  };
}
