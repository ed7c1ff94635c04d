import { once } from "node:events";
import { createReadStream, createWriteStream, type WriteStream } from "node:fs";
import { mkdir, readdir, rm, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { BlastToolError, runBlastTool } from "./blast-tools.js";
import { DATABASE_NAME } from "./database-name.js";

/** One partition of a database: an alias over its own volumes carrying the whole database's STATS. */
export interface PartitionInfo {
  /** 1-based, equal to the `p<i>` folder; partitions hold contiguous, ascending ranges of the FASTA. */
  index: number;
  /** Alias base path relative to the database version folder, e.g. "parts/p1/mydb_p1". */
  path: string;
  /** Letters (bases or residues) actually stored in this partition. */
  letters: number;
  /** Sequences actually stored in this partition. */
  sequences: number;
}

/** What {@link buildDatabase} built; also written to `manifest.json` in the version folder. */
export interface DatabaseManifest {
  name: string;
  type: "nucl" | "prot";
  /** YYYY-MM-DD-HH-MM-SS (UTC). */
  version: string;
  letters: number;
  sequences: number;
  /** Total bytes of all database files in the version folder (full database and partitions; not the manifest). */
  bytes: number;
  /** Volumes of the full database. */
  volumes: number;
  /** Bytes BLAST reads into memory to search the full database: its .nsq/.nin/.nhr (.psq/.pin/.phr) files. */
  bytes_to_cache: number;
  /** Base path of the whole database relative to the version folder, e.g. "full/mydb". */
  path: string;
  /** Empty when the database is not partitioned. */
  partitions: PartitionInfo[];
  /** ISO 8601 build time. */
  created_at: string;
}

export { DATABASE_NAME } from "./database-name.js";

const VERSION = /^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}$/;
const MAX_PARTITIONS = 64;
/** Lines written to a partition FASTA per write call. */
const WRITE_BATCH_CHARS = 1024 * 1024;

/** The inputs of a database build are invalid, or a build step failed. */
export class DatabaseBuildError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DatabaseBuildError";
  }
}

/** Database version label for `date`: `YYYY-MM-DD-HH-MM-SS` in UTC (sorts chronologically as text). */
export function formatVersion(date: Date): string {
  if (Number.isNaN(date.getTime())) throw new RangeError("invalid date");
  const two = (n: number): string => String(n).padStart(2, "0");
  return [
    String(date.getUTCFullYear()).padStart(4, "0"),
    two(date.getUTCMonth() + 1),
    two(date.getUTCDate()),
    two(date.getUTCHours()),
    two(date.getUTCMinutes()),
    two(date.getUTCSeconds()),
  ].join("-");
}

/** Options for {@link buildDatabase}. */
export interface BuildDatabaseOptions {
  /** Must match {@link DATABASE_NAME}. */
  name: string;
  /** Absolute path of the FASTA input; no whitespace (makeblastdb splits `-in` on spaces). */
  fastaPath: string;
  type: "nucl" | "prot";
  /** Absolute path of the version folder to create; it must not exist or be empty. */
  outDir: string;
  /** 0 or 1: not partitioned; 2..64: that many partitions. */
  partitions: number;
  /** Version label; defaults to {@link formatVersion} of `now()`. */
  version?: string;
  now?: () => Date;
  /** Aborting stops the running BLAST+ tool; the partly built folder is removed. */
  abortSignal?: AbortSignal;
  /** Told when the whole database's makeblastdb and the partitions' builds start and end (an operation's steps). */
  onStep?: BuildStepListener;
}

/** Hears a build's steps start and end: makeblastdb of the whole database, then the partitions (when any). */
export type BuildStepListener = (step: "makeblastdb" | "partitions", phase: "started" | "done") => Promise<void>;

interface DbInfo {
  letters: number;
  sequences: number;
  volumes: number;
}

function parseInfo(stdout: string, what: string): DbInfo {
  const counts = /([\d,]+) sequences; ([\d,]+) total (?:bases|residues)/.exec(stdout);
  if (!counts?.[1] || !counts[2]) throw new DatabaseBuildError(`unexpected blastdbcmd -info output for ${what}`);
  const volumesAt = stdout.indexOf("Volumes:");
  const volumes =
    volumesAt < 0
      ? 0
      : stdout
          .slice(volumesAt + "Volumes:".length)
          .split("\n")
          .filter((line) => line.trim() !== "").length;
  return {
    sequences: Number(counts[1].replaceAll(",", "")),
    letters: Number(counts[2].replaceAll(",", "")),
    volumes,
  };
}

async function dbInfo(cwd: string, db: string, type: "nucl" | "prot", signal?: AbortSignal): Promise<DbInfo> {
  const { stdout } = await runBlastTool("blastdbcmd", ["-db", db, "-dbtype", type, "-info"], { cwd, signal });
  return parseInfo(stdout, db);
}

async function filesUnder(dir: string): Promise<{ file: string; size: number }[]> {
  const out: { file: string; size: number }[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(full)));
    else if (entry.isFile()) out.push({ file: full, size: (await stat(full)).size });
  }
  return out;
}

async function* fastaLines(fastaPath: string): AsyncGenerator<string> {
  // latin1 keeps every byte as one character, so records are copied to partitions unchanged.
  const input = createReadStream(fastaPath, { encoding: "latin1" });
  const lines = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
  try {
    yield* lines;
  } finally {
    lines.close();
    input.destroy();
  }
}

/** Pass 1: number of records and sequence letters (non-blank characters of sequence lines). */
async function scanFasta(fastaPath: string): Promise<{ records: number; letters: number }> {
  let records = 0;
  let letters = 0;
  let lineNo = 0;
  for await (const line of fastaLines(fastaPath)) {
    lineNo++;
    if (line.startsWith(">")) records++;
    else if (records === 0) {
      if (line.trim() !== "")
        throw new DatabaseBuildError(`FASTA line ${lineNo}: sequence data before the first '>' header`);
    } else letters += line.replace(/\s+/g, "").length;
  }
  if (records === 0) throw new DatabaseBuildError("the FASTA file holds no records");
  return { records, letters };
}

class PartitionWriter {
  private stream: WriteStream | undefined;
  private pending: string[] = [];
  private pendingChars = 0;

  async open(file: string): Promise<void> {
    await this.close();
    this.stream = createWriteStream(file, { encoding: "latin1" });
  }

  async line(text: string): Promise<void> {
    this.pending.push(text, "\n");
    this.pendingChars += text.length + 1;
    if (this.pendingChars >= WRITE_BATCH_CHARS) await this.flush();
  }

  private async flush(): Promise<void> {
    if (!this.stream || this.pending.length === 0) return;
    const text = this.pending.join("");
    this.pending = [];
    this.pendingChars = 0;
    if (!this.stream.write(text, "latin1")) await once(this.stream, "drain");
  }

  async close(): Promise<void> {
    await this.flush();
    const stream = this.stream;
    this.stream = undefined;
    if (stream)
      await new Promise<void>((resolve, reject) =>
        stream.end((error?: Error | null) => (error ? reject(error) : resolve())),
      );
  }

  destroy(): void {
    this.stream?.destroy();
  }
}

/**
 * Pass 2: splits the FASTA into `count` contiguous groups balanced by letters. A record goes to
 * the partition where its first letter falls, clamped so no partition is skipped or left empty.
 * Returns the partition FASTA paths relative to `outDir`.
 */
async function splitFasta(
  fastaPath: string,
  outDir: string,
  name: string,
  count: number,
  totals: { records: number; letters: number },
): Promise<string[]> {
  const files: string[] = [];
  for (let i = 1; i <= count; i++) {
    await mkdir(path.join(outDir, "parts", `p${i}`), { recursive: true });
    files.push(path.join("parts", `p${i}`, `${name}_p${i}.fa`));
  }
  const writer = new PartitionWriter();
  let current = -1;
  let record = -1;
  let lettersBefore = 0;
  try {
    for await (const line of fastaLines(fastaPath)) {
      if (line.startsWith(">")) {
        record++;
        const byLetters =
          totals.letters > 0
            ? Math.floor((count * lettersBefore) / totals.letters)
            : Math.floor((count * record) / totals.records);
        // Never skip a partition, and leave at least one record for each partition still to come.
        let target = Math.min(byLetters, current + 1, count - 1);
        target = Math.max(target, current, count - (totals.records - record));
        if (target !== current) {
          current = target;
          await writer.open(path.join(outDir, files[current] ?? ""));
        }
      } else if (record < 0) {
        continue;
      } else {
        lettersBefore += line.replace(/\s+/g, "").length;
      }
      await writer.line(line);
    }
    await writer.close();
  } catch (error) {
    writer.destroy();
    throw error;
  }
  if (current !== count - 1) throw new DatabaseBuildError("the FASTA file changed while it was being partitioned");
  return files;
}

async function makeDb(
  cwd: string,
  input: string,
  out: string,
  title: string,
  type: "nucl" | "prot",
  parseSeqids: boolean,
  signal?: AbortSignal,
): Promise<void> {
  const args = ["-in", input, "-dbtype", type, "-out", out, "-title", title];
  if (parseSeqids) args.push("-parse_seqids");
  await runBlastTool("makeblastdb", args, { cwd, signal });
}

function aliasText(name: string, index: number, count: number, whole: DbInfo): string {
  return [
    "#",
    `# Partition ${index} of ${count} of ${name}, with the whole database's statistics so that`,
    "# e-values equal those of an unpartitioned search.",
    "#",
    `TITLE ${name} partition ${index} of ${count}`,
    `DBLIST ${name}_p${index}_data`,
    `STATS_NSEQ ${whole.sequences}`,
    `STATS_TOTLEN ${whole.letters}`,
    "",
  ].join("\n");
}

function validate(options: BuildDatabaseOptions): void {
  if (typeof options.name !== "string" || !DATABASE_NAME.test(options.name)) {
    throw new DatabaseBuildError(
      `invalid database name ${JSON.stringify(options.name)}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  if (options.type !== "nucl" && options.type !== "prot") {
    throw new DatabaseBuildError(`invalid database type ${JSON.stringify(options.type)}: use "nucl" or "prot"`);
  }
  if (!Number.isInteger(options.partitions) || options.partitions < 0 || options.partitions > MAX_PARTITIONS) {
    throw new DatabaseBuildError(
      `partitions must be an integer from 0 to ${MAX_PARTITIONS}, got ${options.partitions}`,
    );
  }
  if (
    typeof options.fastaPath !== "string" ||
    !path.isAbsolute(options.fastaPath) ||
    /[\s\0]/.test(options.fastaPath)
  ) {
    throw new DatabaseBuildError("fastaPath must be an absolute path without whitespace");
  }
  if (typeof options.outDir !== "string" || !path.isAbsolute(options.outDir) || options.outDir.includes("\0")) {
    throw new DatabaseBuildError("outDir must be an absolute path");
  }
  if (options.version !== undefined && !VERSION.test(options.version)) {
    throw new DatabaseBuildError(`version must look like YYYY-MM-DD-HH-MM-SS, got ${JSON.stringify(options.version)}`);
  }
}

/** Creates `outDir` (or accepts an existing empty one); returns whether this call created it. */
async function prepareOutDir(outDir: string): Promise<boolean> {
  try {
    const entries = await readdir(outDir);
    if (entries.length > 0) throw new DatabaseBuildError(`outDir ${outDir} already exists and is not empty`);
    return false;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    await mkdir(outDir, { recursive: true });
    return true;
  }
}

/**
 * Builds a BLAST database version folder from a FASTA file and returns (and writes) its manifest.
 *
 * Layout under `outDir`: `full/<name>.*` (the whole database), and for N ≥ 2 partitions
 * `parts/p<i>/<name>_p<i>_data.*` (contiguous, letter-balanced slices of the FASTA, in order, so
 * partition i holds lower OIDs than partition i+1) with an alias `parts/p<i>/<name>_p<i>.nal`
 * (`.pal`) whose STATS_NSEQ/STATS_TOTLEN are the whole database's: a search of a partition then
 * uses the unpartitioned effective search space and reports identical e-values. Then
 * `manifest.json`.
 *
 * Sequence ids are parsed (`-parse_seqids`) so hits carry the FASTA ids. makeblastdb rejects that
 * for duplicate ids or local ids longer than 50 characters; an unpartitioned database is then
 * rebuilt without it (hits get `gnl|BL_ORD_ID|<oid>` ids), but a partitioned build fails, because
 * ordinal ids restart in every partition and merged hits could no longer be told apart.
 *
 * The FASTA is streamed (read twice: once to count letters, once to split), never loaded whole.
 * On failure the folder is removed if this call created it.
 */
export async function buildDatabase(options: BuildDatabaseOptions): Promise<DatabaseManifest> {
  validate(options);
  const { name, type, fastaPath, outDir, abortSignal: signal } = options;
  const fastaStat = await stat(fastaPath).catch((error: unknown) => {
    throw new DatabaseBuildError(`cannot read FASTA ${fastaPath}`, { cause: error });
  });
  if (!fastaStat.isFile()) throw new DatabaseBuildError(`FASTA ${fastaPath} is not a regular file`);
  const now = (options.now ?? (() => new Date()))();
  const version = options.version ?? formatVersion(now);
  const partitionCount = options.partitions >= 2 ? options.partitions : 0;
  const created = await prepareOutDir(outDir);

  try {
    const fullPath = path.posix.join("full", name);
    await mkdir(path.join(outDir, "full"));
    const scan = partitionCount > 0 ? await scanFasta(fastaPath) : undefined;
    if (scan && scan.records < partitionCount) {
      throw new DatabaseBuildError(`cannot split ${scan.records} sequences into ${partitionCount} partitions`);
    }

    const onStep = options.onStep ?? (async () => undefined);
    await onStep("makeblastdb", "started");
    let parseSeqids = true;
    try {
      await makeDb(outDir, fastaPath, fullPath, name, type, true, signal);
    } catch (error) {
      if (!(error instanceof BlastToolError) || error.exitCode === null) throw error;
      if (partitionCount > 0) {
        throw new DatabaseBuildError(
          `makeblastdb -parse_seqids failed (${error.message}); a partitioned database needs unique FASTA ids of at most 50 characters`,
          { cause: error },
        );
      }
      parseSeqids = false;
      await rm(path.join(outDir, "full"), { recursive: true, force: true });
      await mkdir(path.join(outDir, "full"));
      await makeDb(outDir, fastaPath, fullPath, name, type, false, signal);
    }
    const whole = await dbInfo(outDir, fullPath, type, signal);
    await onStep("makeblastdb", "done");

    const partitions: PartitionInfo[] = [];
    if (scan) {
      await onStep("partitions", "started");
      const fastas = await splitFasta(fastaPath, outDir, name, partitionCount, scan);
      for (const [i, fasta] of fastas.entries()) {
        const index = i + 1;
        const dir = path.posix.join("parts", `p${index}`);
        await makeDb(
          outDir,
          fasta,
          path.posix.join(dir, `${name}_p${index}_data`),
          `${name}_p${index}`,
          type,
          parseSeqids,
          signal,
        );
        await unlink(path.join(outDir, fasta));
        const aliasBase = path.posix.join(dir, `${name}_p${index}`);
        await writeFile(
          path.join(outDir, `${aliasBase}.${type === "nucl" ? "nal" : "pal"}`),
          aliasText(name, index, partitionCount, whole),
        );
        const info = await dbInfo(outDir, aliasBase, type, signal);
        partitions.push({ index, path: aliasBase, letters: info.letters, sequences: info.sequences });
      }
      const letters = partitions.reduce((sum, p) => sum + p.letters, 0);
      const sequences = partitions.reduce((sum, p) => sum + p.sequences, 0);
      if (letters !== whole.letters || sequences !== whole.sequences) {
        throw new DatabaseBuildError(
          `partitions hold ${sequences} sequences / ${letters} letters, the full database ${whole.sequences} / ${whole.letters}`,
        );
      }
      await onStep("partitions", "done");
    }

    const files = await filesUnder(outDir);
    const cacheFile = new RegExp(
      `^${name.replace(/[.]/g, "\\.")}(?:\\.\\d+)?\\.${type === "nucl" ? "n" : "p"}(?:sq|in|hr)$`,
    );
    const manifest: DatabaseManifest = {
      name,
      type,
      version,
      letters: whole.letters,
      sequences: whole.sequences,
      bytes: files.reduce((sum, f) => sum + f.size, 0),
      volumes: whole.volumes,
      bytes_to_cache: files
        .filter((f) => path.dirname(f.file) === path.join(outDir, "full") && cacheFile.test(path.basename(f.file)))
        .reduce((sum, f) => sum + f.size, 0),
      path: fullPath,
      partitions,
      created_at: now.toISOString(),
    };
    await writeFile(path.join(outDir, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    return manifest;
  } catch (error) {
    if (created) await rm(outDir, { recursive: true, force: true });
    throw error;
  }
}
