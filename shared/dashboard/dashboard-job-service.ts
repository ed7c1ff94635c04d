import type { Caller } from "../auth/roles.js";
import { parseQueryFasta } from "../blast/fasta.js";
import { validateOptionsForProgram } from "../blast/options.js";
import { queryMolecule } from "../blast/programs.js";
import type { DatabaseCatalog } from "../databases/catalog-types.js";
import { requireDatabaseFit } from "../databases/database-fit.js";
import { DependencyUnavailableError, NotFoundError } from "../errors.js";
import { requestFingerprint } from "../http/idempotency.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import { describeOperation, newOperationId, type OperationView, operationView } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { CANCEL_EVENT, Orchestrations } from "../orchestrations/queue-labels.js";
import { dashboardJobId, legacyDashboardJobId } from "./dashboard-job-id.js";
import { type DashboardJob, type DashboardJobStore, TERMINAL_JOB_STATES } from "./dashboard-jobs.js";
import type { JobApiCallOptions, JobApiClient, JobApiResults } from "./job-api-client.js";
import type { DashboardSubmitRequest } from "./schemas.js";
import { type ResultFileKind, resultFileName } from "./result-file-names.js";

/** What the dashboard job service is built from. */
export interface DashboardJobServiceDependencies {
  /** The dashboard jobs table and their queries. */
  jobs: DashboardJobStore;
  /** The durable client port: starts and signals `submitBlastJob`, reads operations. */
  orchestrations: OrchestrationClient;
  /** The one job-API client. */
  jobApi: JobApiClient;
  audit: Pick<AuditLog, "record">;
  /** The request's logger. */
  logger: Logger;
  /** How often the submit orchestration polls the job API; a queued operation's `poll_after_seconds`. */
  pollIntervalSeconds: number;
  /**
   * The job API's database catalog, when this process can read it: a submit for a database the
   * job API does not know (or cannot search with the program) is then refused with 422 at once.
   */
  databases?: Pick<DatabaseCatalog, "get">;
  /**
   * The cluster's power state as Resource Manager reports it, when this process can read it
   * (undefined: unknown, and the submit goes on). A stopped cluster runs no search (B-026).
   */
  clusterPower?: () => Promise<{ cluster_name: string; power_state: string | null } | undefined>;
}

/** A dashboard job with the operation that carries it out. */
export interface DashboardJobWithOperation {
  job: DashboardJob;
  operation: OperationView;
}

/** Options of the service's privileged acts: the request they are audited under. */
export interface DashboardActOptions {
  requestId: string;
}

/** Options of {@link DashboardJobService.list}; `page` is 1-based. */
export interface ListDashboardJobsOptions {
  status?: string;
  page: number;
  pageSize: number;
}

/** The input of the submit orchestration. */
export interface SubmitBlastJobInput {
  dashboard_job_id: string;
  openapi_job_id?: string;
  poll_interval_seconds: number;
}

/**
 * The dashboard's BLAST jobs: submit (validate, record the job, start or resume its
 * orchestration), list, read, cancel and download results through the job API. Domain values
 * and domain errors only; the routes render them.
 */
export function createDashboardJobService(dependencies: DashboardJobServiceDependencies) {
  const { jobs, orchestrations, jobApi, audit, logger, pollIntervalSeconds } = dependencies;

  const describe = (operationId: string) =>
    describeOperation(orchestrations, operationId, { pollAfterSeconds: pollIntervalSeconds });

  /** The operation of a job whose orchestration was enqueued just now: `queued` (a snapshot, not a race with its first episode). */
  function pendingOperation(job: DashboardJob): OperationView {
    return operationView({
      operationId: job.operation_id,
      operationType: "blast.submit",
      state: "queued",
      createdAt: job.created_at,
      updatedAt: job.updated_at,
      pollAfterSeconds: pollIntervalSeconds,
      targetLink: `/api/blast/jobs/${job.job_id}`,
    });
  }

  async function get(jobId: string): Promise<DashboardJob> {
    const job = await jobs.get(jobId);
    if (!job) throw new NotFoundError(`no dashboard job with id '${jobId}'`);
    return job;
  }

  /**
   * Records `job`, or answers the job an earlier submit with the same key recorded. Jobs created
   * before ids became version 8 UUIDs live under their legacy id, which only ever holds such
   * jobs: found there, it is the job.
   */
  async function record(
    job: DashboardJob,
    request: DashboardSubmitRequest,
    caller: Caller,
  ): Promise<{ job: DashboardJob; created: boolean }> {
    if (request.idempotency_key) {
      const legacy = await jobs.get(legacyDashboardJobId(caller.oid, request.idempotency_key));
      if (legacy) return { job: await jobs.acceptRetry(legacy, job, request.query_fasta), created: false };
    }
    return jobs.create(job, request.query_fasta);
  }

  return {
    /**
     * Submits a search: validates what the schema cannot (options for the program, the FASTA),
     * records the dashboard job and starts its `submitBlastJob` orchestration. The same caller
     * and idempotency key give the same job (a different search under the key is a
     * ConflictError); a retry also starts the orchestration when the first attempt stored the
     * job but stopped before starting it (the operation id is the instance id, so it starts once).
     */
    async submit(
      caller: Caller,
      request: DashboardSubmitRequest,
    ): Promise<DashboardJobWithOperation & { created: boolean }> {
      const { program } = request;
      if (request.options) validateOptionsForProgram(program, request.options, "options");
      const records = parseQueryFasta(request.query_fasta, queryMolecule(program));
      const executionProfile = request.execution_profile ?? "standard";
      if (dependencies.databases)
        requireDatabaseFit(program, request.db, await dependencies.databases.get(request.db), executionProfile);
      const power = await dependencies.clusterPower?.();
      if (power?.power_state === "Stopped")
        throw new DependencyUnavailableError(
          `the cluster '${power.cluster_name}' is stopped, so no search can run: start it on the Cluster page (POST /api/aks/cluster/start), then submit again`,
        );
      const priority = request.priority ?? null;
      const now = new Date().toISOString();
      const { job: stored, created } = await record(
        {
          job_id: dashboardJobId(caller.oid, request.idempotency_key),
          openapi_job_id: null,
          operation_id: newOperationId(),
          status: "submitting",
          status_times: { submitting: now },
          title: request.title ?? "",
          program,
          db: request.db,
          execution_profile: executionProfile,
          priority,
          blast_options: request.options ?? {},
          query_count: records.length,
          created_by: { oid: caller.oid, name: caller.name },
          created_at: now,
          updated_at: now,
          cancel_requested: false,
          error: "",
          progress: null,
          request_fingerprint: requestFingerprint({
            program,
            db: request.db,
            query_fasta: request.query_fasta,
            options: request.options ?? {},
            execution_profile: executionProfile,
            priority,
          }),
        },
        request,
        caller,
      );
      let existing = created ? undefined : await describe(stored.operation_id);
      if (!existing) {
        const input: SubmitBlastJobInput = {
          dashboard_job_id: stored.job_id,
          poll_interval_seconds: pollIntervalSeconds,
        };
        try {
          await orchestrations.startNew(Orchestrations.submitBlastJob, { instanceId: stored.operation_id, input });
          logger.info("dashboard job accepted", {
            dashboard_job_id: stored.job_id,
            operation_id: stored.operation_id,
            oid: caller.oid,
            resumed: !created,
          });
        } catch (error) {
          // A concurrent retry started it first (the host refuses a second start of a running instance).
          existing = await describe(stored.operation_id);
          if (!existing) throw error;
        }
      }
      return { job: stored, operation: existing ?? pendingOperation(stored), created };
    },

    /** Dashboard jobs, newest first, optionally of one status. */
    list(options: ListDashboardJobsOptions): Promise<{ jobs: DashboardJob[]; total: number }> {
      return jobs.list(options);
    },

    /** One dashboard job; NotFoundError when there is none. */
    get,

    /**
     * Asks the job's orchestration to cancel it (audited, also when the job had already ended).
     * The orchestration cancels the job-API job; a job that finished first keeps its results.
     */
    async cancel(caller: Caller, jobId: string, options: DashboardActOptions): Promise<DashboardJobWithOperation> {
      const job = await get(jobId);
      let requested = false;
      const updated = await jobs.update(jobId, (current) => {
        requested = !TERMINAL_JOB_STATES.has(current.status);
        return requested ? { ...current, cancel_requested: true } : undefined;
      });
      if (requested) {
        await orchestrations
          .raiseEvent(job.operation_id, CANCEL_EVENT, { by: caller.oid })
          .catch((error: unknown) => logger.warn("cancel event not delivered; the poll will see the flag", { error }));
        logger.info("dashboard job cancel requested", { dashboard_job_id: jobId, oid: caller.oid });
      }
      const current = updated ?? job;
      await audit.record({
        actor: { oid: caller.oid, name: caller.name },
        action: "blast_job.cancel",
        target: `blast_job/${jobId}`,
        outcome: requested ? "succeeded" : "failed",
        request_id: options.requestId,
        details: requested ? { operation_id: job.operation_id } : { reason: `job is already ${current.status}` },
      });
      return { job: current, operation: (await describe(job.operation_id)) ?? pendingOperation(job) };
    },

    /**
     * Opens the job's results at the job API for streaming through. NotFoundError until the job
     * has reached the job API, and while its results are not published.
     */
    /**
     * The job's results streamed from the job API, with the name the download is saved under
     * (`<title or job>-<kind>.<ext>`, the same for every content and every client).
     */
    async openResults(
      jobId: string,
      content: ResultFileKind,
      options?: JobApiCallOptions,
    ): Promise<JobApiResults & { fileName: string }> {
      const job = await get(jobId);
      if (!job.openapi_job_id) throw new NotFoundError("the job has not reached the job API yet; poll its operation");
      const results = await jobApi.openResults(job.openapi_job_id, content, options);
      return { ...results, fileName: resultFileName(job, content) };
    },

    /**
     * A page of the job's result from the job API (issue 23): query summaries (`n` absent), one
     * query's hits (`n`), or one hit with its HSPs (`n`, `k`). NotFoundError as for results.
     */
    async resultPage(
      jobId: string,
      at: { n?: number; k?: number },
      page: { offset?: number; limit?: number } = {},
      options?: JobApiCallOptions,
    ): Promise<unknown> {
      const job = await get(jobId);
      if (!job.openapi_job_id) throw new NotFoundError("the job has not reached the job API yet; poll its operation");
      const path = at.n === undefined ? "" : at.k === undefined ? `/${at.n}/hits` : `/${at.n}/hits/${at.k}`;
      return jobApi.resultPage(job.openapi_job_id, path, at.k === undefined ? page : {}, options);
    },
  };
}

/** The dashboard job service's interface. */
export type DashboardJobService = ReturnType<typeof createDashboardJobService>;
