import { randomUUID } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DATABASE_NAME } from "../blast/database-builder.js";
import { RELEASE_NAME } from "./ncbi-source.js";
import {
  type ReleaseFile,
  type ReleaseManifest,
  ReleaseIntegrityError,
  type ReleaseStore,
  verifyFile,
} from "./release-store.js";

/** A lock whose file has not been touched for this long belongs to a filler that died. */
export const LOCK_STALE_MS = 30_000;
/** How often a filler touches its lock. */
const HEARTBEAT_MS = 5_000;
/** How often a pod waiting for another's fill looks again. */
const LOCK_POLL_MS = 250;

/** What {@link fillReleaseCache} did. */
export interface FillResult {
  manifest: ReleaseManifest;
  /** Files this call downloaded (missing or not matching the manifest). */
  downloaded: string[];
  /** Files found in the cache and verified against the manifest. */
  verified: number;
  /**
   * Of those, files accepted by this node's verified stamp (unchanged in size, mtime, ctime and
   * inode since a fill verified them) instead of by reading their MD5 again.
   */
  stamped: number;
  /** True when another filler held the lock and this call waited for it. */
  waited: boolean;
  /** True when this call took over a lock whose holder had stopped its heartbeat. */
  tookOver: boolean;
}

/** Options of {@link fillReleaseCache}. */
export interface FillOptions {
  store: ReleaseStore;
  /** The node-local cache: `<cacheRoot>/<db>/<release>/`. */
  cacheRoot: string;
  database: string;
  release: string;
  /** Only this partition's files (`parts/p<n>/`), or with 0 the whole database (`full/`); every file when absent. */
  partition?: number;
  signal?: AbortSignal;
  lockStaleMs?: number;
  heartbeatMs?: number;
  /** Told each file as it is downloaded (warm-up progress). */
  onFile?: (file: ReleaseFile, done: { files: number; bytes: number }) => void;
}

/** The files of `manifest` a shard of `partition` reads (always with `manifest.json`). */
export function filesFor(manifest: ReleaseManifest, partition?: number): ReleaseFile[] {
  if (partition === undefined) return manifest.files;
  const prefix = partition === 0 ? "full/" : `parts/p${partition}/`;
  return manifest.files.filter((f) => f.name === "manifest.json" || f.name.startsWith(prefix));
}

/** The cache folder of one release. */
export function cachedReleaseDir(cacheRoot: string, database: string, release: string): string {
  if (!DATABASE_NAME.test(database) || !RELEASE_NAME.test(release))
    throw new TypeError(`invalid database release ${database}/${release}`);
  return path.join(cacheRoot, database, release);
}

/**
 * The fill lock of one release's partition (`p<i>`), its whole database (`full`) or all of it
 * (`all`): pods of different partitions on one node fill side by side; a whole-release fill and a
 * partition fill may fetch a shared file twice, never wrongly.
 */
function lockPath(cacheRoot: string, database: string, release: string, partition?: number): string {
  const scope = partition === undefined ? "all" : partition === 0 ? "full" : `p${partition}`;
  return path.join(cacheRoot, database, `.fill-${release}-${scope}.lock`);
}

/**
 * Takes the fill lock of a release on this node: a file created exclusively, touched every
 * heartbeat by its holder. Waits while another live filler holds it; takes over a lock untouched
 * for `staleMs` (its holder died). The lock only saves work: every file lands by rename after its
 * MD5 is checked, so two fillers racing after a takeover still leave a correct cache.
 */
async function acquireLock(
  file: string,
  staleMs: number,
  heartbeatMs: number,
  signal?: AbortSignal,
): Promise<{ release: () => Promise<void>; waited: boolean; tookOver: boolean }> {
  await mkdir(path.dirname(file), { recursive: true });
  let waited = false;
  let tookOver = false;
  const token = randomUUID();
  for (;;) {
    signal?.throwIfAborted();
    try {
      const handle = await open(file, "wx");
      await handle.writeFile(
        JSON.stringify({ token, host: os.hostname(), pid: process.pid, since: new Date().toISOString() }),
      );
      await handle.close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const touched = await stat(file).then(
      (s) => s.mtimeMs,
      () => undefined,
    );
    if (touched !== undefined && Date.now() - touched > staleMs) {
      // Only one taker's rename succeeds; the others find the lock gone and race to create it.
      if (
        await rename(file, `${file}.stale-${token}`).then(
          () => true,
          () => false,
        )
      ) {
        await rm(`${file}.stale-${token}`, { force: true });
        tookOver = true;
      }
      continue;
    }
    waited = true;
    await sleep(LOCK_POLL_MS, undefined, { signal });
  }
  const beat = setInterval(() => {
    const now = new Date();
    utimes(file, now, now).catch(() => {});
  }, heartbeatMs);
  beat.unref();
  return {
    waited,
    tookOver,
    release: async () => {
      clearInterval(beat);
      // Remove the lock only if it is still ours (a takeover may have replaced it).
      const owner = await readFile(file, "utf8").then(
        (text) => (JSON.parse(text) as { token?: string }).token,
        () => undefined,
      );
      if (owner === token) await rm(file, { force: true });
    },
  };
}

/**
 * The verified stamp of one release's partition (`p<i>`), whole database (`full`) or all of it
 * (`all`) on this node, beside the release folder: what each file looked like (size, mtime,
 * ctime, inode) when a fill last verified it. A shard starting again on the node re-checks those
 * instead of reading every file for its MD5 (issue 24 item 3). Any change to a file changes its
 * ctime, so a file written since (even with its mtime set back) is verified again.
 */
function stampPath(cacheRoot: string, database: string, release: string, partition?: number): string {
  const scope = partition === undefined ? "all" : partition === 0 ? "full" : `p${partition}`;
  return path.join(cacheRoot, database, `.verified-${release}-${scope}.json`);
}

type FileStamp = { size: number; mtimeMs: number; ctimeMs: number; ino: number };

async function stampOf(file: string): Promise<FileStamp | undefined> {
  try {
    const s = await stat(file);
    return { size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs, ino: s.ino };
  } catch {
    return undefined;
  }
}

async function readStamps(file: string): Promise<Record<string, FileStamp>> {
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as { files?: Record<string, FileStamp> };
    return parsed && typeof parsed.files === "object" && parsed.files !== null ? parsed.files : {};
  } catch {
    // None yet, or torn by a crash: every file is verified by its MD5.
    return {};
  }
}

function sameStamp(a: FileStamp | undefined, b: FileStamp | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.size === b.size &&
    a.mtimeMs === b.mtimeMs &&
    a.ctimeMs === b.ctimeMs &&
    a.ino === b.ino
  );
}

/**
 * Fills this node's cache of one release (or of one partition of it) from the release store:
 * every file the manifest lists is verified (size and MD5) and downloaded again when it is missing
 * or differs, under a per-release lock so pods starting together on one node download it once.
 * Verifying reads each file, which also brings it into the page cache BLAST reads from next.
 */
export async function fillReleaseCache(options: FillOptions): Promise<FillResult> {
  const { store, cacheRoot, database, release, signal } = options;
  const dir = cachedReleaseDir(cacheRoot, database, release);
  const manifest = await store.manifest(database, release);
  if (!manifest) throw new ReleaseIntegrityError(`database ${database} release ${release} is not published`);
  const lock = await acquireLock(
    lockPath(cacheRoot, database, release, options.partition),
    options.lockStaleMs ?? LOCK_STALE_MS,
    options.heartbeatMs ?? HEARTBEAT_MS,
    signal,
  );
  const downloaded: string[] = [];
  let verified = 0;
  let stamped = 0;
  let bytes = 0;
  const stampFile = stampPath(cacheRoot, database, release, options.partition);
  try {
    const stamps = await readStamps(stampFile);
    const fresh: Record<string, FileStamp> = {};
    const wanted = filesFor(manifest, options.partition);
    // manifest.json last: a folder with it is complete for what a reader needs.
    const ordered = [
      ...wanted.filter((f) => f.name !== "manifest.json"),
      ...wanted.filter((f) => f.name === "manifest.json"),
    ];
    for (const file of ordered) {
      signal?.throwIfAborted();
      const local = path.join(dir, ...file.name.split("/"));
      const now = await stampOf(local);
      if (now?.size === file.size && sameStamp(stamps[file.name], now)) {
        verified++;
        stamped++;
      } else if (await verifyFile(dir, file)) verified++;
      else {
        await store.download(database, release, file, local, signal);
        downloaded.push(file.name);
      }
      const after = await stampOf(local);
      if (after) fresh[file.name] = after;
      bytes += file.size;
      options.onFile?.(file, { files: verified + downloaded.length, bytes });
    }
    // Not fsynced: a stamp lost or torn in a crash only means the next fill reads the MD5s again.
    const temp = `${stampFile}.${randomUUID()}.tmp`;
    await writeFile(temp, JSON.stringify({ release, files: fresh }));
    await rename(temp, stampFile);
  } finally {
    await lock.release();
  }
  return { manifest, downloaded, verified, stamped, waited: lock.waited, tookOver: lock.tookOver };
}

/**
 * Evicts cached releases of `database` that are neither `keep` (the current release) nor held by
 * a job, nor being filled. Returns the releases removed.
 */
export async function evictCachedReleases(
  cacheRoot: string,
  database: string,
  keep: ReadonlySet<string>,
): Promise<string[]> {
  if (!DATABASE_NAME.test(database)) return [];
  const dbDir = path.join(cacheRoot, database);
  let names: string[];
  try {
    names = await readdir(dbDir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names.sort()) {
    if (!RELEASE_NAME.test(name) || keep.has(name) || names.some((n) => n.startsWith(`.fill-${name}-`))) continue;
    await rm(path.join(dbDir, name), { recursive: true, force: true });
    for (const stamp of names.filter((n) => n.startsWith(`.verified-${name}-`)))
      await rm(path.join(dbDir, stamp), { force: true });
    removed.push(name);
  }
  return removed;
}
