import { randomUUID } from "node:crypto";
import { readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { RELEASE_NAME } from "./ncbi-source.js";

/**
 * The release folders of one database, `<databasesDir>/<name>/`: immutable `YYYY-MM-DD-HH-MM-SS/`
 * folders, the `current` pointer naming the one in service, and `.staging-*` folders of builds
 * in progress (each with an `owner.json`).
 */

/** Releases kept per database: `current` and the newest others, so jobs submitted against a
 * recent previous release still find it. */
export const RELEASES_KEPT = 3;
/** A staging folder or unfinished release older than this is abandoned, whoever owns it. */
const ABANDONED_AFTER_MS = 48 * 3600 * 1000;
const OWNER_FILE = "owner.json";

export async function readCurrent(dbDir: string): Promise<string | undefined> {
  try {
    return (await readFile(path.join(dbDir, "current"), "utf8")).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Points `<dbDir>/current` at `release` with write-then-rename, so readers see old or new, never half. */
export async function swapCurrent(dbDir: string, release: string): Promise<void> {
  if ((await readCurrent(dbDir)) === release) return;
  const pointer = path.join(dbDir, "current");
  const tmp = `${pointer}.tmp-${randomUUID()}`;
  try {
    await writeFile(tmp, release);
    await rename(tmp, pointer);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}

/** Marks a staging folder as this process's, so a later prune can tell a crashed build from a live one. */
export async function claimStaging(staging: string, now = new Date()): Promise<void> {
  await writeFile(path.join(staging, OWNER_FILE), JSON.stringify({ host: os.hostname(), pid: process.pid, started_at: now.toISOString() }));
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A staging folder whose owner process is gone (same host), or that is older than any build takes. */
async function abandonedStaging(dir: string, now: number): Promise<boolean> {
  try {
    const owner = JSON.parse(await readFile(path.join(dir, OWNER_FILE), "utf8")) as { host?: string; pid?: number; started_at?: string };
    if (owner.host === os.hostname() && Number.isInteger(owner.pid) && !processAlive(owner.pid as number)) return true;
    const started = Date.parse(owner.started_at ?? "");
    return Number.isFinite(started) && now - started > ABANDONED_AFTER_MS;
  } catch {
    return now - (await stat(dir)).mtimeMs > ABANDONED_AFTER_MS;
  }
}

async function hasManifest(dir: string): Promise<boolean> {
  return stat(path.join(dir, "manifest.json")).then(
    (s) => s.isFile(),
    () => false,
  );
}

/**
 * Frees the disk of releases no longer needed: keeps `current` and the newest others up to
 * `keep`, removes older releases, staging folders of crashed or abandoned builds, unfinished
 * release folders (no manifest) past the abandonment age, and stray pointer temp files. Returns
 * the names removed. Never touches `current` or a build that may still be running.
 */
export async function pruneReleases(dbDir: string, options: { keep?: number; now?: Date } = {}): Promise<string[]> {
  const keep = Math.max(1, options.keep ?? RELEASES_KEPT);
  const now = (options.now ?? new Date()).getTime();
  const current = await readCurrent(dbDir);
  const entries = await readdir(dbDir, { withFileTypes: true });
  const removed: string[] = [];
  const remove = async (name: string) => {
    await rm(path.join(dbDir, name), { recursive: true, force: true });
    removed.push(name);
  };

  const complete: string[] = [];
  for (const e of entries) {
    if (!e.isDirectory() || !RELEASE_NAME.test(e.name) || e.name === current) continue;
    if (await hasManifest(path.join(dbDir, e.name))) complete.push(e.name);
    else if (now - (await stat(path.join(dbDir, e.name))).mtimeMs > ABANDONED_AFTER_MS) await remove(e.name);
  }
  complete.sort().reverse();
  for (const name of complete.slice(current === undefined ? keep : keep - 1)) await remove(name);

  for (const e of entries) {
    if (e.isDirectory() && e.name.startsWith(".staging-") && (await abandonedStaging(path.join(dbDir, e.name), now))) await remove(e.name);
    if (e.isFile() && e.name.startsWith("current.") && now - (await stat(path.join(dbDir, e.name))).mtimeMs > ABANDONED_AFTER_MS) await remove(e.name);
  }
  return removed.sort();
}
