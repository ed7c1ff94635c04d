import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactStore, MERGED_ARTIFACT } from "../../jobapi/jobs/artifact-store.js";
import { checkJobConsistency } from "../../jobapi/jobs/consistency-check.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { RunningAzurite } from "../../local/azurite.js";
import { checkStackConsistency } from "../../local/consistency-check.js";
import { EventType } from "../../local/durable/history.js";
import { DurableStore } from "../../local/durable/store.js";
import { type DashboardJob, DashboardJobStore } from "../../shared/dashboard/dashboard-jobs.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import { openBlobContainer } from "../../shared/storage/blob-container.js";
import { jobRecordFixture } from "../support/helpers.js";
import { DEMO_DB, demoQueries } from "../support/jobapi-client.js";
import { captureLogger, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let dbRoot: string;
let demoVersion: string;

beforeAll(async () => {
  azurite = await testAzurite();
  dbRoot = mkdtempSync(path.join(tmpdir(), "bp-consistency-db-"));
  const fasta = path.join(dbRoot, "q.fa");
  writeFileSync(fasta, demoQueries(4, 600));
  demoVersion = (await publishDatabase(dbRoot, { name: DEMO_DB, fastaPath: fasta, type: "nucl", partitions: 0 }))
    .manifest.version;
}, 60_000);

afterAll(async () => {
  await azurite?.stop();
  rmSync(dbRoot, { recursive: true, force: true });
});

const job = (overrides: Partial<JobRecord> = {}) =>
  jobRecordFixture({ db_name: DEMO_DB, db_version: demoVersion, ...overrides });

describe("start-up consistency check of the job API (issue 15 item 2)", () => {
  it("fails, with a reason, each job whose query, results or database release storage no longer has, and leaves the rest alone", async () => {
    const options = { allowInsecureConnection: true };
    const jobs = new JobStore(
      TableClient.fromConnectionString(azurite.connectionString, "ccjobs", options),
      TableClient.fromConnectionString(azurite.connectionString, "ccidempotency", options),
    );
    const artifacts = ArtifactStore.fromConnectionString(azurite.connectionString, "cc-artifacts");
    await Promise.all([jobs.init(), artifacts.init()]);

    const healthyQueued = job();
    const queryLost = job();
    const releaseGone = job({ db_version: "2020-01-01-00-00-00" });
    const healthyDone = job({ status: "completed" });
    const resultsLost = job({ status: "completed" });
    const cancelled = job({ status: "cancelled" });
    for (const j of [healthyQueued, releaseGone, healthyDone, resultsLost])
      await artifacts.putText(j.job_id, "query.fa", ">q\nACGT\n");
    await artifacts.putText(healthyDone.job_id, MERGED_ARTIFACT, "results");
    for (const j of [healthyQueued, queryLost, releaseGone, healthyDone, resultsLost, cancelled]) await jobs.create(j);

    const logger = captureLogger();
    const report = await checkJobConsistency({ jobs, artifacts, catalog: createFileDatabaseCatalog(dbRoot), logger });
    expect(report.checked).toBe(6);
    expect(report.failed.map((f) => f.job_id).sort()).toEqual(
      [queryLost.job_id, releaseGone.job_id, resultsLost.job_id].sort(),
    );

    const stored = async (j: JobRecord) => (await jobs.get(j.job_id)) as JobRecord;
    expect(await stored(queryLost)).toMatchObject({
      status: "failed",
      error: expect.stringContaining("its query is missing from storage"),
    });
    expect(await stored(releaseGone)).toMatchObject({
      status: "failed",
      error: expect.stringContaining(`${DEMO_DB} 2020-01-01-00-00-00`),
    });
    expect(await stored(resultsLost)).toMatchObject({
      status: "failed",
      error: expect.stringContaining("its results are missing"),
    });
    expect((await stored(queryLost)).completed_at).not.toBe("");
    expect((await stored(healthyQueued)).status).toBe("queued");
    expect((await stored(healthyDone)).status).toBe("completed");
    expect((await stored(cancelled)).status).toBe("cancelled");
    expect(logger.entries.filter((e) => e.msg === "job failed by the start-up consistency check")).toHaveLength(3);

    // A second start finds nothing more to do.
    expect(
      (
        await checkJobConsistency({
          jobs,
          artifacts,
          catalog: createFileDatabaseCatalog(dbRoot),
          logger: createLogger({ level: "error" }),
        })
      ).failed,
    ).toEqual([]);
  });
});

describe("start-up consistency check of the local stack (issue 15 item 2)", () => {
  it("starts an orchestration whose start message was lost and fails a dashboard job whose orchestration was never created", async () => {
    const store = DurableStore.fromConnectionString(azurite.connectionString, "cchub");
    await store.init();
    const now = new Date().toISOString();
    const instance = (id: string, historyLength: number) => ({
      instanceId: id,
      name: "submitBlastJob",
      status: "Pending" as const,
      input: JSON.stringify({ dashboard_job_id: id }),
      output: "null",
      customStatus: "null",
      createdTime: now,
      lastUpdatedTime: now,
      historyLength,
      parentInstanceId: "",
      parentTaskId: -1,
      executionId: `exec-${id}`,
      appliedMessages: [],
    });
    await store.putInstance(instance("op-unstarted", 0));
    await store.putInstance(instance("op-started", 0));
    await store.enqueue("op-started", {
      EventType: EventType.ExecutionStarted,
      EventId: -1,
      IsPlayed: false,
      Timestamp: now,
      Name: "submitBlastJob",
      Input: "{}",
      _executionId: "exec-op-started",
    });

    const dashboardJobs = new DashboardJobStore(
      TableClient.fromConnectionString(azurite.connectionString, "ccdashboardjobs", { allowInsecureConnection: true }),
      openBlobContainer(azurite.connectionString, "cc-dashboard-queries"),
    );
    const dashboardJob = (jobId: string, operationId: string, status = "submitting"): DashboardJob => ({
      job_id: jobId,
      openapi_job_id: null,
      operation_id: operationId,
      status,
      title: "",
      program: "blastn",
      db: DEMO_DB,
      execution_profile: "standard",
      priority: null,
      blast_options: {},
      query_count: 1,
      created_by: { oid: "o", name: "n" },
      created_at: now,
      updated_at: now,
      cancel_requested: false,
      error: "",
      progress: null,
    });
    await dashboardJobs.create(dashboardJob("d-orphan", "op-never-created"), ">q\nACGT\n");
    await dashboardJobs.create(dashboardJob("d-running", "op-started"), ">q\nACGT\n");
    await dashboardJobs.create(dashboardJob("d-done", "op-purged", "completed"), ">q\nACGT\n");

    const report = await checkStackConsistency({ store, dashboardJobs, logger: createLogger({ level: "error" }) });
    expect(report).toEqual({ restarted_instances: ["op-unstarted"], failed_dashboard_jobs: ["d-orphan"] });

    const inbox = await store.getInbox("op-unstarted");
    expect(inbox.map((m) => m.event)).toEqual([
      expect.objectContaining({
        EventType: EventType.ExecutionStarted,
        Name: "submitBlastJob",
        Input: JSON.stringify({ dashboard_job_id: "op-unstarted" }),
        _executionId: "exec-op-unstarted",
      }),
    ]);
    expect(await store.getInbox("op-started")).toHaveLength(1);
    expect(await dashboardJobs.get("d-orphan")).toMatchObject({
      status: "failed",
      error: expect.stringContaining("before this submit was acknowledged"),
    });
    expect((await dashboardJobs.get("d-running"))?.status).toBe("submitting");
    expect((await dashboardJobs.get("d-done"))?.status).toBe("completed");

    // Idempotent: the next start repairs nothing again.
    expect(await checkStackConsistency({ store, dashboardJobs, logger: createLogger({ level: "error" }) })).toEqual({
      restarted_instances: [],
      failed_dashboard_jobs: [],
    });
  });
});
