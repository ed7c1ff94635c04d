import { mkdir, readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { buildDatabase, DATABASE_NAME, type DatabaseManifest, formatVersion } from "../blast/database-builder.js";
import { syncTree } from "../storage/durable-file.js";
import type { DatabaseCatalog, DatabaseEntry, ReleasePublisher } from "./catalog-types.js";
import { holdRelease, pruneReleases, readCurrent, releaseHold, swapCurrent } from "./releases.js";

export type { DatabaseCatalog, DatabaseEntry };

/** The fields every listing of databases reports (job API and dashboard). */
export function databaseSummary(entry: DatabaseEntry) {
  const { manifest } = entry;
  return {
    name: manifest.name,
    type: manifest.type,
    version: manifest.version,
    letters: manifest.letters,
    sequences: manifest.sequences,
    bytes: manifest.bytes,
    bytes_to_cache: manifest.bytes_to_cache,
    volumes: manifest.volumes,
    partitions: manifest.partitions.length,
  };
}

const VERSION = /^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}$/;

/**
 * Databases on the local file system: `<root>/<name>/<version>/manifest.json` holds each immutable
 * release and `<root>/<name>/current` names the one in service (swapped by an atomic rename).
 */
export function createFileDatabaseCatalog(root: string): DatabaseCatalog {
  async function load(name: string, version: string): Promise<DatabaseEntry | undefined> {
    if (!DATABASE_NAME.test(name) || !VERSION.test(version)) return undefined;
    const dir = path.join(root, name, version);
    try {
      const manifest = JSON.parse(await readFile(path.join(dir, "manifest.json"), "utf8")) as DatabaseManifest;
      return { manifest, root: dir, location: `local://databases/${name}/${version}` };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
  }

  const current = (name: string) => readCurrent(path.join(root, name));

  return {
    async list() {
      let names: string[] = [];
      try {
        names = (await readdir(root, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      }
      const entries: DatabaseEntry[] = [];
      for (const name of names.sort()) {
        const entry = await this.get(name);
        if (entry) entries.push(entry);
      }
      return entries;
    },
    async get(name, version) {
      if (!DATABASE_NAME.test(name)) return undefined;
      const release = version ?? (await current(name));
      return release ? load(name, release) : undefined;
    },
    async hold(name, version, holder) {
      if (DATABASE_NAME.test(name)) await holdRelease(path.join(root, name), version, holder);
    },
    async release(name, version, holder) {
      if (DATABASE_NAME.test(name)) await releaseHold(path.join(root, name), version, holder);
    },
  };
}

/**
 * Builds a database release from a FASTA file into `<root>/<name>/<version>/` and makes it the
 * current one (the pointer is swapped by an atomic rename, so searches never see half a release).
 * With a `publisher` (the table catalog), the release is first published to the workload storage
 * account and made current there, so the job API and the Functions app see it. `onStep` hears
 * makeblastdb, the partitions and the publication start and end.
 */
export async function publishDatabase(
  root: string,
  input: { name: string; fastaPath: string; type: "nucl" | "prot"; partitions: number },
  publisher?: ReleasePublisher,
  options: {
    onStep?: (step: "makeblastdb" | "partitions" | "published", phase: "started" | "done") => Promise<void>;
  } = {},
): Promise<DatabaseEntry> {
  if (!DATABASE_NAME.test(input.name)) throw new Error(`invalid database name '${input.name}'`);
  const version = formatVersion(new Date());
  const dir = path.join(root, input.name, version);
  await mkdir(path.dirname(dir), { recursive: true });
  const manifest = await buildDatabase({ ...input, outDir: dir, version, onStep: options.onStep });
  await options.onStep?.("published", "started");
  // The pointer must never survive a power cut that the release's files did not.
  await syncTree(dir);
  await publisher?.publish(dir, manifest);
  await swapCurrent(path.join(root, input.name), manifest.version);
  await options.onStep?.("published", "done");
  // Older releases beyond the kept few are freed; a failure there must not fail the publish.
  await pruneReleases(path.join(root, input.name)).catch(() => []);
  return { manifest, root: dir, location: `local://databases/${input.name}/${manifest.version}` };
}
