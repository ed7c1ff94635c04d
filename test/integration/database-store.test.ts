import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { BlobServiceClient } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { runBlastTool } from "../../shared/blast/blast-tools.js";
import { buildDatabase, type DatabaseManifest } from "../../shared/blast/database-builder.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import { fillReleaseCache, evictCachedReleases } from "../../shared/databases/node-cache.js";
import { fileDigest, ReleaseStore } from "../../shared/databases/release-store.js";
import {
  createTableDatabaseCatalog,
  RELEASES_CONTAINER,
  type TableDatabaseCatalog,
} from "../../shared/databases/table-catalog.js";
import { tableOpener } from "../../shared/storage/table-source.js";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import { prepareDatabaseRelease } from "../../shared/databases/prepare.js";
import { startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { demoQueries } from "../support/jobapi-client.js";
import { testAzurite } from "../support/service-fakes.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DEMO_FASTA = path.join(ROOT, "local/demo/16s-rrna-demo.fasta");
let azurite: RunningAzurite;
let work: string;

beforeAll(async () => {
  azurite = await testAzurite();
  work = await mkdtemp(path.join(os.tmpdir(), "bp-dbstore-"));
});

afterAll(async () => {
  await azurite?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** A catalog over its own table and container, so the tests do not see each other's databases. */
function isolated(
  prefix: string,
  cacheRoot: string,
  extra: { fillCache?: boolean; importFrom?: ReturnType<typeof createFileDatabaseCatalog> } = {},
) {
  const service = BlobServiceClient.fromConnectionString(azurite.connectionString);
  const store = new ReleaseStore(service.getContainerClient(`${prefix}-${RELEASES_CONTAINER}`));
  const table = tableOpener(azurite.connectionString, `${prefix}catalog`);
  return { store, catalog: createTableDatabaseCatalog({ store, table, cacheRoot, ...extra }) };
}

async function filesUnder(dir: string, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await filesUnder(dir, rel)));
    else out.push(rel);
  }
  return out.sort();
}

/** Builds a release of the demo database directly (no catalog), with a given version. */
async function buildRelease(dir: string, name: string, version: string): Promise<DatabaseManifest> {
  return buildDatabase({
    name,
    fastaPath: DEMO_FASTA,
    type: "nucl",
    partitions: 2,
    outDir: path.join(dir, name, version),
    version,
  });
}

describe("databases in the workload storage account", () => {
  it("db add publishes an immutable release with a manifest of every file's name, size and MD5, and another process reads it from the table catalog and searches its own copy", async () => {
    const builder = isolated("pub", path.join(work, "pub-build"));
    const entry = await publishDatabase(
      path.join(work, "pub-build"),
      { name: "demo", fastaPath: DEMO_FASTA, type: "nucl", partitions: 2 },
      builder.catalog,
    );

    const published = await builder.store.manifest("demo", entry.manifest.version);
    expect(published?.manifest).toEqual(entry.manifest);
    const local = await filesUnder(entry.root);
    expect(published?.files.map((f) => f.name)).toEqual(local);
    for (const file of published?.files ?? []) {
      expect(await fileDigest(path.join(entry.root, file.name))).toEqual({ size: file.size, md5: file.md5 });
    }

    // The job API on another machine: same storage, empty cache folder.
    const elsewhere = path.join(work, "pub-elsewhere");
    const { catalog: reader } = isolated("pub", elsewhere, { fillCache: true });
    expect((await reader.list()).map((e) => [e.manifest.name, e.manifest.version])).toEqual([
      ["demo", entry.manifest.version],
    ]);
    const got = await reader.get("demo");
    expect(got?.root).toBe(path.join(elsewhere, "demo", entry.manifest.version));
    expect(got?.location).not.toMatch(/https?:|AccountKey|sig=/);
    expect(await filesUnder(got?.root as string)).toEqual(local);
    const { stdout } = await runBlastTool("blastdbcmd", ["-db", entry.manifest.path, "-dbtype", "nucl", "-info"], {
      cwd: got?.root as string,
    });
    expect(stdout).toContain(`${entry.manifest.sequences} sequences`);

    // A later release becomes current for every reader; the earlier one stays readable by version.
    const second = await publishDatabase(
      path.join(work, "pub-build2"),
      { name: "demo", fastaPath: DEMO_FASTA, type: "nucl", partitions: 0 },
      builder.catalog,
    );
    expect(second.manifest.version >= entry.manifest.version).toBe(true);
    expect((await reader.get("demo"))?.manifest.partitions).toEqual([]);
    if (second.manifest.version !== entry.manifest.version)
      expect((await reader.get("demo", entry.manifest.version))?.manifest.partitions).toHaveLength(2);
  });

  it("B-005 the prepare orchestration's step publishes the prepared release and makes it current in the table catalog", async () => {
    const server = await startFakeNcbiServer();
    try {
      await server.publishRelease("2026-07-01-00-00-00", [
        { name: "ncbidb", type: "nucl", fasta: demoQueries(12, 1500), volumes: 2 },
      ]);
      await server.setLatest("2026-07-01-00-00-00");
      const folder = path.join(work, "prepare");
      const { catalog, store } = isolated("prep", folder);
      const manifest = await prepareDatabaseRelease({
        source: createNcbiSource({ baseUrl: server.url }),
        name: "ncbidb",
        databasesDir: folder,
        partitions: 2,
        publisher: catalog,
      });
      expect(await store.releases("ncbidb")).toEqual(["2026-07-01-00-00-00"]);
      expect((await store.manifest("ncbidb", "2026-07-01-00-00-00"))?.manifest).toEqual(manifest);
      expect((await catalog.get("ncbidb"))?.manifest).toEqual(manifest);
    } finally {
      await server.close();
    }
  });

  it("a release whose manifest was never written does not exist, and publishing it again completes it", async () => {
    const { store } = isolated("half", work);
    const manifest = await buildRelease(path.join(work, "half"), "halfdb", "2026-01-02-03-04-05");
    const dir = path.join(work, "half", "halfdb", manifest.version);
    // An upload that died after its files: the files are there, release.json is not.
    const container = BlobServiceClient.fromConnectionString(azurite.connectionString).getContainerClient(
      `half-${RELEASES_CONTAINER}`,
    );
    await container.createIfNotExists();
    const data = await readFile(path.join(dir, "manifest.json"));
    await container.getBlockBlobClient(`releases/halfdb/${manifest.version}/manifest.json`).upload(data, data.length);
    expect(await store.manifest("halfdb", manifest.version)).toBeUndefined();
    expect(await store.releases("halfdb")).toEqual([]);

    const published = await store.publish("halfdb", manifest.version, dir);
    expect(await store.releases("halfdb")).toEqual([manifest.version]);
    // Published once: a second publish changes nothing and answers the same manifest.
    expect(await store.publish("halfdb", manifest.version, dir)).toEqual(published);
  });

  it("refuses file and release names that could leave the release folder", async () => {
    const { store } = isolated("names", work);
    await expect(store.manifest("../x", "2026-01-01-00-00-00")).rejects.toThrow(/invalid database release/);
    await expect(
      store.download(
        "demo",
        "2026-01-01-00-00-00",
        { name: "../../etc/passwd", size: 1, md5: "" },
        path.join(work, "x"),
      ),
    ).rejects.toThrow(/invalid release file name/);
    // A tampered release.json naming a file outside the release folder is refused before any file is read.
    const container = BlobServiceClient.fromConnectionString(azurite.connectionString).getContainerClient(
      `names-${RELEASES_CONTAINER}`,
    );
    await container.createIfNotExists();
    const tampered = Buffer.from(
      JSON.stringify({
        database: "evil",
        release: "2026-01-01-00-00-00",
        files: [{ name: "../../../../etc/hostname", size: 1, md5: "" }],
      }),
    );
    await container
      .getBlockBlobClient("releases/evil/2026-01-01-00-00-00/release.json")
      .upload(tampered, tampered.length);
    await expect(
      fillReleaseCache({
        store,
        cacheRoot: path.join(work, "names-cache"),
        database: "evil",
        release: "2026-01-01-00-00-00",
      }),
    ).rejects.toThrow(/invalid release file name/);
  });

  it("imports a database found only in the folder layout once, and a later publish supersedes it", async () => {
    const folder = path.join(work, "import");
    const old = await publishDatabase(folder, { name: "legacy", fastaPath: DEMO_FASTA, type: "nucl", partitions: 0 });
    const { catalog, store } = isolated("imp", folder, { importFrom: createFileDatabaseCatalog(folder) });
    expect((await catalog.list()).map((e) => e.manifest.version)).toEqual([old.manifest.version]);
    expect(await store.releases("legacy")).toEqual([old.manifest.version]);

    const next = await buildRelease(path.join(work, "import-next"), "legacy", "2099-01-01-00-00-00");
    await catalog.publish(path.join(work, "import-next", "legacy", next.version), next);
    // The folder still names the old release current; the table, now authoritative, names the new one.
    expect((await createFileDatabaseCatalog(folder).get("legacy"))?.manifest.version).toBe(old.manifest.version);
    expect((await catalog.get("legacy"))?.manifest.version).toBe(next.version);
  });

  it("publishing collects old releases: it keeps the current one, the two newest others and any release a job holds", async () => {
    const { catalog, store } = isolated("gc", path.join(work, "gc-cache"));
    const versions = [
      "2026-01-01-00-00-00",
      "2026-02-01-00-00-00",
      "2026-03-01-00-00-00",
      "2026-04-01-00-00-00",
      "2026-05-01-00-00-00",
    ];
    for (const version of versions) {
      const manifest = await buildRelease(path.join(work, "gc"), "gcdb", version);
      await catalog.publish(path.join(work, "gc", "gcdb", version), manifest);
      // A job searches the first release while the others are published.
      if (version === versions[0]) await catalog.hold("gcdb", version, "job1");
    }
    expect(await store.releases("gcdb")).toEqual([versions[0], versions[2], versions[3], versions[4]]);
    expect(await catalog.get("gcdb", versions[1])).toBeUndefined();
    expect((await catalog.get("gcdb", versions[0]))?.manifest.version).toBe(versions[0]);

    await catalog.release("gcdb", versions[0] as string, "job1");
    expect(await catalog.collect("gcdb", 3)).toEqual([versions[0]]);
    expect((await catalog.get("gcdb"))?.manifest.version).toBe(versions[4]);
  });
});

describe("node-local release cache", () => {
  let store: ReleaseStore;
  let catalog: TableDatabaseCatalog;
  const release = "2026-06-01-00-00-00";

  beforeAll(async () => {
    ({ store, catalog } = isolated("node", path.join(work, "node-unused")));
    const manifest = await buildRelease(path.join(work, "node-build"), "nodedb", release);
    await catalog.publish(path.join(work, "node-build", "nodedb", release), manifest);
  });

  it("two pods filling one partition on one node at once download it once, the other waits and finds it verified", async () => {
    const cacheRoot = path.join(work, "node-a");
    const [a, b] = await Promise.all([
      fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 }),
      fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 }),
    ]);
    const partitionFiles = a.manifest.files
      .filter((f) => f.name === "manifest.json" || f.name.startsWith("parts/p1/"))
      .map((f) => f.name);
    expect([...a.downloaded, ...b.downloaded].sort()).toEqual(partitionFiles.sort());
    expect([a.waited, b.waited].filter(Boolean)).toHaveLength(1);
    const filled = await filesUnder(path.join(cacheRoot, "nodedb", release));
    expect(filled).toEqual(partitionFiles.sort());
    expect(filled.some((f) => f.startsWith("full/") || f.startsWith("parts/p2/"))).toBe(false);
  });

  it("issue 24: a shard starting again on a node trusts its verified stamp (size, mtime, ctime, inode) instead of reading every MD5; a file changed since is verified again", async () => {
    const cacheRoot = path.join(work, "node-stamp");
    const first = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 });
    expect(first.stamped).toBe(0);
    const again = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 });
    expect(again.downloaded).toEqual([]);
    expect(again.stamped).toBe(again.verified);
    expect(again.verified).toBe(first.downloaded.length);
    // Changed in place with its size and mtime put back: its ctime moved, so its MD5 is read again.
    const victim = first.manifest.files.find((f) => f.name.startsWith("parts/p1/") && f.size > 16);
    const file = path.join(cacheRoot, "nodedb", release, victim?.name as string);
    const { mtime } = await stat(file);
    const bytes = await readFile(file);
    bytes[8] = (bytes[8] as number) ^ 0xff;
    await writeFile(file, bytes);
    await utimes(file, mtime, mtime);
    const third = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 });
    expect(third.downloaded).toEqual([victim?.name]);
    expect(third.stamped).toBe(third.verified);
    expect(await fileDigest(file)).toEqual({ size: victim?.size, md5: victim?.md5 });
    // Eviction takes the release's stamps with it.
    expect(await evictCachedReleases(cacheRoot, "nodedb", new Set())).toEqual([release]);
    await expect(stat(path.join(cacheRoot, "nodedb", `.verified-${release}-p1.json`))).rejects.toThrow(/ENOENT/);
  });

  it("a cached file corrupted in place (same size) is found by its MD5 and fetched again; the others are kept", async () => {
    const cacheRoot = path.join(work, "node-b");
    const first = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 0 });
    const victim = first.manifest.files.find((f) => f.name.startsWith("full/") && f.size > 16);
    const file = path.join(cacheRoot, "nodedb", release, victim?.name as string);
    const bytes = await readFile(file);
    bytes[8] = (bytes[8] as number) ^ 0xff;
    await writeFile(file, bytes);
    const again = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 0 });
    expect(again.downloaded).toEqual([victim?.name]);
    expect(await fileDigest(file)).toEqual({ size: victim?.size, md5: victim?.md5 });
  });

  it("takes over the lock of a filler that died (its heartbeat stopped), and eviction spares a release being filled", async () => {
    const cacheRoot = path.join(work, "node-c");
    const lock = path.join(cacheRoot, "nodedb", `.fill-${release}-p2.lock`);
    await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 2 });
    await writeFile(lock, JSON.stringify({ token: "dead", pid: 1 }));
    expect(await evictCachedReleases(cacheRoot, "nodedb", new Set())).toEqual([]);
    const old = new Date(Date.now() - 120_000);
    await utimes(lock, old, old);
    const result = await fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 2 });
    expect(result.tookOver).toBe(true);
    expect(result.downloaded).toEqual([]);
    await expect(stat(lock)).rejects.toThrow(/ENOENT/);
    expect(await evictCachedReleases(cacheRoot, "nodedb", new Set([release]))).toEqual([]);
    expect(await evictCachedReleases(cacheRoot, "nodedb", new Set())).toEqual([release]);
  });

  it("a download whose bytes differ from the manifest is refused and leaves nothing in the cache", async () => {
    const service = BlobServiceClient.fromConnectionString(azurite.connectionString);
    const container = service.getContainerClient(`node-${RELEASES_CONTAINER}`);
    const published = await store.manifest("nodedb", release);
    const target = published?.files.find((f) => f.name.startsWith("parts/p1/") && f.size > 0);
    const noise = randomBytes(target?.size as number);
    // Tamper with the stored blob (same size, other bytes): the reader's MD5 check catches it.
    await container.getBlockBlobClient(`releases/nodedb/${release}/${target?.name}`).upload(noise, noise.length);
    const cacheRoot = path.join(work, "node-d");
    await expect(fillReleaseCache({ store, cacheRoot, database: "nodedb", release, partition: 1 })).rejects.toThrow(
      /MD5/,
    );
    await expect(stat(path.join(cacheRoot, "nodedb", release, target?.name as string))).rejects.toThrow(/ENOENT/);
    expect((await readdir(path.join(cacheRoot, "nodedb"))).filter((n) => n.endsWith(".lock"))).toEqual([]);
  });
});
