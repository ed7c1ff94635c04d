import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJobApiApp } from "../../jobapi/app.js";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobService } from "../../jobapi/jobs/job-service.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { RunningAzurite } from "../../local/azurite.js";
import { blastVersion } from "../../shared/blast/blast-tools.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import { createLogger } from "../../shared/logging/logger.js";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";
import { demoQueries } from "../support/jobapi-client.js";
import { captureLogger, testAzurite } from "../support/service-fakes.js";
import { idleDispatcher } from "../support/idle-dispatcher.js";

const logger = createLogger({ level: "error" });
const MAX_QUEUED = 10;
let azurite: RunningAzurite;
let dir: string;
let app: ReturnType<typeof createJobApiApp>;
let jobs: JobStore;
let token: string;
/** A second job API over tables of its own, whose logs the test reads. */
let logged: { app: ReturnType<typeof createJobApiApp>; logger: ReturnType<typeof captureLogger> };

/**
 * A job API whose dispatcher never starts: every accepted job stays queued, as when the active
 * slots are all busy, so the queue limit is what a burst of submits meets.
 */
beforeAll(async () => {
  azurite = await testAzurite();
  dir = mkdtempSync(path.join(os.tmpdir(), "bp-hostile-"));
  const fasta = path.join(dir, "db.fa");
  writeFileSync(fasta, demoQueries(20, 800));
  const databasesDir = path.join(dir, "databases");
  await publishDatabase(databasesDir, { name: "hostiledemo", fastaPath: fasta, type: "nucl", partitions: 0 });
  const config = loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: azurite.connectionString, JOBAPI_DATA_DIR: dir });
  jobs = JobStore.fromConnectionString(azurite.connectionString, "hostile");
  await jobs.init();
  const artifacts = ArtifactStore.fromConnectionString(azurite.connectionString, "hostile");
  await artifacts.init();
  const catalog = createFileDatabaseCatalog(databasesDir);
  const tokens = new ApiTokenService(createFileSecretStore(path.join(dir, "secrets")));
  await tokens.ensure();
  token = (await tokens.state())?.current.value as string;
  const dispatcher = idleDispatcher({ jobs, artifacts, catalog, logger, nodeMemoryBytes: config.nodeMemoryBytes, dir });
  const service = new JobService({
    jobs,
    artifacts,
    catalog,
    dispatcher,
    logger,
    blastVersion,
    maxQueuedJobs: MAX_QUEUED,
    retryAfterSeconds: 5,
  });
  app = createJobApiApp({
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

  const captured = captureLogger();
  const loggedJobs = JobStore.fromConnectionString(azurite.connectionString, "hostilelog");
  await loggedJobs.init();
  const loggedDispatcher = idleDispatcher({
    jobs: loggedJobs,
    artifacts,
    catalog,
    logger: captured,
    nodeMemoryBytes: config.nodeMemoryBytes,
    dir,
  });
  const loggedService = new JobService({
    jobs: loggedJobs,
    artifacts,
    catalog,
    dispatcher: loggedDispatcher,
    logger: captured,
    blastVersion,
    maxQueuedJobs: MAX_QUEUED,
    retryAfterSeconds: 5,
  });
  logged = {
    logger: captured,
    app: createJobApiApp({
      config,
      service: loggedService,
      jobs: loggedJobs,
      artifacts,
      catalog,
      tokens,
      logger: captured,
      blastVersion,
      executorName: "none",
      activeJobs: () => 0,
      dispatchRole: () => "standby",
    }),
  };
});

afterAll(async () => {
  await azurite?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function submit(queryFasta: string): Promise<Response> {
  return Promise.resolve(
    app.request("/v1/jobs", {
      method: "POST",
      headers: { "X-SVC-API-Token": token, "Content-Type": "application/json" },
      body: JSON.stringify({ program: "blastn", db: "hostiledemo", query_fasta: queryFasta }),
    }),
  );
}

async function queuedCount(): Promise<number> {
  let n = 0;
  for await (const _ of jobs.list(["queued"])) n++;
  return n;
}

describe("hostile submits to the job API", () => {
  it("B-238 refuses a query whose header BLAST cannot write (non-ASCII) with 422 naming the record, and stores no job", async () => {
    const res = await submit(`>fine\nACGTACGTAC\n>caf\u00e9 \u{1F600}\nACGTACGTAC\n`);
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; msg: string }[]; request_id: string };
    expect(body.detail).toHaveLength(1);
    expect(body.detail[0]?.loc).toEqual(["body", "query_fasta", 1]);
    expect(body.detail[0]?.msg).toMatch(/^record 2 .* non-ASCII character U\+00E9/);
    expect(await queuedCount()).toBe(0);
  });

  it("logs an accepted job's id with the submit's request id, so a failure's raw diagnostics (logged by job id) lead back to the request", async () => {
    const requestId = "req-hostile-accepted-7";
    const res = await logged.app.request("/v1/jobs", {
      method: "POST",
      headers: { "X-SVC-API-Token": token, "Content-Type": "application/json", "X-Request-Id": requestId },
      body: JSON.stringify({ program: "blastn", db: "hostiledemo", query_fasta: ">q1\nACGTACGTACGTACGTACGT\n" }),
    });
    expect(res.status).toBe(202);
    const { job_id } = (await res.json()) as { job_id: string };
    expect(
      logged.logger.entries.find((e) => e.msg === "job accepted" && e.fields.job_id === job_id)?.fields.request_id,
    ).toBe(requestId);
  });

  it("B-239 B-240 admits never more than the queue limit, whatever arrives at once, and each 429 counts the queue exactly", async () => {
    const answers = await Promise.all(
      Array.from({ length: 4 * MAX_QUEUED }, (_, i) => submit(demoQueries(1, 200, i % 20))),
    );
    const accepted = answers.filter((r) => r.status === 202);
    const refused = answers.filter((r) => r.status === 429);
    expect(accepted.length + refused.length).toBe(answers.length);
    expect(accepted).toHaveLength(MAX_QUEUED);
    expect(await queuedCount()).toBe(MAX_QUEUED);
    for (const r of refused) {
      expect(r.headers.get("retry-after")).toBe("5");
      const body = (await r.json()) as { detail: string };
      expect(body.detail).toBe(`the queue is full (${MAX_QUEUED} jobs waiting); retry later`);
    }
    const positions = await Promise.all(
      accepted.map(async (r) => ((await r.json()) as { queue_position: number }).queue_position),
    );
    expect(new Set(positions).size).toBe(MAX_QUEUED);
  });
});
