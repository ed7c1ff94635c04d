import { createHash } from "node:crypto";
import type { DashboardJobService } from "./dashboard-job-service.js";
import { type DashboardJobStore, TERMINAL_JOB_STATES } from "./dashboard-jobs.js";
import { dashboardSubmitSchema } from "./schemas.js";
import { actingCaller, targetId } from "../ops/actions/acting-caller.js";
import { ActionStateChangedError } from "../ops/actions/action-executor.js";
import { actionHandler } from "../ops/actions/action-runner.js";

/** What the job executors are built from. */
export interface JobActionDependencies {
  jobs: Pick<DashboardJobStore, "get" | "query">;
  /** The dashboard job service of the current invocation (it carries that invocation's durable client). */
  service: () => Pick<DashboardJobService, "submit" | "cancel">;
}

/** What a retry will submit: the failed job's search, under an idempotency key of its own. */
export interface RetryPlan {
  retry_of: string;
  idempotency_key: string;
  program: string;
  db: string;
  options: Record<string, unknown>;
  execution_profile: string;
  priority: number | string | null;
  title: string;
}

const TITLE_MAX = 200;

/**
 * retry_job: resubmits a failed dashboard job through the dashboard's submit path (same query,
 * database, options, profile and priority) as a new job titled as its retry. The submit's
 * idempotency key derives from the execution's, so a resumed retry finds the job it created.
 */
export function createRetryJobHandler(deps: JobActionDependencies) {
  return actionHandler<RetryPlan>({
    async plan(action, context) {
      const id = targetId(action.target);
      const job = await deps.jobs.get(id);
      if (!job)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { status: null },
          "the job no longer exists",
        );
      if (job.status !== "failed")
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { status: job.status },
          `the job is ${job.status}, no longer failed`,
        );
      return {
        retry_of: id,
        idempotency_key: `retry_job:${createHash("sha256").update(context.idempotencyKey).digest("hex").slice(0, 40)}`,
        program: job.program,
        db: job.db,
        options: job.blast_options,
        execution_profile: job.execution_profile,
        priority: job.priority,
        title: `Retry of ${job.title || id}`.slice(0, TITLE_MAX),
      };
    },
    async apply(plan, _action, context) {
      const request = dashboardSubmitSchema.parse({
        program: plan.program,
        db: plan.db,
        query_fasta: await deps.jobs.query(plan.retry_of),
        options: plan.options,
        ...(plan.priority === null ? {} : { priority: plan.priority }),
        idempotency_key: plan.idempotency_key,
        execution_profile: plan.execution_profile,
        title: plan.title,
      });
      const { job, operation } = await deps.service().submit(actingCaller(context.actor, "Contributor"), request);
      return { job_id: job.job_id, retry_of: plan.retry_of, status: job.status, operation_id: operation.operation_id };
    },
  });
}

/**
 * cancel_job: the dashboard's cancel path (the cancel flag and the orchestration's cancel event,
 * which cancels the job-API job with `POST /v1/jobs/{id}/cancel`); never a delete.
 */
export function createCancelJobHandler(deps: JobActionDependencies) {
  return actionHandler<{ job_id: string }>({
    async plan(action) {
      const id = targetId(action.target);
      const job = await deps.jobs.get(id);
      if (!job)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { status: null },
          "the job no longer exists",
        );
      if (TERMINAL_JOB_STATES.has(job.status))
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { status: job.status },
          `the job is ${job.status}, no longer active`,
        );
      return { job_id: id };
    },
    async apply(plan, _action, context) {
      const { job } = await deps
        .service()
        .cancel(actingCaller(context.actor, "Contributor"), plan.job_id, { requestId: context.requestId });
      return { job_id: job.job_id, status: job.status, cancel_requested: job.cancel_requested };
    },
  });
}
