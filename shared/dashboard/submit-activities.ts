import type { Logger } from "../logging/logger.js";
import type { EventLog } from "../ops/events.js";
import type { DashboardJobStore } from "./dashboard-jobs.js";
import { TERMINAL_JOB_STATES } from "./dashboard-jobs.js";
import type { JobApiClient, JobApiSubmitOutcome } from "./job-api-client.js";

export interface SubmitActivityDeps {
  jobs: DashboardJobStore;
  jobApi: JobApiClient;
  logger: Logger;
  events: EventLog;
}

const PREFLIGHT_FAILURE = "memory pre-flight failed";

/** The job API idempotency key of a dashboard job: a retried activity never submits twice. */
export function jobApiIdempotencyKey(dashboardJobId: string): string {
  return `dashboard-${dashboardJobId}`;
}

/** Submits the dashboard job to the job API (idempotently) and links the two ids. */
export function createSubmitToJobApiActivity(d: SubmitActivityDeps) {
  return async (input: { dashboard_job_id: string }): Promise<JobApiSubmitOutcome> => {
    const job = await d.jobs.get(input.dashboard_job_id);
    if (!job) return { kind: "rejected", status: 404, detail: "dashboard job vanished" };
    const outcome = await d.jobApi.submit({
      program: job.program,
      db: job.db,
      query_fasta: await d.jobs.query(job.job_id),
      blast_options: job.blast_options,
      execution_profile: job.execution_profile,
      ...(job.priority !== null ? { priority: job.priority } : {}),
      idempotency_key: jobApiIdempotencyKey(job.job_id),
    });
    if (outcome.kind === "accepted") {
      await d.jobs.update(job.job_id, (j) => ({ ...j, openapi_job_id: outcome.job_id, status: outcome.status }));
      d.logger.info("dashboard job submitted", { dashboard_job_id: job.job_id, job_id: outcome.job_id, replayed: outcome.replayed });
    } else if (outcome.kind === "retry") {
      d.logger.warn("job API busy; submit will be retried", { dashboard_job_id: job.job_id, reason: outcome.reason });
    }
    return outcome;
  };
}

/** Reads the job API's status into the dashboard job; reports whether it is terminal. */
export function createPollJobApiActivity(d: SubmitActivityDeps) {
  return async (input: { dashboard_job_id: string; openapi_job_id: string }): Promise<{ status: string; terminal: boolean; cancel_requested: boolean; error: string }> => {
    const s = await d.jobApi.status(input.openapi_job_id);
    if ("unavailable" in s) {
      const job = await d.jobs.get(input.dashboard_job_id);
      return { status: job?.status ?? "unknown", terminal: false, cancel_requested: job?.cancel_requested ?? false, error: "" };
    }
    const job = await d.jobs.update(input.dashboard_job_id, (j) =>
      j.status === s.status && JSON.stringify(j.progress) === JSON.stringify(s.kubernetes.summary) && j.error === s.error
        ? undefined
        : { ...j, status: s.status, error: s.error, progress: s.kubernetes.summary },
    );
    if (s.status === "failed") {
      // Idempotent on the job: a re-run poll records the same event once.
      const preflight = s.error.startsWith(PREFLIGHT_FAILURE);
      await d.events.record({
        idempotency_key: `${preflight ? "preflight.failed" : "job.failed"}/${input.dashboard_job_id}`,
        source: "dashboard.submit",
        event_type: preflight ? "preflight.failed" : "job.failed",
        correlation_id: input.dashboard_job_id,
        resource_ref: `blast_job/${input.dashboard_job_id}`,
        payload: { openapi_job_id: input.openapi_job_id, error: s.error },
      });
    }
    return { status: s.status, terminal: TERMINAL_JOB_STATES.has(s.status), cancel_requested: job?.cancel_requested ?? false, error: s.error };
  };
}

/**
 * Cancels the job at the job API (when it has one there) and marks the dashboard job cancelled.
 * A job that finished before the cancel reached it is left alone: the answer carries its status
 * (`completed` or `failed`) so the orchestration records that instead.
 */
export function createCancelJobActivity(d: SubmitActivityDeps) {
  return async (input: { dashboard_job_id: string; openapi_job_id: string | null }): Promise<{ status: string }> => {
    if (input.openapi_job_id) {
      const status = await d.jobApi.cancel(input.openapi_job_id);
      if (status === "completed" || status === "failed") return { status };
    }
    await d.jobs.update(input.dashboard_job_id, (j) => (TERMINAL_JOB_STATES.has(j.status) ? undefined : { ...j, status: "cancelled" }));
    return { status: "cancelled" };
  };
}

/** Marks the dashboard job failed with a focused error. */
export function createFailJobActivity(d: SubmitActivityDeps) {
  return async (input: { dashboard_job_id: string; error: string }): Promise<void> => {
    await d.jobs.update(input.dashboard_job_id, (j) => ({ ...j, status: "failed", error: input.error }));
  };
}
