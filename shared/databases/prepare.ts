import { randomUUID } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { runBlastTool } from "../blast/blast-tools.js";
import { buildDatabase, DATABASE_NAME, type DatabaseManifest } from "../blast/database-builder.js";
import { syncTree } from "../storage/durable-file.js";
import type { DatabaseCatalog, ReleasePublisher } from "./catalog-types.js";
import {
  blastDbType,
  type NcbiSource,
  parseSourceTimestamp,
  RELEASE_NAME,
  type ReleaseDatabase,
  ReleaseFormatError,
} from "./ncbi-source.js";
import { claimStaging, pruneReleases, swapCurrent } from "./releases.js";

/** Where a prepared release came from; stored as the extra `source` key of `manifest.json`. */
export interface ManifestSource {
  /** The source's release folder name (also the manifest `version`). */
  release: string;
  /** The source's `last-updated` for this database, as ISO 8601 UTC. */
  last_updated: string;
  /** Volume archives the source published for this release. */
  volumes: number;
}

/** A manifest written by {@link prepareDatabaseRelease}: a {@link DatabaseManifest} plus its source. */
export type PreparedDatabaseManifest = DatabaseManifest & { source?: ManifestSource };

/** A prepare step failed for a reason other than the source's own errors (see ncbi-source). */
export class DatabasePrepareError extends Error {
  readonly database: string;
  readonly release: string | null;
  constructor(message: string, database: string, release: string | null, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DatabasePrepareError";
    this.database = database;
    this.release = release;
  }
}

/** The release does not publish the requested database. */
export class DatabaseNotInReleaseError extends Error {
  readonly database: string;
  readonly release: string;
  constructor(database: string, release: string) {
    super(`release ${release} has no database named ${database}`);
    this.name = "DatabaseNotInReleaseError";
    this.database = database;
    this.release = release;
  }
}

/** The downloaded database does not hold what the metadata promises. */
export class DatabaseVerificationError extends Error {
  readonly database: string;
  readonly release: string;
  readonly expected: { sequences: number; letters: number };
  readonly actual: { sequences: number; letters: number };
  constructor(
    database: string,
    release: string,
    expected: { sequences: number; letters: number },
    actual: { sequences: number; letters: number },
  ) {
    super(
      `${database} ${release}: metadata promises ${expected.sequences} sequences / ${expected.letters} letters, ` +
        `the downloaded volumes hold ${actual.sequences} / ${actual.letters}`,
    );
    this.name = "DatabaseVerificationError";
    this.database = database;
    this.release = release;
    this.expected = expected;
    this.actual = actual;
  }
}

/** Options for {@link prepareDatabaseRelease}. */
export interface PrepareDatabaseReleaseOptions {
  source: NcbiSource;
  /** The source's `dbname`; must match {@link DATABASE_NAME}. */
  name: string;
  /** Absolute root of the catalog layout (`<databasesDir>/<name>/<version>/`); no whitespace (makeblastdb). */
  databasesDir: string;
  /** Partitions to build, as for `buildDatabase` (0 or 1: none; 2..64). */
  partitions: number;
  /** A release folder name; defaults to the source's `latest-dir`. */
  release?: string;
  /** Aborting stops downloads and BLAST+ tools; the staging folder is still removed. */
  abortSignal?: AbortSignal;
  /** Clock for the manifest's `created_at`. */
  now?: () => Date;
  /** Publishes the finished release to the workload storage account and makes it current there (before the local pointer). */
  publisher?: ReleasePublisher;
}

/**
 * Reads a release folder's manifest if the folder is complete (it has a manifest for this name and
 * version); undefined when the folder or manifest is absent.
 */
async function completeManifest(
  dir: string,
  name: string,
  release: string,
): Promise<PreparedDatabaseManifest | undefined> {
  let text: string;
  try {
    text = await readFile(path.join(dir, "manifest.json"), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ENOTDIR")
      return undefined;
    throw error;
  }
  const manifest = JSON.parse(text) as PreparedDatabaseManifest;
  if (manifest.name !== name || manifest.version !== release) {
    throw new DatabasePrepareError(
      `${dir}/manifest.json describes ${manifest.name} ${manifest.version}`,
      name,
      release,
    );
  }
  return manifest;
}

/** Counts from `blastdbcmd -info` (the same report the builder reads). */
async function infoCounts(
  cwd: string,
  db: string,
  release: string,
  type: "nucl" | "prot",
  signal?: AbortSignal,
): Promise<{ sequences: number; letters: number }> {
  const { stdout } = await runBlastTool("blastdbcmd", ["-db", db, "-dbtype", type, "-info"], { cwd, signal });
  const counts = /([\d,]+) sequences; ([\d,]+) total (?:bases|residues)/.exec(stdout);
  if (!counts?.[1] || !counts[2])
    throw new DatabasePrepareError(`unexpected blastdbcmd -info output for ${db}`, db, release);
  return { sequences: Number(counts[1].replaceAll(",", "")), letters: Number(counts[2].replaceAll(",", "")) };
}

function sourceInfo(release: string, entry: ReleaseDatabase): ManifestSource {
  return {
    release,
    last_updated: new Date(parseSourceTimestamp(entry["last-updated"])).toISOString(),
    volumes: entry["number-of-volumes"],
  };
}

/**
 * Prepares one release of a source database and makes it current (B-005's domain step).
 *
 * 1. Resolves the release (`latest-dir` unless given). If `<databasesDir>/<name>/<release>/`
 *    already holds a manifest, nothing is downloaded or built: `current` is pointed at it (if it
 *    is not already) and its manifest returned, so an activity re-run after a crash is harmless.
 * 2. Downloads the volumes into `<databasesDir>/<name>/.staging-<uuid>/volumes/`, checking the
 *    volume count, archive names and MD5s, then `blastdbcmd -info` counts against the metadata.
 * 3. Dumps the sequences (`blastdbcmd -entry all -outfmt %f`) and builds our layout with
 *    `buildDatabase` (version = release name), so partitions carry the whole database's STATS.
 *    The manifest gains a `source` key ({@link ManifestSource}).
 * 4. Renames the finished build to `<databasesDir>/<name>/<release>/` (so a release folder only
 *    ever appears complete and is never written again), then swaps `current` by atomic rename.
 *
 * Each release gets a fresh folder built from its own download, so files of an older release (say,
 * volumes that a shrinking release dropped) can never mix into a newer one. Older release folders
 * are left in place for their running jobs; removing them is a separate decision. On any failure the
 * staging folder is removed and `current` is untouched. A concurrent prepare of the same release
 * loses the final rename and returns the winner's manifest.
 */
/**
 * Puts `release` in service (published to storage first, when a publisher is given), then frees
 * older releases and crashed builds (never failing the prepare for it).
 */
async function makeCurrent(dbDir: string, manifest: DatabaseManifest, publisher?: ReleasePublisher): Promise<void> {
  const release = manifest.version;
  await publisher?.publish(path.join(dbDir, release), manifest);
  await swapCurrent(dbDir, release);
  await pruneReleases(dbDir).catch(() => []);
}

export async function prepareDatabaseRelease(
  options: PrepareDatabaseReleaseOptions,
): Promise<PreparedDatabaseManifest> {
  const { source, name, databasesDir, partitions, abortSignal: signal } = options;
  if (typeof name !== "string" || !DATABASE_NAME.test(name)) {
    throw new DatabasePrepareError(`invalid database name ${JSON.stringify(name)}`, String(name), null);
  }
  if (!path.isAbsolute(databasesDir) || /[\s\0]/.test(databasesDir)) {
    throw new DatabasePrepareError("databasesDir must be an absolute path without whitespace", name, null);
  }
  const release = options.release ?? (await source.latestRelease({ abortSignal: signal }));
  if (!RELEASE_NAME.test(release)) {
    throw new ReleaseFormatError(`release names look like YYYY-MM-DD-HH-MM-SS, got ${JSON.stringify(release)}`, null);
  }
  const dbDir = path.join(databasesDir, name);
  const releaseDir = path.join(dbDir, release);

  const existing = await completeManifest(releaseDir, name, release);
  if (existing) {
    await makeCurrent(dbDir, existing, options.publisher);
    return existing;
  }

  const entry = await source.find(release, name, { abortSignal: signal });
  if (!entry) throw new DatabaseNotInReleaseError(name, release);
  const type = blastDbType(entry);

  await mkdir(dbDir, { recursive: true });
  const staging = path.join(dbDir, `.staging-${randomUUID()}`);
  await mkdir(staging);
  try {
    await claimStaging(staging);
    const volumesDir = path.join(staging, "volumes");
    await source.downloadVolumes(release, entry, volumesDir, { abortSignal: signal });

    const expected = { sequences: entry["number-of-sequences"], letters: entry["number-of-letters"] };
    const actual = await infoCounts(volumesDir, name, release, type, signal);
    if (actual.sequences !== expected.sequences || actual.letters !== expected.letters) {
      throw new DatabaseVerificationError(name, release, expected, actual);
    }

    const fastaPath = path.join(staging, "sequences.fa");
    await runBlastTool(
      "blastdbcmd",
      ["-db", name, "-dbtype", type, "-entry", "all", "-outfmt", "%f", "-out", fastaPath],
      { cwd: volumesDir, signal },
    );
    // The source volumes are no longer needed; free their space before building ours.
    await rm(volumesDir, { recursive: true, force: true });

    const buildDir = path.join(staging, "release");
    const built = await buildDatabase({
      name,
      fastaPath,
      type,
      outDir: buildDir,
      partitions,
      version: release,
      now: options.now,
      abortSignal: signal,
    });
    if (built.sequences !== expected.sequences || built.letters !== expected.letters) {
      throw new DatabaseVerificationError(name, release, expected, {
        sequences: built.sequences,
        letters: built.letters,
      });
    }
    const manifest: PreparedDatabaseManifest = { ...built, source: sourceInfo(release, entry) };
    await writeFile(path.join(buildDir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    // A release folder that survives a power cut must hold its files: synced before it appears.
    await syncTree(buildDir);

    try {
      await rename(buildDir, releaseDir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw error;
      // Another prepare of this release finished first; its folder is as good as ours.
      const winner = await completeManifest(releaseDir, name, release);
      if (!winner) {
        throw new DatabasePrepareError(
          `${releaseDir} exists but holds no manifest; remove it and retry`,
          name,
          release,
          {
            cause: error,
          },
        );
      }
      await makeCurrent(dbDir, winner, options.publisher);
      return winner;
    }
    await makeCurrent(dbDir, manifest, options.publisher);
    return manifest;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** One row of {@link checkForUpdates}. */
export interface DatabaseUpdateStatus {
  name: string;
  /** The release `current` points at. */
  current_version: string | null;
  /** The source's newest release folder. */
  latest_release: string;
  /** The source's `last-updated` for this database in that release (ISO 8601 UTC); null when absent. */
  latest_last_updated: string | null;
  update_available: boolean;
  /** Why no update is offered when the source cannot say (e.g. the database is not in the release). */
  note?: string;
}

/** Options of {@link checkForUpdates}. */
export interface CheckForUpdatesOptions {
  source: NcbiSource;
  catalog: DatabaseCatalog;
  /** Aborting stops the source's requests. */
  abortSignal?: AbortSignal;
}

/**
 * The scheduled update check: for every database in the catalog, compares the source's newest
 * metadata with the prepared current release. An update is available when the newest release
 * differs from the current version and its `last-updated` is later than the one prepared (the
 * manifest's `source.last_updated`, or its `created_at` for databases not prepared from the
 * source). Databases the newest release does not publish report `update_available: false` with a
 * note. Reads `latest-dir` and one metadata document; downloads nothing.
 */
export async function checkForUpdates(options: CheckForUpdatesOptions): Promise<DatabaseUpdateStatus[]> {
  const { source, catalog, abortSignal } = options;
  const entries = await catalog.list();
  if (entries.length === 0) return [];
  const latest = await source.latestRelease({ abortSignal });
  const published = new Map((await source.metadata(latest, { abortSignal })).map((db) => [db.dbname, db]));
  return entries.map(({ manifest }) => {
    const prepared = manifest as PreparedDatabaseManifest;
    const entry = published.get(manifest.name);
    if (!entry) {
      return {
        name: manifest.name,
        current_version: manifest.version ?? null,
        latest_release: latest,
        latest_last_updated: null,
        update_available: false,
        note: `release ${latest} does not publish ${manifest.name}`,
      };
    }
    const latestMs = parseSourceTimestamp(entry["last-updated"]);
    const preparedMs = Date.parse(prepared.source?.last_updated ?? prepared.created_at);
    return {
      name: manifest.name,
      current_version: manifest.version ?? null,
      latest_release: latest,
      latest_last_updated: new Date(latestMs).toISOString(),
      // An unreadable prepared time must not hide an update.
      update_available: latest !== manifest.version && (Number.isNaN(preparedMs) || latestMs > preparedMs),
    };
  });
}

/** Names of staging folders under `<databasesDir>/<name>/` (left only by a crashed prepare). */
export async function listStagingFolders(databasesDir: string, name: string): Promise<string[]> {
  try {
    return (await readdir(path.join(databasesDir, name))).filter((entry) => entry.startsWith(".staging-")).sort();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw error;
  }
}
