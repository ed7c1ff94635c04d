import { ContainerClient } from "@azure/storage-blob";
import { TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import type { Caller } from "../../shared/auth/roles.js";
import { dashboardJobId, legacyDashboardJobId } from "../../shared/dashboard/dashboard-job-id.js";
import {
  createDashboardJobService,
  type DashboardJobServiceDependencies,
} from "../../shared/dashboard/dashboard-job-service.js";
import { type DashboardJob, DashboardJobStore } from "../../shared/dashboard/dashboard-jobs.js";
import {
  createDownloadTicketStore,
  DOWNLOAD_TICKET_TABLE,
  DownloadTicketRefusedError,
} from "../../shared/dashboard/download-tickets.js";
import type { JobApiClient } from "../../shared/dashboard/job-api-client.js";
import type { DashboardSubmitRequest } from "../../shared/dashboard/schemas.js";
import { ConflictError, DependencyUnavailableError, NotFoundError, ValidationError } from "../../shared/errors.js";
import { requestFingerprint } from "../../shared/http/idempotency.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { CANCEL_EVENT, Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import {
  captureLogger,
  fakeJobApi,
  fakeOrchestrations,
  prefixedTables,
  testAzurite,
} from "../support/service-fakes.js";

let azurite: RunningAzurite;
let counter = 0;

beforeAll(async () => {
  azurite = await testAzurite();
});

afterAll(async () => {
  await azurite?.stop();
});

const caller: Caller = { oid: "oid-cora", name: "Cora", tenant_id: "tenant", roles: ["Contributor"] };
const QUERY = ">q1 a query\nACGTACGTACGTACGTACGTACGTACGTAC\n";

function request(overrides: Partial<DashboardSubmitRequest> = {}): DashboardSubmitRequest {
  return { program: "blastn", db: "16s_demo", query_fasta: QUERY, options: { evalue: 0.001 }, ...overrides };
}

/** A service over real stores on Azurite (tables and a container of their own) and a fake task hub and job API. */
function setup(jobApi: JobApiClient = fakeJobApi(), extra: Partial<DashboardJobServiceDependencies> = {}) {
  const prefix = `svc${++counter}x${Date.now().toString(36)}`;
  const queries = new ContainerClient(azurite.connectionString, `${prefix}-queries`);
  const jobs = new DashboardJobStore(
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}jobs`, { allowInsecureConnection: true }),
    queries,
  );
  const audit = createAuditLog(prefixedTables(azurite.connectionString, prefix));
  const hub = fakeOrchestrations();
  const logger = captureLogger();
  const dependencies: DashboardJobServiceDependencies = {
    jobs,
    orchestrations: hub.client,
    jobApi,
    audit,
    logger,
    pollIntervalSeconds: 7,
    ...extra,
  };
  return { service: createDashboardJobService(dependencies), jobs, queries, audit, hub, logger };
}

/** A dashboard job row as the code before version 8 ids stored it: under the legacy id, fingerprint and all. */
function legacyJob(key: string, fields: DashboardSubmitRequest, overrides: Partial<DashboardJob> = {}): DashboardJob {
  const now = new Date(Date.now() - 86_400_000).toISOString();
  return {
    job_id: legacyDashboardJobId(caller.oid, key),
    openapi_job_id: null,
    operation_id: `op-${"1".repeat(31)}${counter % 10}`,
    status: "submitting",
    title: "before the change",
    program: fields.program,
    db: fields.db,
    execution_profile: "standard",
    priority: null,
    blast_options: fields.options ?? {},
    query_count: 1,
    created_by: { oid: caller.oid, name: caller.name },
    created_at: now,
    updated_at: now,
    cancel_requested: false,
    error: "",
    progress: null,
    request_fingerprint: requestFingerprint({
      program: fields.program,
      db: fields.db,
      query_fasta: fields.query_fasta,
      options: fields.options ?? {},
      execution_profile: "standard",
      priority: null,
    }),
    ...overrides,
  };
}

describe("dashboard job service: submit", () => {
  it("B-007 records the job and its query, starts submitBlastJob under the operation id and answers a queued operation", async () => {
    const { service, jobs, hub } = setup();
    const { job, operation, created } = await service.submit(
      caller,
      request({ idempotency_key: "run-1", title: "16S" }),
    );
    expect(created).toBe(true);
    expect(job).toMatchObject({
      job_id: dashboardJobId(caller.oid, "run-1"),
      status: "submitting",
      title: "16S",
      query_count: 1,
      created_by: { oid: "oid-cora", name: "Cora" },
    });
    expect(await jobs.get(job.job_id)).toEqual(job);
    expect(await jobs.query(job.job_id)).toBe(QUERY);
    expect(hub.starts).toEqual([
      {
        name: Orchestrations.submitBlastJob,
        options: { instanceId: job.operation_id, input: { dashboard_job_id: job.job_id, poll_interval_seconds: 7 } },
      },
    ]);
    expect(operation).toMatchObject({
      operation_id: job.operation_id,
      operation_type: "blast.submit",
      state: "queued",
      poll_after_seconds: 7,
    });
  });

  it("B-026 refuses a search while the cluster is stopped, saying so, and records nothing; once it runs the search is accepted", async () => {
    let power = "Stopped";
    const { service, hub } = setup(fakeJobApi(), {
      clusterPower: async () => ({ cluster_name: "aks-blast", power_state: power }),
    });
    const refused = await service.submit(caller, request({ idempotency_key: "b026" })).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DependencyUnavailableError);
    expect((refused as Error).message).toBe(
      "the cluster 'aks-blast' is stopped, so no search can run: start it on the Cluster page (POST /api/aks/cluster/start), then submit again",
    );
    expect(hub.starts).toHaveLength(0);
    expect((await service.list({ page: 1, pageSize: 10 })).total).toBe(0);

    power = "Running";
    const accepted = await service.submit(caller, request({ idempotency_key: "b026" }));
    expect(accepted.created).toBe(true);
    expect(hub.starts).toHaveLength(1);
  });

  it("B-021 answers the same job to a keyed retry and starts nothing while its orchestration exists", async () => {
    const { service, hub } = setup();
    const first = await service.submit(caller, request({ idempotency_key: "run-2" }));
    hub.put({
      name: Orchestrations.submitBlastJob,
      instanceId: first.job.operation_id,
      runtimeStatus: "Running",
      input: { dashboard_job_id: first.job.job_id },
    });
    const retry = await service.submit(caller, request({ idempotency_key: "run-2", title: "another title" }));
    expect(retry.created).toBe(false);
    expect(retry.job).toEqual(first.job);
    expect(retry.operation).toMatchObject({ operation_id: first.job.operation_id, state: "running" });
    expect(hub.starts).toHaveLength(1);
  });

  it("starts the orchestration on a retry when the first attempt stored the job but never started it", async () => {
    const { service, hub } = setup();
    const first = await service.submit(caller, request({ idempotency_key: "run-3" }));
    hub.instances.clear();
    const retry = await service.submit(caller, request({ idempotency_key: "run-3" }));
    expect(retry.job.job_id).toBe(first.job.job_id);
    expect(hub.starts.map((start) => start.options?.instanceId)).toEqual([
      first.job.operation_id,
      first.job.operation_id,
    ]);
  });

  it("answers the operation a concurrent request started when its own start is refused", async () => {
    const { service, hub } = setup();
    // The other request's start lands first: this one's is refused as a second start.
    hub.hooks.beforeStart = (name, instanceId) => {
      hub.hooks.beforeStart = undefined;
      hub.put({ name, instanceId, runtimeStatus: "Running", input: { dashboard_job_id: "x" } });
    };
    const { job, operation } = await service.submit(caller, request({ idempotency_key: "run-4" }));
    expect(operation).toMatchObject({ operation_id: job.operation_id, state: "running" });
    expect(hub.starts).toEqual([]);
  });

  it("refuses another search under a used key with a ConflictError and keeps the first", async () => {
    const { service, jobs } = setup();
    const first = await service.submit(caller, request({ idempotency_key: "run-5" }));
    await expect(
      service.submit(caller, request({ idempotency_key: "run-5", query_fasta: ">q2\nACGTTTTTTTTTTT\n" })),
    ).rejects.toBeInstanceOf(ConflictError);
    expect(await jobs.query(first.job.job_id)).toBe(QUERY);
    expect(await jobs.get(first.job.job_id)).toEqual(first.job);
  });

  it("refuses options that do not apply to the program and a FASTA of the wrong molecule before storing anything", async () => {
    const { service, jobs, hub } = setup();
    const options = await service
      .submit(caller, request({ options: { matrix: "BLOSUM62" } }))
      .catch((error: unknown) => error);
    expect(options).toBeInstanceOf(ValidationError);
    expect((options as ValidationError).issues[0]?.loc).toEqual(["body", "options", "matrix"]);
    await expect(
      service.submit(caller, request({ program: "blastn", query_fasta: ">p\nMKLVWQQERTYPLKM\n" })),
    ).rejects.toBeInstanceOf(ValidationError);
    expect((await jobs.list({ page: 1, pageSize: 10 })).total).toBe(0);
    expect(hub.starts).toEqual([]);
  });
});

describe("dashboard job service: jobs created before version 8 ids", () => {
  it("B-021 finds a job stored under the legacy id: returns it, stores nothing under the version 8 id and starts nothing new", async () => {
    const { service, jobs, hub } = setup();
    const fields = request({ idempotency_key: "old-run" });
    const legacy = legacyJob("old-run", fields);
    await jobs.create(legacy, QUERY);
    hub.put({
      name: Orchestrations.submitBlastJob,
      instanceId: legacy.operation_id,
      runtimeStatus: "Running",
      input: { dashboard_job_id: legacy.job_id },
    });

    const { job, operation, created } = await service.submit(caller, fields);
    expect(created).toBe(false);
    expect(job).toEqual(legacy);
    expect(operation).toMatchObject({
      operation_id: legacy.operation_id,
      state: "running",
      target: { dashboard_job_id: legacy.job_id },
    });
    expect(await jobs.get(dashboardJobId(caller.oid, "old-run"))).toBeUndefined();
    expect((await jobs.list({ page: 1, pageSize: 10 })).total).toBe(1);
    expect(hub.starts).toEqual([]);
  });

  it("starts a legacy job's orchestration when it never started, and stores its query if the first attempt had not", async () => {
    const { service, jobs, queries, hub } = setup();
    const fields = request({ idempotency_key: "old-unstarted" });
    const legacy = legacyJob("old-unstarted", fields);
    // What a first attempt that stopped right after writing the row leaves: no query, no instance.
    await jobs.create(legacy, QUERY);
    await queries.deleteBlob(`${legacy.job_id}.fa`);
    const { job } = await service.submit(caller, fields);
    expect(job.job_id).toBe(legacy.job_id);
    expect(hub.starts).toEqual([
      {
        name: Orchestrations.submitBlastJob,
        options: {
          instanceId: legacy.operation_id,
          input: { dashboard_job_id: legacy.job_id, poll_interval_seconds: 7 },
        },
      },
    ]);
    expect(await jobs.query(legacy.job_id)).toBe(QUERY);
  });

  it("refuses another search under the key of a legacy job with a ConflictError", async () => {
    const { service, jobs, hub } = setup();
    const fields = request({ idempotency_key: "old-conflict" });
    await jobs.create(legacyJob("old-conflict", fields), QUERY);
    await expect(service.submit(caller, { ...fields, db: "other_db" })).rejects.toBeInstanceOf(ConflictError);
    expect(await jobs.get(dashboardJobId(caller.oid, "old-conflict"))).toBeUndefined();
    expect(hub.starts).toEqual([]);
  });

  it("does not look at legacy ids for another caller's key", async () => {
    const { service, jobs } = setup();
    const fields = request({ idempotency_key: "shared-key" });
    await jobs.create(legacyJob("shared-key", fields), QUERY);
    const other: Caller = { ...caller, oid: "oid-someone-else" };
    const { job, created } = await service.submit(other, fields);
    expect(created).toBe(true);
    expect(job.job_id).toBe(dashboardJobId(other.oid, "shared-key"));
  });
});

describe("dashboard job service: read, cancel, results", () => {
  it("answers a NotFoundError for an unknown job", async () => {
    const { service } = setup();
    await expect(service.get(crypto.randomUUID())).rejects.toBeInstanceOf(NotFoundError);
  });

  it("B-014 raises the cancel event on the job's orchestration, flags the job and audits who asked", async () => {
    const { service, jobs, hub, audit } = setup();
    const { job } = await service.submit(caller, request());
    const cancelled = await service.cancel(caller, job.job_id, { requestId: "req-cancel-1" });
    expect(hub.events).toEqual([
      { instanceId: job.operation_id, eventName: CANCEL_EVENT, eventData: { by: caller.oid } },
    ]);
    expect(cancelled.job.cancel_requested).toBe(true);
    expect((await jobs.get(job.job_id))?.cancel_requested).toBe(true);
    expect(cancelled.operation).toMatchObject({ operation_id: job.operation_id, state: "queued" });
    const [entry] = await audit.list({ action: "blast_job.cancel" });
    expect(entry).toMatchObject({
      actor: { oid: caller.oid, name: "Cora" },
      target: `blast_job/${job.job_id}`,
      outcome: "succeeded",
      request_id: "req-cancel-1",
      details: { operation_id: job.operation_id },
    });
  });

  it("changes nothing on a job that has ended, and audits the refusal with the job's state", async () => {
    const { service, jobs, hub, audit } = setup();
    const { job } = await service.submit(caller, request());
    await jobs.update(job.job_id, (current) => ({ ...current, status: "completed" }));
    const answer = await service.cancel(caller, job.job_id, { requestId: "req-cancel-2" });
    expect(answer.job).toMatchObject({ status: "completed", cancel_requested: false });
    expect(hub.events).toEqual([]);
    const [entry] = await audit.list({ action: "blast_job.cancel" });
    expect(entry).toMatchObject({
      outcome: "failed",
      request_id: "req-cancel-2",
      details: { reason: "job is already completed" },
    });
  });

  it("still flags the job when the cancel event cannot be delivered (the next poll sees the flag)", async () => {
    const { service, jobs, hub, logger } = setup();
    const { job } = await service.submit(caller, request());
    hub.hooks.raiseEventError = new Error("task hub unreachable");
    await service.cancel(caller, job.job_id, { requestId: "req-cancel-3" });
    expect((await jobs.get(job.job_id))?.cancel_requested).toBe(true);
    expect(logger.entries).toContainEqual(
      expect.objectContaining({ level: "warn", msg: "cancel event not delivered; the poll will see the flag" }),
    );
  });

  it("opens results at the job API under the job's OpenAPI id, and is NotFound before the job reached it", async () => {
    const body = new Blob(["<BlastOutput/>"]).stream();
    const jobApi = fakeJobApi({
      openResults: async () => ({ body, contentType: "application/xml", contentDisposition: undefined }),
    });
    const { service, jobs } = setup(jobApi);
    const { job } = await service.submit(caller, request());
    await expect(service.openResults(job.job_id, "xml")).rejects.toThrow(/not reached the job API/);
    expect(jobApi.calls).toEqual([]);
    await jobs.update(job.job_id, (current) => ({ ...current, openapi_job_id: "abcdefghijkl", status: "completed" }));
    const results = await service.openResults(job.job_id, "tabular");
    expect(jobApi.calls).toEqual([{ method: "openResults", args: ["abcdefghijkl", "tabular", undefined] }]);
    expect(await new Response(results.body).text()).toBe("<BlastOutput/>");
  });

  it("issue 23 item 9: names every download <title or job>-<kind>.<ext>, whatever the job API calls its ZIPs", async () => {
    const jobApi = fakeJobApi({
      openResults: async () => ({
        body: new Blob(["PK"]).stream(),
        contentType: "application/zip",
        contentDisposition: 'attachment; filename="abcdefghijkl_merged.zip"',
      }),
    });
    const { service, jobs } = setup(jobApi);
    const { job: titled } = await service.submit(
      caller,
      request({ title: '16S run #1: Müller / "x"', idempotency_key: "t1" }),
    );
    const { job: untitled } = await service.submit(caller, request({ idempotency_key: "t2" }));
    for (const job of [titled, untitled])
      await jobs.update(job.job_id, (current) => ({ ...current, openapi_job_id: "abcdefghijkl", status: "completed" }));
    const names = async (jobId: string) =>
      Promise.all(
        (["xml", "tabular", "merged", "full"] as const).map(
          async (content) => (await service.openResults(jobId, content)).fileName,
        ),
      );
    expect(await names(titled.job_id)).toEqual([
      "16S-run-1-Muller-x-results.xml",
      "16S-run-1-Muller-x-hits.tsv",
      "16S-run-1-Muller-x-merged.zip",
      "16S-run-1-Muller-x-shards.zip",
    ]);
    expect(await names(untitled.job_id)).toEqual(
      ["results.xml", "hits.tsv", "merged.zip", "shards.zip"].map((kind) => `${untitled.job_id}-${kind}`),
    );
  });

  it("issue 23 item 8: keeps when the job first reached each status, so a reloaded job page shows every step's time", async () => {
    const { service, jobs } = setup();
    const { job } = await service.submit(caller, request());
    expect(job.status_times).toEqual({ submitting: job.created_at });
    const queued = await jobs.update(job.job_id, (current) => ({ ...current, status: "queued" }));
    const running = await jobs.update(job.job_id, (current) => ({ ...current, status: "running" }));
    // A change that keeps the status (progress) and a status seen again keep the first times.
    await jobs.update(job.job_id, (current) => ({
      ...current,
      progress: { total: 2, succeeded: 1, failed: 0, active: 1 },
    }));
    await jobs.update(job.job_id, (current) => ({ ...current, status: "queued" }));
    const done = await jobs.update(job.job_id, (current) => ({ ...current, status: "completed" }));
    expect((await jobs.get(job.job_id))?.status_times).toEqual({
      submitting: job.created_at,
      queued: queued?.updated_at,
      running: running?.updated_at,
      completed: done?.updated_at,
    });
  });

  it("issue 23: asks the job API for result pages under the job's OpenAPI id (summaries, a query's hits, a hit)", async () => {
    const jobApi = fakeJobApi({ resultPage: async () => ({ total: 0 }) });
    const { service, jobs } = setup(jobApi);
    const { job } = await service.submit(caller, request());
    await expect(service.resultPage(job.job_id, {})).rejects.toThrow(/not reached the job API/);
    await jobs.update(job.job_id, (current) => ({ ...current, openapi_job_id: "abcdefghijkl", status: "completed" }));
    await service.resultPage(job.job_id, {}, { offset: 100, limit: 50 });
    await service.resultPage(job.job_id, { n: 40 }, { limit: 10 });
    await service.resultPage(job.job_id, { n: 40, k: 2 }, { limit: 10 });
    expect(jobApi.calls).toEqual([
      { method: "resultPage", args: ["abcdefghijkl", "", { offset: 100, limit: 50 }, undefined] },
      { method: "resultPage", args: ["abcdefghijkl", "/40/hits", { limit: 10 }, undefined] },
      { method: "resultPage", args: ["abcdefghijkl", "/40/hits/2", {}, undefined] },
    ]);
  });
});

describe("results download tickets (issue 23: a streamed download without the bearer token in a URL)", () => {
  it("a ticket opens one download of the job and content it was issued for, once, within its time; only its digest is stored", async () => {
    let clock = new Date("2026-11-27T10:00:00.000Z");
    const prefix = `dl${++counter}x${Date.now().toString(36)}`;
    const tables = (name: string) =>
      TableClient.fromConnectionString(azurite.connectionString, `${prefix}${name}`, { allowInsecureConnection: true });
    const store = createDownloadTicketStore(tables, { now: () => clock });
    const job = "0b5c8f7e-1111-4222-8333-444455556666";
    const issued = await store.issue("oid-reader", job, "xml");
    expect(issued.ticket).toMatch(/^bpdt_[A-Za-z0-9_-]{43}$/);
    expect(issued.expires_at).toBe("2026-11-27T10:01:00.000Z");
    const refusal = (ticket: string | undefined, jobId = job, content: "xml" | "tabular" = "xml") =>
      store.redeem(ticket, jobId, content).then(
        () => "accepted",
        (error: unknown) => (error instanceof DownloadTicketRefusedError ? error.reason : String(error)),
      );
    // Another content or job burns it, as a ticket seen where it does not belong should be.
    const other = await store.issue("oid-reader", job, "xml");
    expect(await refusal(other.ticket, job, "tabular")).toBe("wrong_download");
    expect(await refusal(other.ticket)).toBe("used");
    expect(await store.redeem(issued.ticket, job, "xml")).toEqual({ oid: "oid-reader" });
    expect(await refusal(issued.ticket)).toBe("used");
    expect(await refusal(undefined)).toBe("missing");
    expect(await refusal(`bptt_${"A".repeat(43)}`)).toBe("malformed");
    expect(await refusal(`bpdt_${"A".repeat(43)}`)).toBe("unknown");
    const late = await store.issue("oid-reader", job, "xml");
    clock = new Date(clock.getTime() + 61_000);
    expect(await refusal(late.ticket)).toBe("expired");
    // The table holds digests, never a ticket.
    const rows = [];
    for await (const row of tables(DOWNLOAD_TICKET_TABLE).listEntities()) rows.push(JSON.stringify(row));
    expect(rows).toHaveLength(3);
    for (const ticket of [issued.ticket, other.ticket, late.ticket])
      expect(rows.some((row) => row.includes(ticket.slice(5)))).toBe(false);
  });
});
