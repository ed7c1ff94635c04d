import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ContainerClient } from "@azure/storage-blob";
import { DATABASE_NAME, type DatabaseManifest } from "../blast/database-builder.js";
import { isStatus } from "../storage/table-text.js";
import { RELEASE_NAME } from "./ncbi-source.js";

/** One file of a published release, as its manifest lists it. */
export interface ReleaseFile {
  /** Relative to the release folder, `/`-separated (e.g. `parts/p1/demo_p1.nsq`). */
  name: string;
  size: number;
  /** MD5 of the content, base64 (as Blob storage's Content-MD5). */
  md5: string;
}

/**
 * `releases/<db>/<release>/release.json`: what a published release holds. It is written last and
 * only once, so a release without it does not exist (an interrupted upload is invisible).
 */
export interface ReleaseManifest {
  database: string;
  release: string;
  published_at: string;
  /** The BLAST database's own manifest (`manifest.json` of the release folder). */
  manifest: DatabaseManifest;
  files: ReleaseFile[];
}

/** A relative file name inside a release: plain segments, never `..`, never absolute. */
const FILE_NAME = /^(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9._-]{1,128}(\/[A-Za-z0-9._-]{1,128}){0,8}$/;
const MANIFEST_BLOB = "release.json";

/** A cached or downloaded file that does not match its release manifest. */
export class ReleaseIntegrityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReleaseIntegrityError";
  }
}

function checkNames(database: string, release: string): void {
  if (!DATABASE_NAME.test(database) || !RELEASE_NAME.test(release))
    throw new TypeError(`invalid database release ${database}/${release}`);
}

/** The files of a folder, relative and `/`-separated, sorted. */
async function listFiles(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

/** MD5 (base64) and size of a file, streamed. */
export async function fileDigest(file: string): Promise<{ size: number; md5: string }> {
  const hash = createHash("md5");
  let size = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1024 * 1024 })) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { size, md5: hash.digest("base64") };
}

/**
 * Database releases in Blob storage (container `databases` of the workload account): each release
 * an immutable folder `releases/<db>/<release>/` of its files plus `release.json` listing them
 * with sizes and MD5s. Readers (the shard's node cache, the job API's local cache) download files
 * and check them against that list.
 */
export class ReleaseStore {
  private ready: Promise<ContainerClient> | undefined;
  private client: ContainerClient | undefined;
  /** A container client, or a way to open one on first use (the Functions app loads the Blob SDK lazily). */
  constructor(private readonly source: ContainerClient | (() => Promise<ContainerClient>)) {}

  private init(): Promise<ContainerClient> {
    this.ready ??= (async () => {
      const client = typeof this.source === "function" ? await this.source() : this.source;
      await client.createIfNotExists();
      this.client = client;
      return client;
    })().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  /** The container, once {@link init} has opened it. */
  private get container(): ContainerClient {
    if (!this.client) throw new Error("release store used before it was opened");
    return this.client;
  }

  private blobName(database: string, release: string, file: string): string {
    checkNames(database, release);
    if (!FILE_NAME.test(file)) throw new TypeError(`invalid release file name ${JSON.stringify(file)}`);
    return `releases/${database}/${release}/${file}`;
  }

  /** The release's manifest, or undefined when it is not (completely) published. */
  async manifest(database: string, release: string): Promise<ReleaseManifest | undefined> {
    await this.init();
    try {
      const buffer = await this.container
        .getBlockBlobClient(this.blobName(database, release, MANIFEST_BLOB))
        .downloadToBuffer();
      return JSON.parse(buffer.toString("utf8")) as ReleaseManifest;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /**
   * Publishes the release folder `dir` (a built database with its `manifest.json`): every file with
   * its Content-MD5 (checked by storage on receipt), then `release.json` last, only if absent. A
   * release already published is left as it is and its manifest returned, so a rerun after a crash
   * or a second publisher changes nothing.
   */
  async publish(database: string, release: string, dir: string, now = new Date()): Promise<ReleaseManifest> {
    checkNames(database, release);
    await this.init();
    const existing = await this.manifest(database, release);
    if (existing) return existing;
    const manifest = JSON.parse(await readFile(path.join(dir, "manifest.json"), "utf8")) as DatabaseManifest;
    if (manifest.name !== database || manifest.version !== release)
      throw new ReleaseIntegrityError(`${dir} holds ${manifest.name} ${manifest.version}, not ${database} ${release}`);
    const files: ReleaseFile[] = [];
    for (const name of await listFiles(dir)) {
      const full = path.join(dir, ...name.split("/"));
      const { size, md5 } = await fileDigest(full);
      const client = this.container.getBlockBlobClient(this.blobName(database, release, name));
      await client.uploadFile(full, {
        blobHTTPHeaders: { blobContentMD5: Buffer.from(md5, "base64") },
        concurrency: 2,
      });
      files.push({ name, size, md5 });
    }
    const doc: ReleaseManifest = { database, release, published_at: now.toISOString(), manifest, files };
    const body = Buffer.from(JSON.stringify(doc));
    try {
      await this.container
        .getBlockBlobClient(this.blobName(database, release, MANIFEST_BLOB))
        .upload(body, body.length, {
          conditions: { ifNoneMatch: "*" },
          blobHTTPHeaders: { blobContentType: "application/json" },
        });
    } catch (error) {
      // Another publisher finished first; its manifest lists the same build's files.
      if (!isStatus(error, 409) && !isStatus(error, 412)) throw error;
      return (await this.manifest(database, release)) ?? doc;
    }
    return doc;
  }

  /** Names of the published releases of a database (those with a manifest), oldest first. */
  async releases(database: string): Promise<string[]> {
    if (!DATABASE_NAME.test(database)) return [];
    await this.init();
    const out: string[] = [];
    for await (const item of this.container.listBlobsFlat({ prefix: `releases/${database}/` })) {
      const parts = item.name.split("/");
      if (parts.length === 4 && parts[3] === MANIFEST_BLOB && RELEASE_NAME.test(parts[2] ?? ""))
        out.push(parts[2] as string);
    }
    return out.sort();
  }

  /**
   * Downloads one file of a release to `target` (written beside it, checked against the manifest's
   * size and MD5, then renamed into place), so `target` is either absent or complete and right.
   */
  async download(
    database: string,
    release: string,
    file: ReleaseFile,
    target: string,
    signal?: AbortSignal,
  ): Promise<void> {
    await this.init();
    const client = this.container.getBlockBlobClient(this.blobName(database, release, file.name));
    await mkdir(path.dirname(target), { recursive: true });
    // Unique per download: pods on one node may all be pid 1 in their own containers.
    const partial = `${target}.partial-${randomUUID()}`;
    try {
      const response = await client.download(0, undefined, { abortSignal: signal });
      if (!response.readableStreamBody) throw new ReleaseIntegrityError(`${file.name}: empty response`);
      const hash = createHash("md5");
      let size = 0;
      const measure = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          hash.update(chunk);
          size += chunk.length;
          done(null, chunk);
        },
      });
      await pipeline(response.readableStreamBody, measure, createWriteStream(partial), { signal });
      const md5 = hash.digest("base64");
      if (size !== file.size || md5 !== file.md5) {
        throw new ReleaseIntegrityError(
          `${database} ${release} ${file.name}: downloaded ${size} bytes with MD5 ${md5}, the manifest says ${file.size} bytes with ${file.md5}`,
        );
      }
      await rename(partial, target);
    } finally {
      await rm(partial, { force: true });
    }
  }

  /**
   * Removes a release: its manifest first (so it stops existing for every reader at once), then its
   * files. Deleting one already gone is not an error.
   */
  async remove(database: string, release: string): Promise<void> {
    await this.init();
    await this.container.deleteBlob(this.blobName(database, release, MANIFEST_BLOB)).catch((error: unknown) => {
      if (!isStatus(error, 404)) throw error;
    });
    for await (const item of this.container.listBlobsFlat({ prefix: `releases/${database}/${release}/` })) {
      await this.container.deleteBlob(item.name).catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
    }
  }
}

/** True when `name` is a plain relative file name inside a release folder (never `..`, never absolute). */
export function isReleaseFileName(name: string): boolean {
  return FILE_NAME.test(name);
}

/** True when `file` in `dir` has the manifest's size (a cheap check; {@link verifyFile} reads it). */
export async function hasExpectedSize(dir: string, file: ReleaseFile): Promise<boolean> {
  if (!isReleaseFileName(file.name))
    throw new ReleaseIntegrityError(`invalid release file name ${JSON.stringify(file.name)}`);
  try {
    return (await stat(path.join(dir, ...file.name.split("/")))).size === file.size;
  } catch {
    return false;
  }
}

/** True when `file` in `dir` has the manifest's size and MD5. */
export async function verifyFile(dir: string, file: ReleaseFile): Promise<boolean> {
  if (!(await hasExpectedSize(dir, file))) return false;
  return (await fileDigest(path.join(dir, ...file.name.split("/")))).md5 === file.md5;
}
