import { parseEnv } from "../shared/config/env.js";
import { evictCachedReleases, fillReleaseCache } from "../shared/databases/node-cache.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../shared/databases/table-catalog.js";
import { createLogger } from "../shared/logging/logger.js";
import { storageConnectionFromSettings, WARM_STORAGE_SETTINGS } from "../shared/storage/storage-connection.js";
import { warmSettingsSchema } from "./pod-settings.js";

/**
 * A warm-up pod (`node dist/jobapi/warm.js`), one per node of the BLAST pool: fills the node's
 * cache with the whole release (verified against its manifest, under the same lock the shards
 * take), logging its progress file by file (`warm progress` lines the job API reads back), then
 * evicts the node's other releases of the database that are neither current nor held by a job.
 */
async function main(): Promise<void> {
  const e = parseEnv(warmSettingsSchema, process.env, (values) => ({
    ...values,
    storage: storageConnectionFromSettings(values, WARM_STORAGE_SETTINGS),
  }));
  const logger = createLogger({ level: e.LOG_LEVEL, base: { service: "warm", node: e.WARM_NODE } });
  const stop = new AbortController();
  process.once("SIGTERM", () => stop.abort(new Error("pod terminating")));
  const storage = openDatabaseStorage(e.storage);
  const manifest = await storage.store.manifest(e.WARM_DB_NAME, e.WARM_DB_RELEASE);
  const total = manifest?.files.reduce((sum, f) => sum + f.size, 0) ?? 0;
  const filled = await fillReleaseCache({
    store: storage.store,
    cacheRoot: e.WARM_DB_CACHE_ROOT,
    database: e.WARM_DB_NAME,
    release: e.WARM_DB_RELEASE,
    signal: stop.signal,
    onFile: (_file, done) =>
      logger.info("warm progress", {
        files_done: done.files,
        files_total: manifest?.files.length ?? 0,
        bytes_done: done.bytes,
        bytes_total: total,
      }),
  });
  const catalog = createTableDatabaseCatalog({ ...storage, cacheRoot: e.WARM_DB_CACHE_ROOT });
  const current = (await catalog.get(e.WARM_DB_NAME))?.manifest.version;
  const keep = new Set([
    e.WARM_DB_RELEASE,
    ...(current ? [current] : []),
    ...(await catalog.heldReleases(e.WARM_DB_NAME)),
  ]);
  const evicted = await evictCachedReleases(e.WARM_DB_CACHE_ROOT, e.WARM_DB_NAME, keep);
  logger.info("node warm", {
    downloaded: filled.downloaded.length,
    verified: filled.verified,
    stamped: filled.stamped,
    bytes_total: total,
    evicted,
  });
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`warm-up failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
