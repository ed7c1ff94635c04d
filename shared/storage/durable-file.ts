import { randomUUID } from "node:crypto";
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { type FileHandle, open, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";

/**
 * Durable writes of the local stack's own files (stack.json, keys, secrets, database pointers):
 * the bytes go to a temp file of their own, which is fsynced and renamed over the target, and then
 * the folder is fsynced so the rename itself survives a power cut. A reader (or a restart after a
 * cut) sees the old content or the new, never an empty or half-written file. A rename alone is not
 * enough: ext4 and xfs may persist the rename before the file's data (a zero-length file after the
 * cut).
 */

/** fsyncs a folder, so entries created, renamed or removed in it are on disk. */
export async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch (error) {
    // Windows cannot open or fsync a folder; its NTFS journals the metadata itself.
    if (process.platform !== "win32") throw error;
  } finally {
    await handle?.close();
  }
}

/** The synchronous {@link syncDirectory}, for start-up and shutdown paths that are synchronous. */
export function syncDirectorySync(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch (error) {
    if (process.platform !== "win32") throw error;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function tempName(file: string): string {
  // A name of its own per write: two writes at once must not share (and rename away) one file.
  return `${file}.${process.pid}.${randomUUID()}.tmp`;
}

/** Writes `data` to `file` durably and atomically (temp file, fsync, rename, folder fsync). */
export async function writeFileDurably(
  file: string,
  data: string | Uint8Array,
  options: { mode?: number } = {},
): Promise<void> {
  const temp = tempName(file);
  try {
    const handle = await open(temp, "wx", options.mode ?? 0o644);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  await syncDirectory(path.dirname(file));
}

/** The synchronous {@link writeFileDurably}. */
export function writeFileDurablySync(file: string, data: string | Uint8Array, options: { mode?: number } = {}): void {
  const temp = tempName(file);
  try {
    const fd = openSync(temp, "wx", options.mode ?? 0o644);
    try {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  syncDirectorySync(path.dirname(file));
}

/** fsyncs one existing file's data. */
export async function syncFile(file: string): Promise<void> {
  const handle = await open(file, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * fsyncs every file and folder under `dir` (and `dir` itself), before a folder built in place is
 * renamed into service: a release whose pointer survives a cut must have its files survive too.
 */
export async function syncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const child = path.join(dir, entry.name);
    if (entry.isDirectory()) await syncTree(child);
    else if (entry.isFile()) await syncFile(child);
  }
  await syncDirectory(dir);
}
