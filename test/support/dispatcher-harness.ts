import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll } from "vitest";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { RunningAzurite } from "../../local/azurite.js";
import type { DatabaseManifest } from "../../shared/blast/database-builder.js";
import type { DatabaseCatalog, DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { newJobId, newJobRecord } from "../../shared/jobs/model.js";
import { startTestAzurite } from "./service-fakes.js";

/**
 * What the dispatcher tests share (issue 22 item 5): one Azurite and one real BLAST+ run per file
 * (a small demo database, two queries, its XML output), the job and artifact stores of a test, a
 * catalog holding the database, and a submit.
 */
const root = path.resolve(import.meta.dirname, "../..");

export interface DispatcherFixture {
  azurite: RunningAzurite;
  /** The folder holding the database (`full/demo`), the queries (`q.fa`) and BLAST's output. */
  dir: string;
  /** Real blastn XML output of the two queries against the database. */
  blastXml: string;
}

/** Starts Azurite and runs BLAST+ once for the calling test file (beforeAll), and cleans up after it. */
export function useDispatcherFixture(folderPrefix: string): DispatcherFixture {
  const fixture = {} as DispatcherFixture;
  beforeAll(async () => {
    fixture.azurite = await startTestAzurite();
    const dir = mkdtempSync(path.join(os.tmpdir(), folderPrefix));
    fixture.dir = dir;
    const records = readFileSync(path.join(root, "local/demo/16s-rrna-demo.fasta"), "utf8").split(/(?=^>)/m);
    writeFileSync(path.join(dir, "db.fa"), records.slice(0, 60).join(""));
    writeFileSync(path.join(dir, "q.fa"), records.slice(0, 2).join(""));
    execFileSync("makeblastdb", ["-in", "db.fa", "-dbtype", "nucl", "-parse_seqids", "-out", "full/demo"], {
      cwd: dir,
      stdio: "pipe",
    });
    execFileSync(
      "blastn",
      ["-query", "q.fa", "-db", "full/demo", "-outfmt", "5", "-max_target_seqs", "20", "-out", "blast.xml"],
      { cwd: dir, stdio: "pipe" },
    );
    fixture.blastXml = path.join(dir, "blast.xml");
  });
  afterAll(async () => {
    await fixture.azurite?.stop();
    if (fixture.dir) rmSync(fixture.dir, { recursive: true, force: true });
  });
  return fixture;
}

/** A test's own tables and container (names under `prefix`) on the fixture's Azurite. */
export function testStores(fixture: DispatcherFixture, prefix: string) {
  const table = (name: string) =>
    TableClient.fromConnectionString(fixture.azurite.connectionString, `${prefix}${name}`, {
      allowInsecureConnection: true,
    });
  const jobs = new JobStore(table("jobs"), table("keys"));
  const artifacts = new ArtifactStore(new ContainerClient(fixture.azurite.connectionString, `${prefix}artifacts`));
  return { table, jobs, artifacts, init: () => Promise.all([jobs.init(), artifacts.init()]) };
}

/**
 * The demo database as a catalog entry, with the counts BLAST reported for it (so a merge's totals
 * match); `partitions` partitions (each searched, in these tests, as the whole database).
 */
export function demoDatabase(fixture: DispatcherFixture, partitions = 0) {
  const reported = (tag: string) =>
    Number(new RegExp(`<${tag}>(\\d+)</${tag}>`).exec(readFileSync(fixture.blastXml, "latin1"))?.[1]);
  const manifest: DatabaseManifest = {
    name: "demo",
    type: "nucl",
    version: "2026-01-01-00-00-00",
    letters: reported("Statistics_db-len"),
    sequences: reported("Statistics_db-num"),
    bytes: 1000,
    volumes: 1,
    bytes_to_cache: 1000,
    path: "full/demo",
    partitions: Array.from({ length: partitions }, (_, i) => ({
      index: i + 1,
      path: `parts/p${i + 1}/demo`,
      letters: 500,
      sequences: 30,
    })),
    created_at: new Date().toISOString(),
  };
  const entry: DatabaseEntry = { manifest, root: fixture.dir, location: "local://databases/demo/2026-01-01-00-00-00" };
  const catalog: DatabaseCatalog = {
    list: async () => [entry],
    get: async () => entry,
    hold: async () => {},
    release: async () => {},
  };
  return { manifest, entry, catalog };
}

/** Stores a blastn job of the fixture's two queries on the demo database, as a submit does; its id. */
export async function submitDemoJob(
  fixture: DispatcherFixture,
  stores: Pick<ReturnType<typeof testStores>, "jobs" | "artifacts">,
  entry: DatabaseEntry,
  profile: "standard" | "sharded" = "standard",
): Promise<string> {
  const job = newJobRecord({
    job_id: newJobId(),
    program: "blastn",
    db_name: "demo",
    db_version: entry.manifest.version,
    db_location: entry.location,
    blast_version: "2.12.0+",
    blast_options: { max_target_seqs: 20 },
    priority: 50,
    execution_profile: profile,
    resource_profile: "",
    submission_source: "external_api",
    external_correlation_id: "",
    idempotency_key: "",
    fingerprint: "",
    query_count: 2,
    query_letters: 3000,
  });
  await stores.artifacts.putText(job.job_id, "query.fa", readFileSync(path.join(fixture.dir, "q.fa"), "utf8"));
  await stores.jobs.create(job);
  return job.job_id;
}
