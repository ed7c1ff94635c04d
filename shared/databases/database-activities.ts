import type { Logger } from "../logging/logger.js";
import { failureText, recordSignal, warmupFailedEvent } from "../ops/emitters/signal-events.js";
import type { EventLog } from "../ops/events.js";
import type { DatabaseCatalog, ReleasePublisher } from "./catalog-types.js";
import type { DatabaseState } from "./database-state.js";
import type { NcbiSource } from "./ncbi-source.js";
import { checkForUpdates, prepareDatabaseRelease } from "./prepare.js";
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
}

/** What the prepare activity returns: the release it made current. */
export interface PreparedRelease {
  name: string;
  version: string;
  sequences: number;
  letters: number;
  partitions: number;
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
    return {
      name: manifest.name,
      version: manifest.version,
      sequences: manifest.sequences,
      letters: manifest.letters,
      partitions: manifest.partitions.length,
    };
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
