import { TableClient } from "@azure/data-tables";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { type DashboardJob, DashboardJobStore } from "../../shared/dashboard/dashboard-jobs.js";
import type { JobApiClient } from "../../shared/dashboard/job-api-client.js";
import {
  createCancelJobActivity,
  createPollJobApiActivity,
  createSubmitToJobApiActivity,
} from "../../shared/dashboard/submit-activities.js";
import { DependencyUnavailableError, NotFoundError, QueueFullError, ValidationError } from "../../shared/errors.js";
import { createEventLog } from "../../shared/ops/events.js";
import { captureLogger, fakeJobApi, prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let counter = 0;

beforeAll(async () => {
  azurite = await testAzurite();
});

afterAll(async () => {
  await azurite?.stop();
});

/** The submit activities over a real job store on Azurite, with a stored job, and the given job-API client. */
async function setup(jobApi: JobApiClient) {
  const prefix = `act${++counter}x${Date.now().toString(36)}`;
  const jobs = new DashboardJobStore(
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}jobs`, { allowInsecureConnection: true }),
    new ContainerClient(azurite.connectionString, `${prefix}-queries`),
  );
  const now = new Date().toISOString();
  const job: DashboardJob = {
    job_id: crypto.randomUUID(),
    openapi_job_id: null,
    operation_id: `op-${"a".repeat(32)}`,
    status: "submitting",
    title: "",
    program: "blastn",
    db: "16s_demo",
    execution_profile: "standard",
    priority: null,
    blast_options: {},
    query_count: 1,
    created_by: { oid: "oid", name: "" },
    created_at: now,
    updated_at: now,
    cancel_requested: false,
    error: "",
    progress: null,
  };
  await jobs.create(job, ">q\nACGT\n");
  const dependencies = {
    jobs,
    jobApi,
    logger: captureLogger(),
    events: createEventLog(prefixedTables(azurite.connectionString, prefix)),
  };
  return { jobs, job, dependencies };
}

describe("submit activities over the job-API client's domain errors", () => {
  it("turns a full queue or an unavailable job API into a retry after its Retry-After (5 s when none is given)", async () => {
    const busy = await setup(
      fakeJobApi({ submit: () => Promise.reject(new QueueFullError("job API answered 429: queue is full", 17)) }),
    );
    expect(await createSubmitToJobApiActivity(busy.dependencies)({ dashboard_job_id: busy.job.job_id })).toEqual({
      kind: "retry",
      after_seconds: 17,
      reason: "job API answered 429: queue is full",
    });
    const down = await setup(
      fakeJobApi({ submit: () => Promise.reject(new DependencyUnavailableError("job API unreachable: ECONNREFUSED")) }),
    );
    expect(await createSubmitToJobApiActivity(down.dependencies)({ dashboard_job_id: down.job.job_id })).toMatchObject({
      kind: "retry",
      after_seconds: 5,
    });
    expect(await down.jobs.get(down.job.job_id)).toMatchObject({ status: "submitting", openapi_job_id: null });
  });

  it("turns a refusal into a rejection with the job API's words (field issues as 'loc: msg') and its field issues kept structured", async () => {
    const issues = [{ loc: ["body", "db"], msg: "database 'x' does not exist", type: "value_error" }];
    const invalid = await setup(fakeJobApi({ submit: () => Promise.reject(new ValidationError(issues)) }));
    expect(await createSubmitToJobApiActivity(invalid.dependencies)({ dashboard_job_id: invalid.job.job_id })).toEqual({
      kind: "rejected",
      detail: "body.db: database 'x' does not exist",
      issues,
    });
  });

  it("links the job-API job on acceptance and submits under the dashboard job's idempotency key", async () => {
    const jobApi = fakeJobApi({ submit: async () => ({ job_id: "abcdefghijkl", status: "queued", replayed: false }) });
    const { jobs, job, dependencies } = await setup(jobApi);
    expect(await createSubmitToJobApiActivity(dependencies)({ dashboard_job_id: job.job_id })).toEqual({
      kind: "accepted",
      job_id: "abcdefghijkl",
      status: "queued",
      replayed: false,
    });
    expect(jobApi.calls[0]?.args[0]).toMatchObject({
      program: "blastn",
      db: "16s_demo",
      query_fasta: ">q\nACGT\n",
      idempotency_key: `dashboard-${job.job_id}`,
    });
    expect(await jobs.get(job.job_id)).toMatchObject({ openapi_job_id: "abcdefghijkl", status: "queued" });
  });

  it("keeps polling while the job API cannot tell, and cancels locally when it no longer has the job", async () => {
    const jobApi = fakeJobApi({
      getStatus: () => Promise.reject(new DependencyUnavailableError("job API answered 503")),
      cancel: () => Promise.reject(new NotFoundError("no job with id 'abcdefghijkl'")),
    });
    const { jobs, job, dependencies } = await setup(jobApi);
    expect(
      await createPollJobApiActivity(dependencies)({ dashboard_job_id: job.job_id, openapi_job_id: "abcdefghijkl" }),
    ).toEqual({
      status: "submitting",
      terminal: false,
      cancel_requested: false,
      error: "",
    });
    expect(
      await createCancelJobActivity(dependencies)({ dashboard_job_id: job.job_id, openapi_job_id: "abcdefghijkl" }),
    ).toEqual({ status: "cancelled" });
    expect((await jobs.get(job.job_id))?.status).toBe("cancelled");
  });

  it("issue 23: keeps the job API's storing progress on the dashboard job while the results are stored, and clears it once completed", async () => {
    const storing = {
      xml_bytes: 1_200_000,
      xml_bytes_total: 3_300_000,
      total_is_estimate: false,
      started_at: "2026-11-27T18:00:00.000Z",
    };
    const answers = [
      { status: "running", storing, result_bytes: null },
      { status: "completed", storing: null, result_bytes: { xml: 3_300_000, gzip: 310_000 } },
    ];
    const jobApi = fakeJobApi({
      getStatus: async (jobId: string) => ({
        job_id: jobId,
        error: "",
        queue_position: null,
        kubernetes: { summary: { total: 1, succeeded: 0, failed: 0, active: 1 } },
        ...(answers.shift() ?? { status: "completed" }),
      }),
    });
    const { jobs, job, dependencies } = await setup(jobApi);
    const poll = createPollJobApiActivity(dependencies);
    await poll({ dashboard_job_id: job.job_id, openapi_job_id: "abcdefghijkl" });
    expect(await jobs.get(job.job_id)).toMatchObject({ status: "running", storing });
    await poll({ dashboard_job_id: job.job_id, openapi_job_id: "abcdefghijkl" });
    expect(await jobs.get(job.job_id)).toMatchObject({
      status: "completed",
      storing: null,
      result_bytes: { xml: 3_300_000, gzip: 310_000 },
    });
  });
});
