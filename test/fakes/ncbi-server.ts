import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { runBlastTool } from "../../shared/blast/blast-tools.js";
import { METADATA_FILE, RELEASE_NAME } from "../../shared/databases/ncbi-source.js";

/** A database to publish: its FASTA is split into `volumes` contiguous, equal-count groups. */
export interface FakeDatabase {
  name: string;
  type: "nucl" | "prot";
  fasta: string;
  volumes: number;
}

/** A fake NCBI BLAST database distribution on loopback; see {@link startFakeNcbiServer}. */
export interface FakeNcbiServer {
  /** Base URL of the distribution, ending in `/`. */
  url: string;
  /** Folder served at `url` (tests may plant files here directly). */
  root: string;
  /** Builds real BLAST databases and publishes them as `<url><release>/…`; replaces that release. */
  publishRelease(release: string, dbs: FakeDatabase[]): Promise<void>;
  /** Writes `latest-dir`. */
  setLatest(release: string): Promise<void>;
  /** Flips bytes in the middle of an archive of a release (same size), so its `.md5` no longer matches. */
  corrupt(release: string, file: string): Promise<void>;
  /** Rewrites a release's metadata document through `edit` (for malformed or hostile metadata). */
  updateMetadata(release: string, edit: (dbs: Record<string, unknown>[]) => void): Promise<void>;
  /** Paths (with query) of every request served so far, in order. */
  requests(): string[];
  close(): Promise<void>;
}

/** The release time as ISO, the way NCBI writes `last-updated` (no zone). */
function lastUpdated(release: string): string {
  const [y, mo, d, h, mi, s] = release.split("-");
  return `${y}-${mo}-${d}T${h}:${mi}:${s}`;
}

async function run(command: string, args: string[], cwd: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { cwd, shell: false, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
    });
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}: ${stderr}`))));
  });
}

async function md5(file: string): Promise<string> {
  const hash = createHash("md5");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

function splitRecords(fasta: string): string[] {
  return fasta
    .split(/^(?=>)/m)
    .filter((record) => record.startsWith(">"))
    .map((record) => (record.endsWith("\n") ? record : `${record}\n`));
}

/**
 * Builds one database the way NCBI ships a multi-volume one: volumes `<name>.NN` (each a real
 * makeblastdb database with parsed ids), an alias `<name>.nal`/`.pal` listing them, and one archive
 * per volume, `<name>.NN.tar.gz`, holding that volume's files (the alias rides in `.00`).
 */
async function buildDistribution(
  releaseDir: string,
  work: string,
  release: string,
  db: FakeDatabase,
): Promise<Record<string, unknown>> {
  const records = splitRecords(db.fasta);
  if (!Number.isInteger(db.volumes) || db.volumes < 1 || db.volumes > 99 || records.length < db.volumes) {
    throw new Error(`cannot split ${records.length} records into ${db.volumes} volumes`);
  }
  await mkdir(work, { recursive: true });
  const volumes: string[] = [];
  for (let v = 0; v < db.volumes; v++) {
    const volume = `${db.name}.${String(v).padStart(2, "0")}`;
    const from = Math.floor((v * records.length) / db.volumes);
    const to = Math.floor(((v + 1) * records.length) / db.volumes);
    await writeFile(path.join(work, `${volume}.fa`), records.slice(from, to).join(""));
    await runBlastTool(
      "makeblastdb",
      ["-in", `${volume}.fa`, "-dbtype", db.type, "-out", volume, "-title", db.name, "-parse_seqids"],
      { cwd: work },
    );
    await rm(path.join(work, `${volume}.fa`));
    volumes.push(volume);
  }
  const alias = `${db.name}.${db.type === "nucl" ? "nal" : "pal"}`;
  await writeFile(
    path.join(work, alias),
    `#\n# Alias file of the fake distribution\n#\nTITLE ${db.name}\nDBLIST ${volumes.join(" ")}\n`,
  );

  const { stdout } = await runBlastTool("blastdbcmd", ["-db", db.name, "-dbtype", db.type, "-info"], { cwd: work });
  const counts = /([\d,]+) sequences; ([\d,]+) total (?:bases|residues)/.exec(stdout);
  if (!counts?.[1] || !counts[2]) throw new Error(`unexpected blastdbcmd -info output: ${stdout}`);

  const all = await readdir(work);
  let bytesTotal = 0;
  let bytesToCache = 0;
  for (const file of all) {
    const size = (await stat(path.join(work, file))).size;
    bytesTotal += size;
    if (/\.[np](?:sq|in|hr)$/.test(file)) bytesToCache += size;
  }
  const archives: string[] = [];
  for (const [v, volume] of volumes.entries()) {
    const members = all.filter((file) => file.startsWith(`${volume}.`)).sort();
    if (v === 0) members.push(alias);
    const archive = `${volume}.tar.gz`;
    await run("tar", ["-czf", path.join(releaseDir, archive), "-C", work, ...members], work);
    await writeFile(
      path.join(releaseDir, `${archive}.md5`),
      `${await md5(path.join(releaseDir, archive))}  ${archive}\n`,
    );
    archives.push(archive);
  }
  return {
    dbname: db.name,
    version: "1.1",
    dbtype: db.type === "nucl" ? "Nucleotide" : "Protein",
    description: `${db.name} (fake distribution)`,
    "number-of-letters": Number(counts[2].replaceAll(",", "")),
    "number-of-sequences": Number(counts[1].replaceAll(",", "")),
    files: archives,
    "last-updated": lastUpdated(release),
    "bytes-total": bytesTotal,
    "bytes-to-cache": bytesToCache,
    "number-of-volumes": archives.length,
    "db-version": 5,
  };
}

/**
 * Starts a fake NCBI BLAST database distribution on 127.0.0.1 (random port) serving the layout
 * `createNcbiSource` reads: `latest-dir`, `<release>/blastdb-metadata-1-1.json`, volume archives
 * and their `.md5` files. Releases are built with real `makeblastdb` and `tar`. Files are streamed
 * with `Content-Length`; missing files get 404, other methods 405.
 */
export async function startFakeNcbiServer(): Promise<FakeNcbiServer> {
  const root = await mkdtemp(path.join(tmpdir(), "fake-ncbi-"));
  const work = await mkdtemp(path.join(tmpdir(), "fake-ncbi-build-"));
  const seen: string[] = [];

  const server: Server = createServer((req, res) => {
    const target = req.url ?? "/";
    seen.push(target);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405).end();
      return;
    }
    let file: string;
    try {
      file = path.resolve(root, `.${decodeURIComponent(new URL(target, "http://x").pathname)}`);
    } catch {
      res.writeHead(400).end();
      return;
    }
    if (file !== root && !file.startsWith(`${root}${path.sep}`)) {
      res.writeHead(404).end();
      return;
    }
    stat(file).then(
      (info) => {
        if (!info.isFile()) {
          res.writeHead(404).end();
          return;
        }
        const type = file.endsWith(".json")
          ? "application/json"
          : file.endsWith(".gz")
            ? "application/gzip"
            : "text/plain";
        res.writeHead(200, { "content-length": info.size, "content-type": type });
        if (req.method === "HEAD") {
          res.end();
          return;
        }
        pipeline(createReadStream(file), res).catch(() => res.destroy());
      },
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  const metadataPath = (release: string): string => path.join(root, release, METADATA_FILE);

  return {
    url: `http://127.0.0.1:${port}/`,
    root,

    async publishRelease(release, dbs) {
      if (!RELEASE_NAME.test(release)) throw new Error(`bad release name ${release}`);
      const releaseDir = path.join(root, release);
      await rm(releaseDir, { recursive: true, force: true });
      await mkdir(releaseDir, { recursive: true });
      const entries: Record<string, unknown>[] = [];
      for (const db of dbs) {
        const dbWork = path.join(work, release, db.name);
        await rm(dbWork, { recursive: true, force: true });
        entries.push(await buildDistribution(releaseDir, dbWork, release, db));
        await rm(dbWork, { recursive: true, force: true });
      }
      await writeFile(metadataPath(release), `${JSON.stringify(entries, null, 2)}\n`);
    },

    async setLatest(release) {
      await writeFile(path.join(root, "latest-dir"), `${release}\n`);
    },

    async corrupt(release, file) {
      const target = path.join(root, release, file);
      const { size } = await stat(target);
      const handle = await open(target, "r+");
      try {
        const at = Math.floor(size / 2);
        const byte = Buffer.alloc(16);
        const { bytesRead } = await handle.read(byte, 0, 16, at);
        for (let i = 0; i < bytesRead; i++) byte[i] = (byte[i] ?? 0) ^ 0xff;
        await handle.write(byte, 0, bytesRead, at);
      } finally {
        await handle.close();
      }
    },

    async updateMetadata(release, edit) {
      const dbs = JSON.parse(await readFile(metadataPath(release), "utf8")) as Record<string, unknown>[];
      edit(dbs);
      await writeFile(metadataPath(release), `${JSON.stringify(dbs, null, 2)}\n`);
    },

    requests() {
      return [...seen];
    },

    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(root, { recursive: true, force: true });
      await rm(work, { recursive: true, force: true });
    },
  };
}
