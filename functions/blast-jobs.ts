import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { FASTA_LIMITS, parseQueryFasta } from "../shared/blast/fasta.js";
import { validateOptionsForProgram } from "../shared/blast/options.js";
import { type BlastProgram, queryMolecule } from "../shared/blast/programs.js";
import type { DashboardJob } from "../shared/dashboard/dashboard-jobs.js";
import { createJobApiClient } from "../shared/dashboard/job-api-client.js";
import { newOperationId, operationView } from "../shared/dashboard/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { dashboardJobListQuerySchema, dashboardJobPathSchema, dashboardResultsQuerySchema, dashboardSubmitSchema } from "../shared/dashboard/schemas.js";
import { DependencyFailedError, DependencyUnavailableError, InvalidRequestError, NotFoundError } from "../shared/errors.js";
import { parseJsonBody, parsePath, parseQuery } from "../shared/http/validation.js";
import { requestFingerprint } from "../shared/http/idempotency.js";
import { Orchestrations } from "../shared/ops/queue-labels.js";
import { appContext } from "./app-context.js";
import { dashboardJobs } from "./dashboard-deps.js";
import { callerOf, route } from "./http-route.js";
import { describeOperation } from "./operations.js";
import { CANCEL_EVENT } from "./orchestrations/submit-blast-job.js";

/** Dashboard jobs from the same caller and idempotency key share one UUID, so a retry returns the same job. */
function dashboardJobId(oid: string, idempotencyKey: string | undefined): string {
  if (!idempotencyKey) return crypto.randomUUID();
  const h = createHash("sha256").update(`${oid}\n${idempotencyKey}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${((Number.parseInt(h.slice(16, 18), 16) & 0x3f) | 0x80).toString(16)}${h.slice(18, 20)}-${h.slice(20, 32)}`;
}

function jobView(job: DashboardJob) {
  return {
    job_id: job.job_id,
    job_id_kind: "dashboard",
    openapi_job_id: job.openapi_job_id,
    status: job.status,
    title: job.title,
    program: job.program,
    db: job.db,
    execution_profile: job.execution_profile,
    priority: job.priority,
    options: job.blast_options,
    query_count: job.query_count,
    created_by: job.created_by,
    created_at: job.created_at,
    updated_at: job.updated_at,
    error: job.error,
    progress: job.progress,
    operation_status_url: `/api/operations/${job.operation_id}`,
  };
}

/** The §2.7 envelope: the job's fields plus job_id_kind, status, operation, target, admission, meta. */
function envelope(job: DashboardJob, requestId: string, operation: ReturnType<typeof operationView>) {
  return {
    ...jobView(job),
    operation,
    target: {
      resource_type: "blast_job",
      job_id_kind: "dashboard",
      dashboard_job_id: job.job_id,
      openapi_job_id: job.openapi_job_id,
    },
    admission: { decision: "accepted", reason: "validated and queued for submission to the job API" },
    meta: { request_id: requestId },
  };
}

route("blastJobsSubmit", { methods: ["POST"], route: "blast/jobs", role: "Contributor", durable: true }, async (request, scope) => {
  const caller = callerOf(scope);
  const body = await parseJsonBody(request, dashboardSubmitSchema, FASTA_LIMITS.maxBytes * 2);
  const program = body.program as BlastProgram;
  if (body.options) validateOptionsForProgram(program, body.options, "options");
  const records = parseQueryFasta(body.query_fasta, queryMolecule(program));
  const now = new Date().toISOString();
  const job: DashboardJob = {
    job_id: dashboardJobId(caller.oid, body.idempotency_key),
    openapi_job_id: null,
    operation_id: newOperationId(),
    status: "submitting",
    title: body.title ?? "",
    program,
    db: body.db,
    execution_profile: body.execution_profile ?? "standard",
    priority: body.priority ?? null,
    blast_options: (body.options ?? {}) as Record<string, unknown>,
    query_count: records.length,
    created_by: { oid: caller.oid, name: caller.name },
    created_at: now,
    updated_at: now,
    cancel_requested: false,
    error: "",
    progress: null,
    request_fingerprint: requestFingerprint({
      program,
      db: body.db,
      query_fasta: body.query_fasta,
      options: body.options ?? {},
      execution_profile: body.execution_profile ?? "standard",
      priority: body.priority ?? null,
    }),
  };
  const { job: stored, created } = await dashboardJobs().create(job, body.query_fasta);
  // A retry also starts the orchestration when the first attempt stored the job but stopped before
  // starting it (the operation id is the instance id, so it starts once).
  let existing = created ? undefined : await describeOperation(scope.durable(), stored.operation_id);
  if (!existing) {
    try {
      await scope.durable().startNew(Orchestrations.submitBlastJob, {
        instanceId: stored.operation_id,
        input: { dashboard_job_id: stored.job_id, poll_interval_seconds: appContext.config.jobPollIntervalSeconds },
      });
      scope.logger.info("dashboard job accepted", { dashboard_job_id: stored.job_id, operation_id: stored.operation_id, oid: caller.oid, resumed: !created });
    } catch (error) {
      // A concurrent retry started it first (the host refuses a second start of a running instance).
      existing = created ? undefined : await describeOperation(scope.durable(), stored.operation_id);
      if (!existing) throw error;
    }
  }
  // A new operation was enqueued just now: report `queued` (a snapshot), not a race with the first episode.
  const operation = existing ?? pendingOperation(stored);
  return jsonResult(200, {
    ...envelope(stored, scope.requestId, operation),
    operation_status_url: `/api/operations/${stored.operation_id}`,
  }, scope.requestId);
});

function pendingOperation(job: DashboardJob) {
  return operationView({
    operationId: job.operation_id,
    operationType: "blast.submit",
    state: "queued",
    createdAt: job.created_at,
    updatedAt: job.updated_at,
    pollAfterSeconds: appContext.config.jobPollIntervalSeconds,
    targetLink: `/api/blast/jobs/${job.job_id}`,
  });
}

route("listBlastJobs", { methods: ["GET"], route: "blast/jobs", role: "Reader" }, async (request, scope) => {
  const q = parseQuery(request, dashboardJobListQuerySchema);
  const { jobs, total } = await dashboardJobs().list({ status: q.status, page: q.page, pageSize: q.page_size });
  return jsonResult(200, { jobs: jobs.map(jobView), page: q.page, page_size: q.page_size, total, meta: { request_id: scope.requestId } }, scope.requestId);
});

async function requireJob(uuid: string): Promise<DashboardJob> {
  const job = await dashboardJobs().get(uuid);
  if (!job) throw new NotFoundError(`no dashboard job with id '${uuid}'`);
  return job;
}

route("getBlastJob", { methods: ["GET"], route: "blast/jobs/{uuid}", role: "Reader" }, async (request, scope) => {
  const { uuid } = parsePath(request, dashboardJobPathSchema);
  return jsonResult(200, { ...jobView(await requireJob(uuid)), meta: { request_id: scope.requestId } }, scope.requestId);
});

route("cancelBlastJob", { methods: ["DELETE"], route: "blast/jobs/{uuid}", role: "Contributor", durable: true }, async (request, scope) => {
  const { uuid } = parsePath(request, dashboardJobPathSchema);
  const job = await requireJob(uuid);
  const updated = await dashboardJobs().update(uuid, (j) => (["completed", "failed", "cancelled"].includes(j.status) ? undefined : { ...j, cancel_requested: true }));
  if (updated?.cancel_requested) {
    await scope
      .durable()
      .raiseEvent(job.operation_id, CANCEL_EVENT, { by: callerOf(scope).oid })
      .catch((error: unknown) => scope.logger.warn("cancel event not delivered; the poll will see the flag", { error }));
    scope.logger.info("dashboard job cancel requested", { dashboard_job_id: uuid, oid: callerOf(scope).oid });
  }
  await appContext.audit.record({
    actor: { oid: callerOf(scope).oid, name: callerOf(scope).name },
    action: "blast_job.cancel",
    target: `blast_job/${uuid}`,
    outcome: updated?.cancel_requested ? "succeeded" : "failed",
    request_id: scope.requestId,
    details: updated?.cancel_requested ? { operation_id: job.operation_id } : { reason: `job is already ${job.status}` },
  });
  const operation = (await describeOperation(scope.durable(), job.operation_id)) ?? pendingOperation(job);
  return jsonResult(200, { ...envelope(updated ?? job, scope.requestId, operation), operation_status_url: `/api/operations/${job.operation_id}` }, scope.requestId);
});

route("blastJobResults", { methods: ["GET"], route: "blast/jobs/{uuid}/results", role: "Reader" }, async (request, scope) => {
  const { uuid } = parsePath(request, dashboardJobPathSchema);
  const { content } = parseQuery(request, dashboardResultsQuerySchema);
  const job = await requireJob(uuid);
  if (!job.openapi_job_id) throw new NotFoundError("the job has not reached the job API yet; poll its operation");
  const client = createJobApiClient({
    baseUrl: appContext.config.jobApiUrl,
    token: async () => {
      const state = await appContext.apiTokens.state();
      if (!state) throw new DependencyUnavailableError("no job API token is configured");
      return state.current.value;
    },
    timeoutMs: appContext.config.jobApiTimeoutMs,
  });
  const upstream = await client.results(job.openapi_job_id, content).catch((error: unknown) => {
    throw new DependencyFailedError(`job API unreachable: ${error instanceof Error ? error.message : String(error)}`);
  });
  if (upstream.status !== 200 || !upstream.body) {
    const detail = ((await upstream.json().catch(() => ({}))) as { detail?: unknown }).detail;
    if (upstream.status === 404) throw new NotFoundError(typeof detail === "string" ? detail : "result not available yet");
    if (upstream.status === 400) throw new InvalidRequestError(typeof detail === "string" ? detail : "invalid request");
    throw new DependencyFailedError(`job API answered ${upstream.status}`);
  }
  const headers: Record<string, string> = { "X-Request-Id": scope.requestId };
  for (const name of ["content-type", "content-disposition"]) {
    const v = upstream.headers.get(name);
    if (v) headers[name] = v;
  }
  // Bytes stream through; no storage URL reaches the browser.
  return { status: 200, headers, body: Readable.fromWeb(upstream.body as import("node:stream/web").ReadableStream<Uint8Array>) as unknown as AsyncIterable<Uint8Array> };
});
