import {
  DependencyUnavailableError,
  DomainError,
  type FieldIssue,
  QueueFullError,
  ValidationError,
} from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { EventLog } from "../ops/events.js";
import type { DashboardJobStore } from "./dashboard-jobs.js";
import { TERMINAL_JOB_STATES } from "./dashboard-jobs.js";
import type { JobApiClient } from "./job-api-client.js";

/** What the submit activities need. */
export interface SubmitActivityDependencies {
  jobs: DashboardJobStore;
  jobApi: JobApiClient;
  logger: Logger;
  events: EventLog;
}

/**
 * What a submit to the job API came to, as the orchestration decides on it (an activity's result
 * crosses the durable boundary as JSON, so it is a value, not an error class): accepted, try again
 * after `after_seconds` (the job API was busy or unreachable), or refused for good.
 */
export type JobApiSubmitOutcome =
  | { kind: "accepted"; job_id: string; status: string; replayed: boolean }
  | { kind: "retry"; after_seconds: number; reason: string }
  /** `issues`: the job API's 422 field issues, kept structured for the operation's error. */
  | { kind: "rejected"; detail: string; issues?: FieldIssue[] };

const PREFLIGHT_FAILURE = "memory pre-flight failed";

/** The job API idempotency key of a dashboard job: a retried activity never submits twice. */
export function jobApiIdempotencyKey(dashboardJobId: string): string {
  return `dashboard-${dashboardJobId}`;
}

/** The words of a refusal, for the dashboard job's `error` (422 issues as `loc: msg`). */
function refusalText(error: DomainError): string {
  if (error instanceof ValidationError)
    return error.issues.map((issue) => `${issue.loc.join(".")}: ${issue.msg}`).join("; ");
  return error.message;
}

/** Submits the dashboard job to the job API (idempotently) and links the two ids. */
export function createSubmitToJobApiActivity(dependencies: SubmitActivityDependencies) {
  const { jobs, jobApi, logger } = dependencies;
  return async (input: { dashboard_job_id: string }): Promise<JobApiSubmitOutcome> => {
    const job = await jobs.get(input.dashboard_job_id);
    if (!job) return { kind: "rejected", detail: "dashboard job vanished" };
    let accepted: Awaited<ReturnType<JobApiClient["submit"]>>;
    try {
      accepted = await jobApi.submit({
        program: job.program,
        db: job.db,
        query_fasta: await jobs.query(job.job_id),
        blast_options: job.blast_options,
        execution_profile: job.execution_profile,
        ...(job.priority !== null ? { priority: job.priority } : {}),
        idempotency_key: jobApiIdempotencyKey(job.job_id),
      });
    } catch (error) {
      if (error instanceof QueueFullError || error instanceof DependencyUnavailableError) {
        logger.warn("job API busy; submit will be retried", { dashboard_job_id: job.job_id, reason: error.message });
        return { kind: "retry", after_seconds: error.retryAfterSeconds ?? 5, reason: error.message };
      }
      if (error instanceof DomainError) {
        return {
          kind: "rejected",
          detail: refusalText(error),
          ...(error instanceof ValidationError ? { issues: [...error.issues] } : {}),
        };
      }
      throw error;
    }
    await jobs.update(job.job_id, (current) => ({
      ...current,
      openapi_job_id: accepted.job_id,
      status: accepted.status,
    }));
    logger.info("dashboard job submitted", {
      dashboard_job_id: job.job_id,
      job_id: accepted.job_id,
      replayed: accepted.replayed,
    });
    return { kind: "accepted", ...accepted };
  };
}

/** Reads the job API's status into the dashboard job; reports whether it is terminal. */
export function createPollJobApiActivity(dependencies: SubmitActivityDependencies) {
  const { jobs, jobApi, events } = dependencies;
  return async (input: {
    dashboard_job_id: string;
    openapi_job_id: string;
  }): Promise<{ status: string; terminal: boolean; cancel_requested: boolean; error: string }> => {
    let upstream: Awaited<ReturnType<JobApiClient["getStatus"]>>;
    try {
      upstream = await jobApi.getStatus(input.openapi_job_id);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      // The job API could not tell just now: report what the dashboard knows and poll again.
      const job = await jobs.get(input.dashboard_job_id);
      return {
        status: job?.status ?? "unknown",
        terminal: false,
        cancel_requested: job?.cancel_requested ?? false,
        error: "",
      };
    }
    const resultBytes = upstream.result_bytes ?? null;
    const storing = upstream.storing ?? null;
    const job = await jobs.update(input.dashboard_job_id, (current) =>
      current.status === upstream.status &&
      JSON.stringify(current.progress) === JSON.stringify(upstream.kubernetes.summary) &&
      current.error === upstream.error &&
      JSON.stringify(current.result_bytes ?? null) === JSON.stringify(resultBytes) &&
      JSON.stringify(current.storing ?? null) === JSON.stringify(storing)
        ? undefined
        : {
            ...current,
            status: upstream.status,
            error: upstream.error,
            progress: upstream.kubernetes.summary,
            result_bytes: resultBytes,
            storing,
          },
    );
    if (upstream.status === "failed") {
      // Idempotent on the job: a re-run poll records the same event once.
      const preflight = upstream.error.startsWith(PREFLIGHT_FAILURE);
      await events.record({
        idempotency_key: `${preflight ? "preflight.failed" : "job.failed"}/${input.dashboard_job_id}`,
        source: "dashboard.submit",
        event_type: preflight ? "preflight.failed" : "job.failed",
        correlation_id: input.dashboard_job_id,
        resource_ref: `blast_job/${input.dashboard_job_id}`,
        payload: { openapi_job_id: input.openapi_job_id, error: upstream.error },
      });
    }
    return {
      status: upstream.status,
      terminal: TERMINAL_JOB_STATES.has(upstream.status),
      cancel_requested: job?.cancel_requested ?? false,
      error: upstream.error,
    };
  };
}

/**
 * Cancels the job at the job API (when it has one there) and marks the dashboard job cancelled.
 * A job that finished before the cancel reached it is left alone: the answer carries its status
 * (`completed` or `failed`) so the orchestration records that instead.
 */
export function createCancelJobActivity(dependencies: SubmitActivityDependencies) {
  const { jobs, jobApi } = dependencies;
  return async (input: { dashboard_job_id: string; openapi_job_id: string | null }): Promise<{ status: string }> => {
    if (input.openapi_job_id) {
      // A job API that no longer has the job, or does not answer, cannot tell: the job is cancelled here.
      const status = await jobApi.cancel(input.openapi_job_id).catch((error: unknown) => {
        if (error instanceof DomainError) return undefined;
        throw error;
      });
      if (status === "completed" || status === "failed") return { status };
    }
    await jobs.update(input.dashboard_job_id, (current) =>
      TERMINAL_JOB_STATES.has(current.status) ? undefined : { ...current, status: "cancelled" },
    );
    return { status: "cancelled" };
  };
}

/** Marks the dashboard job failed with a focused error. */
export function createFailJobActivity(dependencies: SubmitActivityDependencies) {
  const { jobs } = dependencies;
  return async (input: { dashboard_job_id: string; error: string }): Promise<void> => {
    await jobs.update(input.dashboard_job_id, (current) => ({ ...current, status: "failed", error: input.error }));
  };
}
