import { mkdir, readdir, readFile, rm, rmdir, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { writeFileDurably } from "../storage/durable-file.js";
import { RELEASE_NAME } from "./ncbi-source.js";
import { processAlive } from "../process-alive.js";

/**
 * The release folders of one database, `<databasesDir>/<name>/`: immutable `YYYY-MM-DD-HH-MM-SS/`
 * folders, the `current` pointer naming the one in service, `.staging-*` folders of builds in
 * progress (each with an `owner.json`), and `.in-use/<release>/<holder>` markers of the jobs
 * searching a release.
 */

/** Releases kept per database: `current` and the newest others, so jobs submitted against a
 * recent previous release still find it. */
export const RELEASES_KEPT = 3;
/** A staging folder or unfinished release older than this is abandoned, whoever owns it. */
const ABANDONED_AFTER_MS = 48 * 3600 * 1000;
const OWNER_FILE = "owner.json";
const IN_USE = ".in-use";
const HOLDER = /^[A-Za-z0-9_-]{1,64}$/;

export async function readCurrent(dbDir: string): Promise<string | undefined> {
  try {
    return (await readFile(path.join(dbDir, "current"), "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Points `<dbDir>/current` at `release` with write-then-rename, so readers see old or new, never half;
 * durably, so a power cut after the swap keeps it (the release's own files are synced before).
 */
export async function swapCurrent(dbDir: string, release: string): Promise<void> {
  if ((await readCurrent(dbDir)) === release) return;
  await writeFileDurably(path.join(dbDir, "current"), release);
}

/** Marks a staging folder as this process's, so a later prune can tell a crashed build from a live one. */
export async function claimStaging(staging: string, now = new Date()): Promise<void> {
  await writeFile(
    path.join(staging, OWNER_FILE),
    JSON.stringify({ host: os.hostname(), pid: process.pid, started_at: now.toISOString() }),
  );
}

/** mtime of `file` in ms, or undefined when it is gone (a concurrent prepare may have moved it). */
async function modifiedAt(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * A staging folder is abandoned when its owner on this host is gone, or, for an owner elsewhere
 * (or none recorded), when it is older than any build takes. A live owner here is never abandoned.
 */
async function abandonedStaging(dir: string, now: number): Promise<boolean> {
  let owner: { host?: string; pid?: number; started_at?: string } | undefined;
  try {
    owner = JSON.parse(await readFile(path.join(dir, OWNER_FILE), "utf8"));
  } catch {
    owner = undefined;
  }
  if (owner?.host === os.hostname() && Number.isInteger(owner.pid)) return !processAlive(owner.pid as number);
  const started = owner ? Date.parse(owner.started_at ?? "") : Number.NaN;
  const since = Number.isFinite(started) ? started : await modifiedAt(dir);
  return since !== undefined && now - since > ABANDONED_AFTER_MS;
}

/**
 * Marks `release` as needed by `holder` (a job id), so {@link pruneReleases} keeps it until
 * {@link releaseHold}. Marking again refreshes the marker (a new process takes it over). A marker
 * whose process is gone no longer holds anything.
 */
export async function holdRelease(dbDir: string, release: string, holder: string): Promise<void> {
  const marker = markerPath(dbDir, release, holder);
  const owner = JSON.stringify({ host: os.hostname(), pid: process.pid, since: new Date().toISOString() });
  for (let attempt = 1; ; attempt++) {
    await mkdir(path.dirname(marker), { recursive: true });
    try {
      await writeFile(marker, owner);
      return;
    } catch (error) {
      // The last holder letting go may remove the emptied folder between mkdir and write: again.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 3) throw error;
    }
  }
}

/** Lets go of `holder`'s mark; folders left empty are removed (others' marks keep theirs). */
export async function releaseHold(dbDir: string, release: string, holder: string): Promise<void> {
  const marker = markerPath(dbDir, release, holder);
  await rm(marker, { force: true });
  // rmdir removes a folder only when it is empty.
  await rmdir(path.dirname(marker)).catch(() => {});
  await rmdir(path.join(dbDir, IN_USE)).catch(() => {});
}

function markerPath(dbDir: string, release: string, holder: string): string {
  if (!RELEASE_NAME.test(release) || !HOLDER.test(holder)) throw new TypeError("invalid release or holder name");
  return path.join(dbDir, IN_USE, release, holder);
}

/** A holder process alive on this host, or (elsewhere, unknown) a marker younger than the abandonment age. */
async function liveMarker(file: string, now: number): Promise<boolean> {
  try {
    const owner = JSON.parse(await readFile(file, "utf8")) as { host?: string; pid?: number };
    if (owner.host === os.hostname() && Number.isInteger(owner.pid)) return processAlive(owner.pid as number);
  } catch {
    // unreadable: judge by age
  }
  const at = await modifiedAt(file);
  return at !== undefined && now - at <= ABANDONED_AFTER_MS;
}

/** Releases with a live in-use marker; dead markers are removed on the way. */
async function heldReleases(dbDir: string, now: number): Promise<Set<string>> {
  const held = new Set<string>();
  let releases: string[];
  try {
    releases = await readdir(path.join(dbDir, IN_USE));
  } catch {
    return held;
  }
  for (const release of releases) {
    for (const holder of await readdir(path.join(dbDir, IN_USE, release)).catch(() => [] as string[])) {
      if (await liveMarker(path.join(dbDir, IN_USE, release, holder), now)) held.add(release);
      else await rm(path.join(dbDir, IN_USE, release, holder), { force: true });
    }
  }
  return held;
}

async function hasManifest(dir: string): Promise<boolean> {
  return stat(path.join(dir, "manifest.json")).then(
    (s) => s.isFile(),
    () => false,
  );
}

/**
 * Frees the disk of releases no longer needed: keeps `current`, the newest others up to `keep`
 * and every release a job holds ({@link holdRelease}), removes older releases, staging folders of crashed or abandoned builds, unfinished
 * release folders (no manifest) past the abandonment age, and stray pointer temp files. Returns
 * the names removed. Never touches `current` or a build that may still be running.
 */
export async function pruneReleases(dbDir: string, options: { keep?: number; now?: Date } = {}): Promise<string[]> {
  const keep = Math.max(1, options.keep ?? RELEASES_KEPT);
  const now = (options.now ?? new Date()).getTime();
  const current = await readCurrent(dbDir);
  const held = await heldReleases(dbDir, now);
  const entries = await readdir(dbDir, { withFileTypes: true });
  const removed: string[] = [];
  const remove = async (name: string) => {
    await rm(path.join(dbDir, name), { recursive: true, force: true });
    removed.push(name);
  };

  const complete: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !RELEASE_NAME.test(entry.name) || entry.name === current) continue;
    const dir = path.join(dbDir, entry.name);
    if (await hasManifest(dir)) {
      complete.push(entry.name);
      continue;
    }
    const at = await modifiedAt(dir);
    if (at !== undefined && now - at > ABANDONED_AFTER_MS && !held.has(entry.name)) await remove(entry.name);
  }
  complete.sort().reverse();
  for (const name of complete.slice(current === undefined ? keep : keep - 1)) if (!held.has(name)) await remove(name);

  for (const entry of entries) {
    const file = path.join(dbDir, entry.name);
    if (entry.isDirectory() && entry.name.startsWith(".staging-") && (await abandonedStaging(file, now)))
      await remove(entry.name);
    if (entry.isFile() && entry.name.startsWith("current.")) {
      const at = await modifiedAt(file);
      if (at !== undefined && now - at > ABANDONED_AFTER_MS) await remove(entry.name);
    }
  }
  return removed.sort();
}
