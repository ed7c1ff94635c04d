import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlastToolError, runBlastTool } from "../../shared/blast/blast-tools.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import {
  ArchiveError,
  ChecksumMismatchError,
  createNcbiSource,
  METADATA_FILE,
  type NcbiSource,
  ReleaseFormatError,
  SourceUnavailableError,
  UnsafeSourcePathError,
  VolumeCountMismatchError,
} from "../../shared/databases/ncbi-source.js";
import {
  checkForUpdates,
  listStagingFolders,
  type PreparedDatabaseManifest,
  prepareDatabaseRelease,
} from "../../shared/databases/prepare.js";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { prng } from "../support/helpers.js";

const DB = "testdb";
const R1 = "2024-01-01-00-00-00"; // 30 sequences, 3 volumes
const R2 = "2024-02-01-00-00-00"; // corrupted archive
const R3 = "2024-03-01-00-00-00"; // metadata volume count disagrees with its files
const R4 = "2024-04-01-00-00-00"; // hostile file names and archives
const R5 = "2024-05-01-00-00-00"; // 20 sequences, 2 volumes: the shrinking release
const R6 = "2024-06-01-00-00-00"; // prepare aborted mid-download
const VERSION = /^\d{4}(-\d{2}){5}$/;

const rnd = prng(20240101);
const SEQUENCES = Array.from({ length: 30 }, () =>
  Array.from({ length: 1500 }, () => "ACGT"[Math.floor(rnd() * 4)]).join(""),
);

function fasta(count: number): string {
  return SEQUENCES.slice(0, count)
    .map((sequence, i) => `>seq${i} fake sequence ${i}\n${sequence.match(/.{1,80}/g)?.join("\n")}\n`)
    .join("");
}

async function run(command: string, args: string[]): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { shell: false, stdio: "ignore" });
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

async function md5File(file: string): Promise<string> {
  return createHash("md5")
    .update(await readFile(file))
    .digest("hex");
}

/** Every file under `dir` (relative path → inode). */
async function tree(dir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath, entry.name);
    out.set(path.relative(dir, full), (await stat(full)).ino);
  }
  return out;
}

/** Subject ids blastn reports for `query` (a slice of a known sequence) against a database. */
async function blastnHits(cwd: string, db: string, query: string, work: string): Promise<string[]> {
  const queryFile = path.join(work, `query-${createHash("md5").update(query).digest("hex")}.fa`);
  await writeFile(queryFile, `>q\n${query}\n`);
  const { stdout } = await runBlastTool(
    "blastn",
    ["-query", queryFile, "-db", db, "-outfmt", "6 sseqid evalue", "-max_target_seqs", "5", "-evalue", "1e-10"],
    { cwd },
  );
  return stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => line.split("\t")[0] ?? "");
}

describe("database preparation from an NCBI-style source (real BLAST+, fake distribution)", () => {
  let server: FakeNcbiServer;
  let source: NcbiSource;
  let databasesDir: string;
  let work: string;
  let first: PreparedDatabaseManifest;

  const current = async (): Promise<string> => (await readFile(path.join(databasesDir, DB, "current"), "utf8")).trim();
  const metadataOf = async (release: string): Promise<Record<string, unknown>> => {
    const dbs = JSON.parse(await readFile(path.join(server.root, release, METADATA_FILE), "utf8")) as Record<
      string,
      unknown
    >[];
    return dbs.find((db) => db.dbname === DB) ?? {};
  };

  beforeAll(async () => {
    server = await startFakeNcbiServer();
    source = createNcbiSource({ baseUrl: server.url, timeoutMs: 10_000 });
    databasesDir = await mkdtemp(path.join(tmpdir(), "prepare-dbs-"));
    work = await mkdtemp(path.join(tmpdir(), "prepare-work-"));
    await server.publishRelease(R1, [{ name: DB, type: "nucl", fasta: fasta(30), volumes: 3 }]);
    await server.setLatest(R1);
  });

  afterAll(async () => {
    await server?.close();
    if (databasesDir) await rm(databasesDir, { recursive: true, force: true });
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("B-005 B-068: prepares the latest 3-volume release into its own version folder, swaps current, and blastn searches it", async () => {
    const metadata = await metadataOf(R1);
    expect(metadata["number-of-volumes"]).toBe(3);

    first = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2 });

    expect(first.version).toBe(R1);
    expect(first.version).toMatch(VERSION);
    expect(first.name).toBe(DB);
    expect(first.type).toBe("nucl");
    expect(first.sequences).toBe(metadata["number-of-sequences"]);
    expect(first.letters).toBe(metadata["number-of-letters"]);
    expect(first.sequences).toBe(30);
    expect(first.letters).toBe(30 * 1500);
    expect(first.partitions).toHaveLength(2);
    expect(first.partitions.reduce((sum, p) => sum + p.sequences, 0)).toBe(30);
    expect(first.source).toEqual({ release: R1, last_updated: "2024-01-01T00:00:00.000Z", volumes: 3 });

    const releaseDir = path.join(databasesDir, DB, R1);
    expect(JSON.parse(await readFile(path.join(releaseDir, "manifest.json"), "utf8"))).toEqual(first);
    expect(await current()).toBe(R1);
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);
    const entry = await createFileDatabaseCatalog(databasesDir).get(DB);
    expect(entry?.manifest.version).toBe(R1);

    // Every archive and its checksum was fetched once.
    const fetched = server.requests().filter((r) => r.startsWith(`/${R1}/${DB}.`));
    expect(fetched.sort()).toEqual(
      ["00", "01", "02"].flatMap((n) => [`/${R1}/${DB}.${n}.tar.gz`, `/${R1}/${DB}.${n}.tar.gz.md5`]).sort(),
    );

    // A sequence from the last volume is found in the full database and in the partition holding it.
    const query = SEQUENCES[25]?.slice(400, 700) ?? "";
    expect((await blastnHits(releaseDir, first.path, query, work))[0]).toBe("seq25");
    const last = first.partitions.at(-1);
    expect((await blastnHits(releaseDir, last?.path ?? "", query, work))[0]).toBe("seq25");
  });

  it("re-running a completed prepare is a no-op that returns the same manifest and downloads nothing", async () => {
    const before = server.requests().length;
    const releaseDir = path.join(databasesDir, DB, R1);
    const filesBefore = await tree(releaseDir);

    const again = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2 });

    expect(again).toEqual(first);
    expect(server.requests().slice(before)).toEqual(["/latest-dir"]);
    expect(await tree(releaseDir)).toEqual(filesBefore);
    expect(await current()).toBe(R1);

    // With the release named explicitly the source is not contacted at all.
    const n = server.requests().length;
    await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2, release: R1 });
    expect(server.requests().length).toBe(n);
  });

  it("a checksum mismatch fails with ChecksumMismatchError, leaves current on the previous release and no staging folder", async () => {
    await server.publishRelease(R2, [{ name: DB, type: "nucl", fasta: fasta(30), volumes: 3 }]);
    await server.corrupt(R2, `${DB}.01.tar.gz`);
    await server.setLatest(R2);

    const error = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2 }).catch(
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(ChecksumMismatchError);
    const mismatch = error as ChecksumMismatchError;
    expect(mismatch.file).toBe(`${DB}.01.tar.gz`);
    expect(mismatch.expected).not.toBe(mismatch.actual);
    expect(await current()).toBe(R1);
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);
    expect((await readdir(path.join(databasesDir, DB))).sort()).toEqual([R1, "current"]);
  });

  it("a metadata volume count that disagrees with its files fails before any archive is fetched", async () => {
    await server.publishRelease(R3, [{ name: DB, type: "nucl", fasta: fasta(30), volumes: 3 }]);
    await server.updateMetadata(R3, (dbs) => {
      for (const db of dbs) db["number-of-volumes"] = 4;
    });
    await server.setLatest(R3);
    const before = server.requests().length;

    const error = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2 }).catch(
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(VolumeCountMismatchError);
    expect(error).toMatchObject({ database: DB, release: R3, expected: 4, actual: 3 });
    expect(
      server
        .requests()
        .slice(before)
        .filter((r) => r.includes(".tar.gz")),
    ).toEqual([]);
    expect(await current()).toBe(R1);
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);
  });

  it("refuses path-traversal names, absolute paths and other origins in metadata without requesting them", async () => {
    await server.publishRelease(R4, [{ name: DB, type: "nucl", fasta: fasta(6), volumes: 1 }]);
    await server.setLatest(R4);
    const port = new URL(server.url).port;
    const hostile = [
      "../x.tar.gz",
      `../${R1}/${DB}.00.tar.gz`,
      "/etc/x.tar.gz",
      "sub/x.tar.gz",
      `http://127.0.0.2:${port}/${R4}/${DB}.00.tar.gz`,
      `https://example.org/${DB}.00.tar.gz`,
      `ftp://127.0.0.1:${port}/${R4}/${DB}.00.tar.gz`,
      `ftp://127.0.0.2/${R4}/${DB}.00.tar.gz`,
      `ftp://user:pw@127.0.0.1/${R4}/${DB}.00.tar.gz`,
      `ftp://127.0.0.1/${R4}/..%2fx.tar.gz`,
      `${server.url}${R4}/%2e%2e%2fx.tar.gz`,
    ];
    for (const file of hostile) {
      await server.updateMetadata(R4, (dbs) => {
        for (const db of dbs) db.files = [file];
      });
      const before = server.requests().length;
      const error = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 0 }).catch(
        (e: unknown) => e,
      );
      expect(error, file).toBeInstanceOf(UnsafeSourcePathError);
      expect(server.requests().slice(before), file).toEqual(["/latest-dir", `/${R4}/${METADATA_FILE}`]);
    }
    expect(await current()).toBe(R1);
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);

    // A same-origin absolute URL is fine, and so is NCBI's style of ftp URL on the source's host,
    // which is read over the source's own http(s).
    const allowed: [string, string][] = [
      ["same-origin", `${server.url}${R4}/${DB}.00.tar.gz`],
      ["ftp-on-source-host", `ftp://127.0.0.1/${R4}/${DB}.00.tar.gz`],
    ];
    for (const [label, file] of allowed) {
      await server.updateMetadata(R4, (dbs) => {
        for (const db of dbs) db.files = [file];
      });
      const before = server.requests().length;
      const entry = await source.find(R4, DB);
      const dest = path.join(work, label);
      const downloaded = await source.downloadVolumes(R4, entry!, dest);
      expect(downloaded.files).toContain(`${DB}.00.nsq`);
      expect(downloaded.files).toContain(`${DB}.nal`);
      expect(await readdir(dest)).toEqual(downloaded.files);
      expect(server.requests().slice(before)).toContain(`/${R4}/${DB}.00.tar.gz`);
    }
  });

  it("refuses archives holding symlinks or '..' members, and leaves nothing outside the folder", async () => {
    const plant = async (
      archiveName: string,
      build: (dir: string) => Promise<string[]>,
      tarArgs: string[] = [],
    ): Promise<void> => {
      const dir = await mkdtemp(path.join(work, "plant-"));
      const members = await build(dir);
      const archive = path.join(server.root, R4, archiveName);
      await run("tar", ["-czf", archive, "-C", dir, ...tarArgs, ...members]);
      await writeFile(`${archive}.md5`, `${await md5File(archive)}  ${archiveName}\n`);
      await server.updateMetadata(R4, (dbs) => {
        for (const db of dbs) db.files = [archiveName];
      });
    };
    const entryFor = async () => (await source.find(R4, DB))!;

    await plant("link.00.tar.gz", async (dir) => {
      await symlink("/etc/passwd", path.join(dir, `${DB}.00.nsq`));
      return [`${DB}.00.nsq`];
    });
    const linkDest = path.join(work, "link-dest");
    await expect(source.downloadVolumes(R4, await entryFor(), linkDest)).rejects.toBeInstanceOf(ArchiveError);
    expect(await readdir(linkDest).then((names) => names.filter((n) => !n.startsWith(".")))).toEqual([]);

    await plant(
      "dots.00.tar.gz",
      async (dir) => {
        await writeFile(path.join(dir, "escaped"), "x");
        return ["escaped"];
      },
      ["-P", "--transform", "s,^,../,"],
    );
    const dotsDest = path.join(work, "dots", "dest");
    await mkdir(dotsDest, { recursive: true });
    await expect(source.downloadVolumes(R4, await entryFor(), dotsDest)).rejects.toBeInstanceOf(ArchiveError);
    expect(await readdir(path.join(work, "dots"))).toEqual(["dest"]);
    expect(await readdir(path.join(dotsDest, ".download"), { recursive: true })).not.toContain("escaped");
  });

  it("validates latest-dir and metadata documents and reports missing releases", async () => {
    await server.setLatest("not-a-release");
    await expect(source.latestRelease()).rejects.toBeInstanceOf(ReleaseFormatError);

    const broken = "2023-06-01-00-00-00";
    await mkdir(path.join(server.root, broken));
    await writeFile(
      path.join(server.root, broken, METADATA_FILE),
      JSON.stringify([{ dbname: DB, dbtype: "DNA", files: [] }]),
    );
    const malformed = await source.metadata(broken).catch((e: unknown) => e);
    expect(malformed).toBeInstanceOf(ReleaseFormatError);
    expect((malformed as ReleaseFormatError).issues.some((issue) => issue.startsWith("0.dbtype"))).toBe(true);
    await writeFile(path.join(server.root, broken, METADATA_FILE), "{not json");
    await expect(source.metadata(broken)).rejects.toBeInstanceOf(ReleaseFormatError);

    const missing = await source.metadata("2020-01-01-00-00-00").catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(SourceUnavailableError);
    expect((missing as SourceUnavailableError).status).toBe(404);

    // Unknown fields are ignored.
    const [entry] = await source.metadata(R1);
    expect(entry).not.toHaveProperty("db-version");
    expect(entry?.["number-of-volumes"]).toBe(3);
  });

  it("the shrinking-release trap (DESIGN §7): a newer release with fewer volumes (3 → 2) is flagged by checkForUpdates, prepares cleanly, and holds nothing of the old one", async () => {
    // A database the source does not publish, to see the note.
    const localFasta = path.join(work, "local.fa");
    await writeFile(localFasta, fasta(3));
    await publishDatabase(databasesDir, { name: "localdb", fastaPath: localFasta, type: "nucl", partitions: 0 });

    await server.publishRelease(R5, [{ name: DB, type: "nucl", fasta: fasta(20), volumes: 2 }]);
    await server.setLatest(R5);
    const catalog = createFileDatabaseCatalog(databasesDir);

    const before = await checkForUpdates({ source, catalog });
    expect(before).toEqual([
      expect.objectContaining({
        name: "localdb",
        latest_release: R5,
        update_available: false,
        note: expect.any(String),
      }),
      {
        name: DB,
        current_version: R1,
        latest_release: R5,
        latest_last_updated: "2024-05-01T00:00:00.000Z",
        update_available: true,
      },
    ]);

    const oldDir = path.join(databasesDir, DB, R1);
    const oldTree = await tree(oldDir);
    const oldManifest = await readFile(path.join(oldDir, "manifest.json"), "utf8");
    const oldNsq = await md5File(path.join(oldDir, `${first.path}.nsq`));

    // A build that crashed earlier (its owner process is gone) is cleaned up by the next prepare.
    const crashed = path.join(databasesDir, DB, ".staging-crashed");
    await mkdir(crashed);
    const gone = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
    await writeFile(
      path.join(crashed, "owner.json"),
      JSON.stringify({ host: hostname(), pid: Number(gone.stdout), started_at: new Date().toISOString() }),
    );

    const next = await prepareDatabaseRelease({ source, name: DB, databasesDir, partitions: 2 });
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);
    const metadata = await metadataOf(R5);
    expect(next.version).toBe(R5);
    expect(next.sequences).toBe(20);
    expect(next.sequences).toBe(metadata["number-of-sequences"]);
    expect(next.letters).toBe(metadata["number-of-letters"]);
    expect(next.source?.volumes).toBe(2);
    expect(await current()).toBe(R5);

    // The new folder is its own: BLAST sees exactly the new release, from files under that folder only.
    const newDir = path.join(databasesDir, DB, R5);
    const { stdout } = await runBlastTool("blastdbcmd", ["-db", next.path, "-dbtype", "nucl", "-info"], {
      cwd: newDir,
    });
    expect(stdout).toMatch(/\b20 sequences; 30,000 total bases/);
    const volumes = stdout
      .slice(stdout.indexOf("Volumes:"))
      .split("\n")
      .slice(1)
      .map((l) => l.trim())
      .filter(Boolean);
    expect(volumes.length).toBeGreaterThan(0);
    for (const volume of volumes) expect(volume.startsWith(`${newDir}${path.sep}`)).toBe(true);
    const newTree = await tree(newDir);
    const oldInodes = new Set(oldTree.values());
    for (const [file, inode] of newTree) expect(oldInodes.has(inode), file).toBe(false);
    expect([...newTree.keys()].some((file) => /\.0[0-9]\.n/.test(file))).toBe(false);

    // A sequence only the old third volume held is gone from the new release, and still in the old.
    const dropped = SEQUENCES[25]?.slice(100, 400) ?? "";
    expect(await blastnHits(newDir, next.path, dropped, work)).toEqual([]);
    for (const partition of next.partitions)
      expect(await blastnHits(newDir, partition.path, dropped, work)).toEqual([]);
    await expect(
      runBlastTool("blastdbcmd", ["-db", next.path, "-dbtype", "nucl", "-entry", "seq25"], { cwd: newDir }),
    ).rejects.toBeInstanceOf(BlastToolError);
    expect((await blastnHits(newDir, next.path, SEQUENCES[5]?.slice(0, 300) ?? "", work))[0]).toBe("seq5");

    // The old release folder is immutable and still there until someone removes it.
    expect(await tree(oldDir)).toEqual(oldTree);
    expect(await readFile(path.join(oldDir, "manifest.json"), "utf8")).toBe(oldManifest);
    expect(await md5File(path.join(oldDir, `${first.path}.nsq`))).toBe(oldNsq);
    expect((await blastnHits(oldDir, first.path, dropped, work))[0]).toBe("seq25");
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);

    const after = await checkForUpdates({ source, catalog });
    expect(after.find((row) => row.name === DB)).toEqual({
      name: DB,
      current_version: R5,
      latest_release: R5,
      latest_last_updated: "2024-05-01T00:00:00.000Z",
      update_available: false,
    });
  });
  it("an aborted prepare stops mid-download, removes its staging folder and leaves current alone", async () => {
    await server.publishRelease(R6, [{ name: DB, type: "nucl", fasta: fasta(12), volumes: 2 }]);
    await server.setLatest(R6);
    const controller = new AbortController();
    const aborting: typeof fetch = (input, init) => {
      if (String(input).endsWith(".tar.gz")) controller.abort(new Error("operator cancelled"));
      return fetch(input, init);
    };
    const watched = createNcbiSource({ baseUrl: server.url, fetchImpl: aborting });

    const error = await prepareDatabaseRelease({
      source: watched,
      name: DB,
      databasesDir,
      partitions: 2,
      abortSignal: controller.signal,
    }).catch((e: unknown) => e);

    expect(error).toMatchObject({ name: "AbortError" });
    expect(await current()).toBe(R5);
    expect(await listStagingFolders(databasesDir, DB)).toEqual([]);
    expect((await readdir(path.join(databasesDir, DB))).includes(R6)).toBe(false);
  });
});
