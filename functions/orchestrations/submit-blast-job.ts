import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import {
  createCancelJobActivity,
  createFailJobActivity,
  createPollJobApiActivity,
  createSubmitToJobApiActivity,
  type JobApiSubmitOutcome,
} from "../../shared/dashboard/submit-activities.js";
import { CANCEL_EVENT, Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { dashboardJobs } from "../composition/dashboard-deps.js";

export const SubmitActivities = {
  submit: "submitToJobApi",
  poll: "pollJobApi",
  cancel: "cancelJobApiJob",
  fail: "failDashboardJob",
} as const;

const MAX_SUBMIT_ATTEMPTS = 20;
const MAX_RETRY_WAIT_SECONDS = 300;
/** Polls per execution before continue-as-new keeps the history short. */
const POLLS_PER_EXECUTION = 50;

interface SubmitInput {
  dashboard_job_id: string;
  openapi_job_id?: string;
  poll_interval_seconds: number;
}

const deps = () => ({
  jobs: dashboardJobs(),
  jobApi: appContext.jobApi,
  logger: appContext.logger,
  events: appContext.events,
});

// The typed handles the registrations return: the orchestrator calls these, never a bare name.
const submitToJobApi = df.app.activity(SubmitActivities.submit, {
  handler: (input: { dashboard_job_id: string }) => createSubmitToJobApiActivity(deps())(input),
});
const pollJobApi = df.app.activity(SubmitActivities.poll, {
  handler: (input: { dashboard_job_id: string; openapi_job_id: string }) => createPollJobApiActivity(deps())(input),
});
const cancelJobApiJob = df.app.activity(SubmitActivities.cancel, {
  handler: (input: { dashboard_job_id: string; openapi_job_id: string | null }) =>
    createCancelJobActivity(deps())(input),
});
const failDashboardJob = df.app.activity(SubmitActivities.fail, {
  handler: (input: { dashboard_job_id: string; error: string }) => createFailJobActivity(deps())(input),
});

function after(context: OrchestrationContext, seconds: number): Date {
  return new Date(context.df.currentUtcDateTime.getTime() + seconds * 1000);
}

/** The orchestration's result once the job API's job is terminal. */
function ended(context: OrchestrationContext, openapiJobId: string, s: { status: string; error: string }) {
  context.df.setCustomStatus({ phase: "done", openapi_job_id: openapiJobId, job_status: s.status });
  return {
    outcome: s.status === "completed" ? "succeeded" : s.status,
    openapi_job_id: openapiJobId,
    job_status: s.status,
    error: s.error,
  };
}

/**
 * Submits a dashboard job to the job API (retrying 429/502/503/504 after Retry-After or a backoff,
 * through durable timers), then polls with durable timers until the job is terminal, keeping the
 * dashboard job current. A `cancel` event stops it. Deterministic: only context.df calls.
 */
const submitBlastJob: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<SubmitInput>();
  let openapiJobId = input.openapi_job_id;

  if (!openapiJobId) {
    context.df.setCustomStatus({ phase: "submitting" });
    for (let attempt = 1; attempt <= MAX_SUBMIT_ATTEMPTS && !openapiJobId; attempt++) {
      const outcome: JobApiSubmitOutcome = yield submitToJobApi({ dashboard_job_id: input.dashboard_job_id });
      if (outcome.kind === "accepted") {
        openapiJobId = outcome.job_id;
      } else if (outcome.kind === "rejected") {
        yield failDashboardJob({ dashboard_job_id: input.dashboard_job_id, error: outcome.detail });
        return { outcome: "failed", error: outcome.detail, ...(outcome.issues ? { issues: outcome.issues } : {}) };
      } else if (attempt < MAX_SUBMIT_ATTEMPTS) {
        // (After the last attempt there is nothing to wait for.)
        const backoff = Math.min(MAX_RETRY_WAIT_SECONDS, Math.max(outcome.after_seconds, 2 ** Math.min(attempt, 8)));
        yield context.df.createTimer(after(context, backoff));
      }
    }
    if (!openapiJobId) {
      const error = `the job API did not accept the job after ${MAX_SUBMIT_ATTEMPTS} attempts`;
      yield failDashboardJob({ dashboard_job_id: input.dashboard_job_id, error });
      return { outcome: "failed", error };
    }
  }

  for (let poll = 0; poll < POLLS_PER_EXECUTION; poll++) {
    context.df.setCustomStatus({ phase: "polling", openapi_job_id: openapiJobId });
    const timer = context.df.createTimer(after(context, input.poll_interval_seconds));
    const cancel = context.df.waitForExternalEvent(CANCEL_EVENT);
    const winner: unknown = yield context.df.Task.any([timer, cancel]);
    let cancelRequested = winner === cancel;
    if (!cancelRequested) {
      const s: { status: string; terminal: boolean; cancel_requested: boolean; error: string } = yield pollJobApi({
        dashboard_job_id: input.dashboard_job_id,
        openapi_job_id: openapiJobId,
      });
      if (s.terminal) return ended(context, openapiJobId, s);
      cancelRequested = s.cancel_requested;
    } else {
      timer.cancel();
    }
    if (cancelRequested) {
      const cancelled: { status: string } = yield cancelJobApiJob({
        dashboard_job_id: input.dashboard_job_id,
        openapi_job_id: openapiJobId,
      });
      if (cancelled.status !== "cancelled") {
        // The job finished before the cancel reached it: record how it ended, results included.
        const s: { status: string; error: string } = yield pollJobApi({
          dashboard_job_id: input.dashboard_job_id,
          openapi_job_id: openapiJobId,
        });
        return ended(context, openapiJobId, s);
      }
      return { outcome: "cancelled", openapi_job_id: openapiJobId, job_status: "cancelled" };
    }
  }
  context.df.continueAsNew({ ...input, openapi_job_id: openapiJobId });
  return undefined;
};

df.app.orchestration(Orchestrations.submitBlastJob, submitBlastJob);
