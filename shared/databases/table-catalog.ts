import { access } from "node:fs/promises";
import path from "node:path";
import { odata, type TableClient } from "@azure/data-tables";
import { DATABASE_NAME, type DatabaseManifest } from "../blast/database-builder.js";
import { openBlobContainer } from "../storage/blob-container.js";
import { isLoopbackUrl, storageEndpoint } from "../storage/endpoints.js";
import type { StorageTarget } from "../storage/storage-connection.js";
import { tableOpener } from "../storage/table-source.js";
import { isStatus, packText, unpackText } from "../storage/table-text.js";
import type { DatabaseCatalog, DatabaseEntry, ReleasePublisher } from "./catalog-types.js";
import { RELEASE_NAME } from "./ncbi-source.js";
import { fillReleaseCache } from "./node-cache.js";
import { ReleaseStore } from "./release-store.js";
import { holdRelease, RELEASES_KEPT, releaseHold } from "./releases.js";

export type { ReleasePublisher };

/** The catalog's table in the workload storage account. */
export const CATALOG_TABLE = "databasecatalog";
/** The Blob container holding published releases. */
export const RELEASES_CONTAINER = "databases";
/** A hold older than this no longer keeps a release (its job API died without letting go). */
const HOLD_EXPIRES_MS = 48 * 3600 * 1000;
const HOLDER = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The release store and catalog table of one storage account, built in one place (so how storage
 * clients authenticate is decided here for every database reader and writer).
 */
export function openDatabaseStorage(storage: StorageTarget): {
  store: ReleaseStore;
  table: () => Promise<TableClient>;
  locationScheme: "local" | "blob";
} {
  const connectionString =
    typeof storage === "string" ? storage : storage.kind === "connection-string" ? storage.connectionString : undefined;
  const endpoint = connectionString === undefined ? undefined : storageEndpoint(connectionString, "blob");
  let openTable: (() => Promise<TableClient>) | undefined;
  return {
    // The Blob SDK (which takes http:// endpoints without an option) is loaded on first use.
    store: new ReleaseStore(() => openBlobContainer(storage, RELEASES_CONTAINER)),
    // Opened on first use: a shard pod reaches Blob storage only (its identity settings name no Table URL).
    table: () => {
      openTable ??= tableOpener(storage, CATALOG_TABLE);
      return openTable();
    },
    // The embedded stack's storage (Azurite on this machine) keeps the `local://` locations it always reported.
    locationScheme: endpoint !== undefined && isLoopbackUrl(endpoint) ? "local" : "blob",
  };
}

/** What {@link createTableDatabaseCatalog} needs. */
export interface TableCatalogOptions {
  table: () => Promise<TableClient>;
  store: ReleaseStore;
  /** `<scheme>://databases/<db>/<release>` is each entry's credential-free `location` (default `blob`). */
  locationScheme?: "local" | "blob";
  /** This machine's copy of releases, `<cacheRoot>/<db>/<release>/` (each entry's `root`). */
  cacheRoot: string;
  /**
   * Fill `root` from the store when a release is read and its folder is missing (the local
   * executor runs BLAST in it; the Kubernetes executor leaves that to each node's shard init).
   */
  fillCache?: boolean;
  /**
   * Also mark holds in the cache folder (`.in-use/`), so pruning that folder (the local stack's
   * prepare shares it) keeps a release this machine's jobs search.
   */
  holdLocally?: boolean;
  /**
   * A folder-based catalog (the layout before releases were published to storage): a database it
   * holds that the table does not know yet is published from it once, on first read.
   */
  importFrom?: DatabaseCatalog;
}

export type TableDatabaseCatalog = DatabaseCatalog &
  ReleasePublisher & {
    /** Releases a job holds (a live hold), for GC and node eviction. */
    heldReleases(name: string): Promise<Set<string>>;
    /** Removes published releases that are neither current, among the newest kept, nor held. Returns their names. */
    collect(name: string, keep?: number): Promise<string[]>;
  };

function dbRowKey(name: string): { partitionKey: string; rowKey: string } {
  return { partitionKey: "db", rowKey: name };
}

/**
 * The database catalog in Table storage (`databasecatalog`), shared by the job API on the cluster
 * and the Functions app: one `db` row per database naming its current release (with that
 * release's manifest), one `release-<db>` row per published release, and `hold-<db>` rows of the
 * jobs searching a release. Release files live in the {@link ReleaseStore}; a release is in the
 * table only after its files and `release.json` are published.
 */
export function createTableDatabaseCatalog(options: TableCatalogOptions): TableDatabaseCatalog {
  const { store, cacheRoot } = options;
  const importing = new Map<string, Promise<void>>();
  /** Databases this process has seen in the table: never imported from the folder again. */
  const known = new Set<string>();

  const entryOf = (manifest: DatabaseManifest): DatabaseEntry => ({
    manifest,
    root: path.join(cacheRoot, manifest.name, manifest.version),
    location: `${options.locationScheme ?? "blob"}://${RELEASES_CONTAINER}/${manifest.name}/${manifest.version}`,
  });

  async function readRow(partitionKey: string, rowKey: string): Promise<Record<string, unknown> | undefined> {
    const table = await options.table();
    try {
      return await table.getEntity<Record<string, unknown>>(partitionKey, rowKey);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async function publish(dir: string, manifest: DatabaseManifest): Promise<void> {
    if (!DATABASE_NAME.test(manifest.name) || !RELEASE_NAME.test(manifest.version))
      throw new TypeError("invalid database release");
    await store.publish(manifest.name, manifest.version, dir);
    const table = await options.table();
    const doc = packText("manifest", JSON.stringify(manifest));
    const now = new Date().toISOString();
    await table.upsertEntity(
      { partitionKey: `release-${manifest.name}`, rowKey: manifest.version, ...doc, published_at: now },
      "Replace",
    );
    await table.upsertEntity(
      { ...dbRowKey(manifest.name), current: manifest.version, ...doc, updated_at: now },
      "Replace",
    );
    // Releases now beyond the kept few and held by no job are freed; that must not fail the publish.
    await catalog.collect(manifest.name).catch(() => []);
  }

  /** Publishes a database the table does not know from the folder catalog (once per process and database). */
  async function importFromFolder(name: string): Promise<void> {
    if (!options.importFrom || known.has(name)) return;
    let running = importing.get(name);
    if (!running) {
      running = (async () => {
        if (!(await readRow("db", name))) {
          const entry = await options.importFrom?.get(name);
          if (!entry) return;
          await publish(entry.root, entry.manifest);
        }
        known.add(name);
      })().finally(() => importing.delete(name));
      importing.set(name, running);
    }
    await running;
  }

  async function ensureLocal(entry: DatabaseEntry): Promise<DatabaseEntry> {
    if (!options.fillCache) return entry;
    const present = await access(path.join(entry.root, "manifest.json")).then(
      () => true,
      () => false,
    );
    if (!present)
      await fillReleaseCache({ store, cacheRoot, database: entry.manifest.name, release: entry.manifest.version });
    return entry;
  }

  const catalog: TableDatabaseCatalog = {
    publish,

    async list() {
      if (options.importFrom)
        for (const entry of await options.importFrom.list()) await importFromFolder(entry.manifest.name);
      const table = await options.table();
      const entries: DatabaseEntry[] = [];
      for await (const row of table.listEntities<Record<string, unknown>>({
        queryOptions: { filter: odata`PartitionKey eq 'db'` },
      })) {
        entries.push(entryOf(JSON.parse(unpackText(row, "manifest")) as DatabaseManifest));
      }
      return entries.sort((a, b) => a.manifest.name.localeCompare(b.manifest.name));
    },

    async get(name, version) {
      if (!DATABASE_NAME.test(name) || (version !== undefined && !RELEASE_NAME.test(version))) return undefined;
      let row = version === undefined ? await readRow("db", name) : await readRow(`release-${name}`, version);
      if (!row && options.importFrom) {
        await importFromFolder(name);
        row = version === undefined ? await readRow("db", name) : await readRow(`release-${name}`, version);
      }
      return row ? ensureLocal(entryOf(JSON.parse(unpackText(row, "manifest")) as DatabaseManifest)) : undefined;
    },

    async hold(name, version, holder) {
      if (!DATABASE_NAME.test(name) || !RELEASE_NAME.test(version) || !HOLDER.test(holder)) return;
      const table = await options.table();
      await table.upsertEntity(
        { partitionKey: `hold-${name}`, rowKey: `${version}_${holder}`, since: new Date().toISOString() },
        "Replace",
      );
      if (options.holdLocally) await holdRelease(path.join(cacheRoot, name), version, holder);
    },

    async release(name, version, holder) {
      if (!DATABASE_NAME.test(name) || !RELEASE_NAME.test(version) || !HOLDER.test(holder)) return;
      const table = await options.table();
      await table.deleteEntity(`hold-${name}`, `${version}_${holder}`).catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
      if (options.holdLocally) await releaseHold(path.join(cacheRoot, name), version, holder);
    },

    async heldReleases(name) {
      const held = new Set<string>();
      if (!DATABASE_NAME.test(name)) return held;
      const table = await options.table();
      const now = Date.now();
      for await (const row of table.listEntities<Record<string, unknown>>({
        queryOptions: { filter: odata`PartitionKey eq ${`hold-${name}`}` },
      })) {
        const since = Date.parse(String(row.since ?? ""));
        if (Number.isFinite(since) && now - since <= HOLD_EXPIRES_MS) held.add(String(row.rowKey).slice(0, 19));
      }
      return held;
    },

    async collect(name, keep = RELEASES_KEPT) {
      if (!DATABASE_NAME.test(name)) return [];
      const current = (await readRow("db", name))?.current;
      const held = await catalog.heldReleases(name);
      const published = (await store.releases(name)).filter((r) => r !== current).reverse();
      const removed: string[] = [];
      const table = await options.table();
      for (const release of published.slice(Math.max(0, keep - 1))) {
        if (held.has(release)) continue;
        // The table row goes first: no reader is sent to a release whose files are being deleted.
        await table.deleteEntity(`release-${name}`, release).catch((error: unknown) => {
          if (!isStatus(error, 404)) throw error;
        });
        await store.remove(name, release);
        removed.push(release);
      }
      return removed.sort();
    },
  };
  return catalog;
}
