import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { lstat, mkdir, readdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { z } from "zod";

/**
 * A BLAST database distribution laid out like NCBI's (`https://ftp.ncbi.nlm.nih.gov/blast/db/v5/`):
 *
 * - `<base>/latest-dir`: text naming the newest release folder, `YYYY-MM-DD-HH-MM-SS` (UTC).
 * - `<base>/<release>/blastdb-metadata-1-1.json`: a JSON array, one object per database, with
 *   NCBI's metadata v1.1 fields ({@link ReleaseDatabase}).
 * - Each volume archive listed in an entry's `files` (`<db>.NN.tar.gz`, or `<db>.tar.gz` for a
 *   single-volume database), and beside it `<archive>.md5` holding `"<hex>  <archive name>"`.
 *
 * A `files` item is either a plain file name, resolved against `<base>/<release>/`, or an absolute
 * http(s) URL on the same origin as `<base>`; its last path segment must be a plain name ending
 * in `.tar.gz`. NCBI's own metadata lists `ftp://ftp.ncbi.nlm.nih.gov/...` URLs: an ftp URL on the
 * source's host name (no port) is read from the same path over the source's http(s), since NCBI
 * serves one tree both ways. Anything else (`../x.tar.gz`, `a/b.tar.gz`, `/abs.tar.gz`, another
 * origin, ftp elsewhere, gs:) is refused with an {@link UnsafeSourcePathError} before any request.
 */
export const METADATA_FILE = "blastdb-metadata-1-1.json";

/** `YYYY-MM-DD-HH-MM-SS`: NCBI's release folder names, and our database versions. */
export const RELEASE_NAME = /^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}$/;

/** Plain file names: what an archive may be called and what it may contain. */
const PLAIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_CONCURRENCY = 2;
/** latest-dir and .md5 files are a line; the metadata of all of NCBI's databases is ~100 KB. */
const SMALL_DOCUMENT_LIMIT_BYTES = 8 * 1024 * 1024;
const TAR_STDERR_LIMIT = 8 * 1024;

const nonNegativeInt = z.number().int().nonnegative();

/** One database of a release, as `blastdb-metadata-1-1.json` describes it; unknown fields are dropped. */
export const releaseDatabaseSchema = z.object({
  dbname: z.string().min(1),
  version: z.string().regex(/^1\.\d+$/, 'expected a metadata version like "1.1"'),
  dbtype: z.enum(["Nucleotide", "Protein"]),
  description: z.string(),
  "number-of-letters": nonNegativeInt,
  "number-of-sequences": nonNegativeInt,
  files: z.array(z.string().min(1)).min(1),
  "last-updated": z.string().refine((text) => !Number.isNaN(parseSourceTimestamp(text)), "expected an ISO 8601 time"),
  "bytes-total": nonNegativeInt,
  "bytes-to-cache": nonNegativeInt,
  "number-of-volumes": z.number().int().positive(),
});

/** One database of a release (NCBI's field names, verbatim). */
export type ReleaseDatabase = z.infer<typeof releaseDatabaseSchema>;

const metadataSchema = z.array(releaseDatabaseSchema);

/**
 * Milliseconds since the epoch of a metadata time. NCBI writes `last-updated` without a zone
 * (`2024-05-18T00:00:00`); such times are taken as UTC, not as the host's local time.
 */
export function parseSourceTimestamp(text: string): number {
  if (!/^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?$/.test(text)) return Number.NaN;
  const zoned = /(?:Z|[+-]\d{2}:?\d{2})$/.test(text) || !text.includes("T") ? text : `${text}Z`;
  return Date.parse(zoned);
}

/** Our database type for an NCBI `dbtype`. */
export function blastDbType(entry: Pick<ReleaseDatabase, "dbtype">): "nucl" | "prot" {
  return entry.dbtype === "Nucleotide" ? "nucl" : "prot";
}

/** A volume archive's MD5 differs from the one its `.md5` file publishes. */
export class ChecksumMismatchError extends Error {
  readonly file: string;
  readonly expected: string;
  readonly actual: string;
  constructor(file: string, expected: string, actual: string) {
    super(`checksum mismatch for ${file}: expected MD5 ${expected}, got ${actual}`);
    this.name = "ChecksumMismatchError";
    this.file = file;
    this.expected = expected;
    this.actual = actual;
  }
}

/** A database's `files` list and its `number-of-volumes` disagree. */
export class VolumeCountMismatchError extends Error {
  readonly database: string;
  readonly release: string;
  readonly expected: number;
  readonly actual: number;
  constructor(database: string, release: string, expected: number, actual: number) {
    super(`${database} in release ${release} declares ${expected} volumes but lists ${actual} archives`);
    this.name = "VolumeCountMismatchError";
    this.database = database;
    this.release = release;
    this.expected = expected;
    this.actual = actual;
  }
}

/** The source could not be reached, answered with a non-2xx status, or timed out. */
export class SourceUnavailableError extends Error {
  readonly url: string;
  /** HTTP status, or null when no response arrived. */
  readonly status: number | null;
  constructor(message: string, url: string, status: number | null, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SourceUnavailableError";
    this.url = url;
    this.status = status;
  }
}

/** A release name, `latest-dir` or a metadata document is not in the published format. */
export class ReleaseFormatError extends Error {
  readonly url: string | null;
  /** What was wrong, one line each (zod issues for metadata). */
  readonly issues: readonly string[];
  constructor(message: string, url: string | null, issues: readonly string[] = []) {
    super(issues.length > 0 ? `${message}: ${issues.slice(0, 5).join("; ")}` : message);
    this.name = "ReleaseFormatError";
    this.url = url;
    this.issues = issues;
  }
}

/** A metadata `files` item or an `.md5` file names something other than a plain file under the source. */
export class UnsafeSourcePathError extends Error {
  readonly file: string;
  constructor(file: string, reason: string) {
    super(`refusing source file ${JSON.stringify(file)}: ${reason}`);
    this.name = "UnsafeSourcePathError";
    this.file = file;
  }
}

/** `tar` failed on an archive, or the archive held something other than plain files. */
export class ArchiveError extends Error {
  readonly archive: string;
  constructor(archive: string, message: string, options?: { cause?: unknown }) {
    super(`${archive}: ${message}`, options);
    this.name = "ArchiveError";
    this.archive = archive;
  }
}

/** Options for {@link createNcbiSource}. */
export interface NcbiSourceOptions {
  /** The distribution root (http or https), e.g. `https://ftp.ncbi.nlm.nih.gov/blast/db/v5/`. */
  baseUrl: string;
  /** Defaults to the global `fetch`. */
  fetchImpl?: typeof fetch;
  /**
   * Small documents must arrive completely within this time; archive downloads may take as long as
   * they need but fail when no bytes arrive for this long. Default 60 s.
   */
  timeoutMs?: number;
}

/** Options for {@link NcbiSource.downloadVolumes}. */
export interface DownloadVolumesOptions {
  /** Aborting stops downloads and `tar`; partial files are left for the caller to remove. */
  abortSignal?: AbortSignal;
  /** Archives fetched at once; default 2. */
  concurrency?: number;
}

/** What {@link NcbiSource.downloadVolumes} left in the destination folder. */
export interface DownloadedVolumes {
  /** Names of the extracted database files (flat, sorted); the archives themselves are deleted. */
  files: string[];
  /** Archive bytes downloaded. */
  bytes: number;
}

/** Options of each {@link NcbiSource} read. */
export interface NcbiSourceReadOptions {
  /** Aborting stops the request. */
  abortSignal?: AbortSignal;
}

/** Read access to a release distribution; see {@link METADATA_FILE} for the layout. */
export interface NcbiSource {
  /** The distribution root, normalised to end in `/`. */
  readonly baseUrl: string;
  /** The newest release folder name, from `latest-dir`. */
  latestRelease(options?: NcbiSourceReadOptions): Promise<string>;
  /** Every database of a release. */
  metadata(release: string, options?: NcbiSourceReadOptions): Promise<ReleaseDatabase[]>;
  /** The database called `dbname` in a release, if it has one. */
  find(release: string, dbname: string, options?: NcbiSourceReadOptions): Promise<ReleaseDatabase | undefined>;
  /**
   * Downloads every volume archive of `entry` into `destDir` (created if missing, else it must be
   * empty, so nothing of another release can pass for part of this one), verifies each
   * against its `.md5`, and extracts it there. Checks before any download: the volume count and
   * that every archive name is safe. Archives are streamed to disk and hashed as they stream;
   * each is unpacked by `tar` into a fresh sub-folder that must then hold only plain regular files
   * (no links, directories or devices), which are moved up into `destDir`. Two archives may carry
   * the same file only if it is byte-identical.
   */
  downloadVolumes(
    release: string,
    entry: ReleaseDatabase,
    destDir: string,
    options?: DownloadVolumesOptions,
  ): Promise<DownloadedVolumes>;
}

interface Archive {
  name: string;
  url: URL;
}

function abortError(reason: unknown): Error {
  if (reason instanceof Error && reason.name === "AbortError") return reason;
  const error = new Error("the operation was aborted", { cause: reason });
  error.name = "AbortError";
  return error;
}

function checkRelease(release: string): void {
  if (typeof release !== "string" || !RELEASE_NAME.test(release)) {
    throw new ReleaseFormatError(`release names look like YYYY-MM-DD-HH-MM-SS, got ${JSON.stringify(release)}`, null);
  }
}

/** Resolves a metadata `files` item to a download URL, refusing anything outside the source. */
function resolveArchive(base: URL, release: string, file: string): Archive {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(file)) {
    let url: URL;
    try {
      url = new URL(file);
    } catch {
      throw new UnsafeSourcePathError(file, "not a valid URL");
    }
    const ncbiStyleFtp =
      url.protocol === "ftp:" && url.hostname === base.hostname && url.port === "" && !url.username && !url.password;
    if (ncbiStyleFtp) url = new URL(`${url.pathname}${url.search}${url.hash}`, base.origin);
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new UnsafeSourcePathError(file, "only http(s) URLs, or ftp URLs on the source's host, are fetched");
    if (url.origin !== base.origin)
      throw new UnsafeSourcePathError(file, `URL is not on the source's origin ${base.origin}`);
    if (url.username || url.password || url.search || url.hash) {
      throw new UnsafeSourcePathError(file, "URLs with credentials, queries or fragments are refused");
    }
    // The URL parser has already collapsed dot segments; an encoded one must not sneak through.
    const segments = url.pathname.split("/");
    let last: string;
    try {
      last = decodeURIComponent(segments.at(-1) ?? "");
    } catch {
      throw new UnsafeSourcePathError(file, "malformed percent-encoding");
    }
    if (segments.some((s) => /%2e|%2f|%5c/i.test(s))) throw new UnsafeSourcePathError(file, "encoded dots or slashes");
    if (!PLAIN_NAME.test(last) || !last.endsWith(".tar.gz")) {
      throw new UnsafeSourcePathError(file, "the archive must be a plain name ending in .tar.gz");
    }
    return { name: last, url };
  }
  if (!PLAIN_NAME.test(file) || file.includes("..") || !file.endsWith(".tar.gz")) {
    throw new UnsafeSourcePathError(
      file,
      "expected a plain file name ending in .tar.gz (no '/', '..' or absolute path)",
    );
  }
  return { name: file, url: new URL(`${release}/${file}`, base) };
}

/** Plans the archives of an entry: volume count first, then every name, before any request. */
function planArchives(base: URL, release: string, entry: ReleaseDatabase): Archive[] {
  if (entry.files.length !== entry["number-of-volumes"]) {
    throw new VolumeCountMismatchError(entry.dbname, release, entry["number-of-volumes"], entry.files.length);
  }
  const archives = entry.files.map((file) => resolveArchive(base, release, file));
  const names = new Set(archives.map((a) => a.name));
  if (names.size !== archives.length) throw new UnsafeSourcePathError(entry.files.join(", "), "archive names repeat");
  return archives;
}

/** Passes bytes through, hashing them and calling `onChunk` (used to reset an idle timer). */
class HashingTap extends Transform {
  private readonly hash = createHash("md5");
  bytes = 0;
  constructor(private readonly onChunk: () => void) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onChunk();
    callback(null, chunk);
  }
  digest(): string {
    return this.hash.digest("hex");
  }
}

async function fileMd5(file: string): Promise<string> {
  const hash = createHash("md5");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function runTar(args: string[], archive: string, signal?: AbortSignal): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn("tar", args, { shell: false, stdio: ["ignore", "ignore", "pipe"], signal, windowsHide: true });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      if (stderr.length < TAR_STDERR_LIMIT) stderr += chunk.toString("utf8");
    });
    child.once("error", (error: Error) => {
      if (error.name === "AbortError") reject(abortError(signal?.reason));
      else reject(new ArchiveError(archive, `could not run tar: ${error.message}`, { cause: error }));
    });
    child.once("close", (code, exitSignal) => {
      if (signal?.aborted) reject(abortError(signal.reason));
      else if (code === 0) resolve();
      else {
        const why = code === null ? `tar was killed by ${exitSignal ?? "a signal"}` : `tar exited with code ${code}`;
        reject(new ArchiveError(archive, `${why}: ${stderr.trim().split("\n").slice(-3).join(" | ")}`));
      }
    });
  });
}

/**
 * Extracts an archive into `scratch`, checks the tree holds only plain regular files at its top
 * level, and moves them into `destDir`.
 */
async function extractArchive(
  archivePath: string,
  archive: string,
  scratch: string,
  destDir: string,
  signal?: AbortSignal,
): Promise<string[]> {
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch);
  // GNU tar refuses '..' members and strips leading '/'; the tree check below catches the rest
  // (symlinks, hard links, devices, sub-folders) before anything reaches destDir.
  await runTar(
    ["-x", "-z", "-f", archivePath, "-C", scratch, "--no-same-owner", "--no-same-permissions"],
    archive,
    signal,
  );
  const names = (await readdir(scratch)).sort();
  if (names.length === 0) throw new ArchiveError(archive, "the archive is empty");
  for (const name of names) {
    const info = await lstat(path.join(scratch, name));
    if (!info.isFile())
      throw new ArchiveError(archive, `${JSON.stringify(name)} is not a regular file (links and folders are refused)`);
    if (info.nlink !== 1) throw new ArchiveError(archive, `${JSON.stringify(name)} is a hard link`);
    if (!PLAIN_NAME.test(name)) throw new ArchiveError(archive, `${JSON.stringify(name)} is not a plain file name`);
  }
  for (const name of names) {
    const from = path.join(scratch, name);
    const to = path.join(destDir, name);
    const existing = await lstat(to).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    if (existing) {
      // Shared files (e.g. taxdb.*) may ride along in several archives; they must agree.
      if (!existing.isFile() || (await fileMd5(to)) !== (await fileMd5(from))) {
        throw new ArchiveError(archive, `${JSON.stringify(name)} differs from the copy in another archive`);
      }
      await rm(from);
    } else {
      await rename(from, to);
    }
  }
  await rm(scratch, { recursive: true, force: true });
  return names;
}

/**
 * Creates a reader of an NCBI-style BLAST database distribution (layout: {@link METADATA_FILE}).
 * Every response is checked: release names by format, metadata by schema, archives by MD5.
 */
export function createNcbiSource(options: NcbiSourceOptions): NcbiSource {
  let base: URL;
  try {
    base = new URL(options.baseUrl.endsWith("/") ? options.baseUrl : `${options.baseUrl}/`);
  } catch (error) {
    throw new TypeError(`baseUrl is not a URL: ${options.baseUrl}`, { cause: error });
  }
  if (base.protocol !== "http:" && base.protocol !== "https:") throw new TypeError("baseUrl must be http(s)");
  const fetchImpl = options.fetchImpl ?? fetch;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError("timeoutMs must be a positive number");

  /** Starts a request whose controller the caller may abort (timeouts) alongside `signal`. */
  async function request(url: URL, controller: AbortController, signal?: AbortSignal): Promise<Response> {
    const combined = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
    let response: Response;
    try {
      // Redirects are refused: they could lead off the source's origin.
      response = await fetchImpl(url, { signal: combined, redirect: "error" });
    } catch (error) {
      if (signal?.aborted) throw abortError(signal.reason);
      const why = controller.signal.aborted ? `no answer within ${timeoutMs} ms` : (error as Error).message;
      throw new SourceUnavailableError(`cannot fetch ${url.href}: ${why}`, url.href, null, { cause: error });
    }
    if (!response.ok) {
      await response.body?.cancel().catch(() => undefined);
      throw new SourceUnavailableError(`${url.href} answered ${response.status}`, url.href, response.status);
    }
    return response;
  }

  async function fetchText(url: URL, signal?: AbortSignal): Promise<string> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error("timeout")), timeoutMs);
    try {
      const response = await request(url, controller, signal);
      const chunks: Uint8Array[] = [];
      let size = 0;
      try {
        for await (const chunk of Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>)) {
          size += (chunk as Uint8Array).length;
          if (size > SMALL_DOCUMENT_LIMIT_BYTES) {
            throw new SourceUnavailableError(
              `${url.href} is larger than ${SMALL_DOCUMENT_LIMIT_BYTES} bytes`,
              url.href,
              response.status,
            );
          }
          chunks.push(chunk as Uint8Array);
        }
      } catch (error) {
        if (error instanceof SourceUnavailableError) throw error;
        if (signal?.aborted) throw abortError(signal.reason);
        const why = controller.signal.aborted ? `not complete within ${timeoutMs} ms` : (error as Error).message;
        throw new SourceUnavailableError(`reading ${url.href} failed: ${why}`, url.href, response.status, {
          cause: error,
        });
      }
      return Buffer.concat(chunks).toString("utf8");
    } finally {
      clearTimeout(timer);
    }
  }

  /** Streams `url` to `file`, returning its MD5 and size; fails when the body stalls for `timeoutMs`. */
  async function download(url: URL, file: string, signal?: AbortSignal): Promise<{ md5: string; bytes: number }> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => controller.abort(new Error("stalled")), timeoutMs);
    };
    arm();
    try {
      const response = await request(url, controller, signal);
      const tap = new HashingTap(arm);
      try {
        await pipeline(Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>), tap, createWriteStream(file));
      } catch (error) {
        if (signal?.aborted) throw abortError(signal.reason);
        const why = controller.signal.aborted ? `no data for ${timeoutMs} ms` : (error as Error).message;
        throw new SourceUnavailableError(`downloading ${url.href} failed: ${why}`, url.href, response.status, {
          cause: error,
        });
      }
      return { md5: tap.digest(), bytes: tap.bytes };
    } finally {
      clearTimeout(timer);
    }
  }

  async function expectedMd5(archive: Archive, signal?: AbortSignal): Promise<string> {
    const url = new URL(`${archive.url.href}.md5`);
    const text = (await fetchText(url, signal)).trim();
    const match = /^([0-9a-fA-F]{32})(?:\s+\*?(\S+))?$/.exec(text.split("\n")[0]?.trim() ?? "");
    if (!match?.[1]) throw new ReleaseFormatError(`${url.href} does not hold "<md5>  <file>"`, url.href);
    if (match[2] !== undefined && path.posix.basename(match[2]) !== archive.name) {
      throw new UnsafeSourcePathError(match[2], `${url.href} names a different file than ${archive.name}`);
    }
    return match[1].toLowerCase();
  }

  const source: NcbiSource = {
    baseUrl: base.href,

    async latestRelease(options = {}) {
      const url = new URL("latest-dir", base);
      const text = (await fetchText(url, options.abortSignal)).trim();
      if (!RELEASE_NAME.test(text)) {
        throw new ReleaseFormatError(
          `latest-dir should name a YYYY-MM-DD-HH-MM-SS folder, got ${JSON.stringify(text.slice(0, 80))}`,
          url.href,
        );
      }
      return text;
    },

    async metadata(release, options = {}) {
      checkRelease(release);
      const url = new URL(`${release}/${METADATA_FILE}`, base);
      const text = await fetchText(url, options.abortSignal);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (error) {
        throw new ReleaseFormatError(`${METADATA_FILE} of ${release} is not JSON`, url.href, [
          (error as Error).message,
        ]);
      }
      const parsed = metadataSchema.safeParse(json);
      if (!parsed.success) {
        const issues = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(document)"}: ${issue.message}`);
        throw new ReleaseFormatError(`${METADATA_FILE} of ${release} is malformed`, url.href, issues);
      }
      return parsed.data;
    },

    async find(release, dbname, options = {}) {
      return (await source.metadata(release, options)).find((entry) => entry.dbname === dbname);
    },

    async downloadVolumes(release, entry, destDir, options = {}) {
      checkRelease(release);
      const archives = planArchives(base, release, entry);
      const concurrency = Math.max(1, Math.floor(options.concurrency ?? DEFAULT_CONCURRENCY));
      await mkdir(destDir, { recursive: true });
      // Files already there would pass for part of this release (stale volumes of an older one).
      if ((await readdir(destDir)).length > 0) throw new Error(`destination ${destDir} must be empty`);
      const downloads = path.join(destDir, ".download");
      await mkdir(downloads, { recursive: true });

      // One failure stops the rest; every worker has settled before the error surfaces, so the
      // caller can delete destDir without racing a write.
      const stop = new AbortController();
      const signal = options.abortSignal ? AbortSignal.any([options.abortSignal, stop.signal]) : stop.signal;
      const files = new Set<string>();
      let bytes = 0;
      let next = 0;
      let failure: { error: unknown } | undefined;
      // Moves into destDir run one at a time so duplicate-file checks cannot race.
      let moving: Promise<unknown> = Promise.resolve();

      const worker = async (): Promise<void> => {
        while (!failure && next < archives.length) {
          const index = next++;
          const archive = archives[index] as Archive;
          try {
            const expected = await expectedMd5(archive, signal);
            const archivePath = path.join(downloads, archive.name);
            const got = await download(archive.url, archivePath, signal);
            if (got.md5 !== expected) throw new ChecksumMismatchError(archive.name, expected, got.md5);
            bytes += got.bytes;
            const scratch = path.join(downloads, `extract-${index}`);
            const step = moving.then(() => extractArchive(archivePath, archive.name, scratch, destDir, signal));
            moving = step.catch(() => undefined);
            for (const name of await step) files.add(name);
            await rm(archivePath, { force: true });
          } catch (error) {
            failure ??= { error: options.abortSignal?.aborted ? abortError(options.abortSignal.reason) : error };
            stop.abort(new Error("another volume failed"));
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, archives.length) }, worker));
      if (failure) throw failure.error;
      await rm(downloads, { recursive: true, force: true });
      return { files: [...files].sort(), bytes };
    },
  };
  return source;
}
