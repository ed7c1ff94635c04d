import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJobApiApp } from "../../jobapi/app.js";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { DispatchLease } from "../../jobapi/jobs/dispatch-lease.js";
import { JobService } from "../../jobapi/jobs/job-service.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY, type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { blastVersion } from "../../shared/blast/blast-tools.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { jobRecordFixture } from "../support/helpers.js";
import { createLogger } from "../../shared/logging/logger.js";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";
import { demoQueries } from "../support/jobapi-client.js";
import { type LossyProxy, startLossyProxy } from "../support/lossy-proxy.js";
import { idleDispatcher } from "../support/idle-dispatcher.js";
import { testAzuriteStartMs } from "../support/service-fakes.js";

const root = path.resolve(import.meta.dirname, "../..");
const logger = createLogger({ level: "error" });
let azurite: RunningAzurite;
let proxy: LossyProxy;

beforeAll(async () => {
  azurite = await startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger,
    watchdogPath: path.join(root, "local/parent-watchdog.cjs"),
    startTimeoutMs: testAzuriteStartMs(),
  });
  const table = new URL(azurite.tableEndpoint);
  proxy = await startLossyProxy({ host: table.hostname, port: Number(table.port) });
});

afterAll(async () => {
  await proxy?.close();
  await azurite?.stop();
});

/** Azurite's connection string with its Table endpoint behind the lossy proxy. */
function viaProxy(): string {
  return [
    "DefaultEndpointsProtocol=http",
    `AccountName=${DEV_ACCOUNT}`,
    `AccountKey=${DEV_ACCOUNT_KEY}`,
    `BlobEndpoint=${azurite.blobEndpoint}`,
    `TableEndpoint=http://127.0.0.1:${proxy.port}/${DEV_ACCOUNT}`,
  ].join(";");
}

async function storeViaProxy(prefix: string): Promise<JobStore> {
  const store = JobStore.fromConnectionString(viaProxy(), prefix);
  await store.init();
  return store;
}

const job = (): JobRecord => jobRecordFixture({ db_location: "local://databases/demo/2026-01-01-00-00-00" });

describe("storage writes the SDK retries after a lost answer", () => {
  it("a job insert whose answer was lost is stored once and succeeds (the retry's 409 is this very job)", async () => {
    const store = await storeViaProxy("lostcreate");
    const j = job();
    const lost = proxy.loseNextResponse(/^POST \/devstoreaccount1\/lostcreatejobs\b/);
    await store.create(j);
    await lost;
    expect(await store.get(j.job_id)).toEqual(j);
  });

  it("a job update whose answer was lost is applied once, not again on top of itself", async () => {
    const store = await storeViaProxy("lostupdate");
    const j = job();
    await store.create(j);
    const lost = proxy.loseNextResponse(
      new RegExp(`^PUT /devstoreaccount1/lostupdatejobs\\(PartitionKey='job',RowKey='${j.job_id}'\\)`),
    );
    const updated = await store.update(j.job_id, (x) => ({ ...x, query_count: x.query_count + 1 }));
    await lost;
    expect(updated?.query_count).toBe(2);
    expect((await store.get(j.job_id))?.query_count).toBe(2);
    // The next update starts from the stored version (no stale copy left behind).
    await store.update(j.job_id, (x) => ({ ...x, query_count: x.query_count + 1 }));
    expect((await store.get(j.job_id))?.query_count).toBe(3);
  });

  it("an idempotency key claim whose answer was lost is this submit's claim", async () => {
    const store = await storeViaProxy("lostclaim");
    const lost = proxy.loseNextResponse(/^POST \/devstoreaccount1\/lostclaimidempotency\b/);
    const claim = await store.claimKey("run-42", {
      job_id: "abcdefabcdef",
      fingerprint: "fp",
      claimed_at: new Date().toISOString(),
    });
    await lost;
    expect(claim).toEqual({ claimed: true });
    // Another job's claim of the same key is still refused, naming the holder.
    expect(await store.claimKey("run-42", { job_id: "zzzzzzzzzzzz", fingerprint: "fp" })).toMatchObject({
      claimed: false,
      holder: { job_id: "abcdefabcdef" },
    });
  });

  it("a dispatch lease acquired by an insert whose answer was lost is held, not waited for", async () => {
    const table = TableClient.fromConnectionString(viaProxy(), "lostlease", { allowInsecureConnection: true });
    const lease = new DispatchLease({ table, leaseDurationMs: 60_000, logger });
    await lease.init();
    const lost = proxy.loseNextResponse(/^POST \/devstoreaccount1\/lostlease\b/);
    let acquired = false;
    await lease.start({ acquired: () => (acquired = true), lost: () => {} });
    await lost;
    expect(acquired).toBe(true);
    expect(lease.isHeld()).toBe(true);
    await lease.stop();
  });

  it("POST /v1/jobs whose job insert lost its answer is accepted (202) with one job, not a 500", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "bp-lost-"));
    try {
      const fasta = path.join(dir, "db.fa");
      writeFileSync(fasta, demoQueries(20, 800));
      const databasesDir = path.join(dir, "databases");
      await publishDatabase(databasesDir, { name: "lostdemo", fastaPath: fasta, type: "nucl", partitions: 0 });
      const config = loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: viaProxy(), JOBAPI_DATA_DIR: dir });
      const jobs = await storeViaProxy("lostsubmit");
      const artifacts = ArtifactStore.fromConnectionString(viaProxy(), "lostsubmit");
      await artifacts.init();
      const catalog = createFileDatabaseCatalog(databasesDir);
      const tokens = new ApiTokenService(createFileSecretStore(path.join(dir, "secrets")));
      await tokens.ensure();
      const token = (await tokens.state())?.current.value as string;
      const dispatcher = idleDispatcher({
        jobs,
        artifacts,
        catalog,
        logger,
        nodeMemoryBytes: config.nodeMemoryBytes,
        dir,
      });
      const service = new JobService({
        jobs,
        artifacts,
        catalog,
        dispatcher,
        logger,
        blastVersion,
        maxQueuedJobs: 10,
        retryAfterSeconds: 5,
      });
      const app = createJobApiApp({
        config,
        service,
        jobs,
        artifacts,
        catalog,
        tokens,
        logger,
        blastVersion,
        executorName: "none",
        activeJobs: () => 0,
        dispatchRole: () => "standby",
      });
      const lost = proxy.loseNextResponse(/^POST \/devstoreaccount1\/lostsubmitjobs\b/);
      const res = await app.request("/v1/jobs", {
        method: "POST",
        headers: { "X-SVC-API-Token": token, "Content-Type": "application/json" },
        body: JSON.stringify({ program: "blastn", db: "lostdemo", query_fasta: demoQueries(1, 300) }),
      });
      await lost;
      expect(res.status).toBe(202);
      const accepted = (await res.json()) as { job_id: string; status: string };
      expect(accepted.status).toBe("queued");
      const list = (await (await app.request("/v1/jobs", { headers: { "X-SVC-API-Token": token } })).json()) as {
        jobs: { job_id: string }[];
      };
      expect(list.jobs.map((j) => j.job_id)).toEqual([accepted.job_id]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("two uploads of one blob", () => {
  it("never commit a mix of each other's blocks: the blob is one upload's bytes, whole", async () => {
    const store = ArtifactStore.fromConnectionString(azurite.connectionString, "racing-uploads");
    await store.init();
    const MiB = 1024 * 1024;
    // A stages its first blocks, then waits while B uploads the same blob from start to end.
    let reachedGate!: () => void;
    const gateReached = new Promise<void>((resolve) => {
      reachedGate = resolve;
    });
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let sent = 0;
    const a = new Readable({
      read() {
        if (sent < 18) {
          sent++;
          this.push(Buffer.alloc(MiB, "a"));
          return;
        }
        if (sent === 18) {
          sent++;
          reachedGate();
          void gate.then(() => {
            this.push(Buffer.alloc(MiB, "a"));
            this.push(null);
          });
        }
      },
    });
    const uploadA = store.uploadStream("racejob1234", "merged_results.out.gz", a);
    uploadA.catch(() => {});
    await gateReached;
    const bBytes = Buffer.alloc(19 * MiB, "b");
    await store.uploadStream("racejob1234", "merged_results.out.gz", Readable.from([bBytes]));
    openGate();
    const aResult = await uploadA.then(
      () => "ok",
      () => "failed",
    );
    const parts: Buffer[] = [];
    for await (const chunk of (await store.open("racejob1234", "merged_results.out.gz")) as Readable)
      parts.push(chunk as Buffer);
    const stored = Buffer.concat(parts);
    const allA = stored.length === 19 * MiB && stored.every((byte) => byte === 0x61);
    const allB = stored.equals(bBytes);
    expect(allA || allB).toBe(true);
    // An upload that reports success is the one stored.
    if (aResult === "ok") expect(allA).toBe(true);
  });
});
