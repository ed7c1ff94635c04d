import { type DashboardJobStore, TERMINAL_JOB_STATES } from "../shared/dashboard/dashboard-jobs.js";
import type { Logger } from "../shared/logging/logger.js";
import { EXEC_KEY } from "./durable/engine.js";
import { EventType, historyEvent } from "./durable/history.js";
import type { DurableStore } from "./durable/store.js";

/** What the local stack's start-up check repaired or failed. */
export interface StackConsistencyReport {
  /** Orchestrations created but never started (their start message was lost): started now. */
  restarted_instances: string[];
  /** Dashboard jobs whose orchestration does not exist: failed with a reason. */
  failed_dashboard_jobs: string[];
}

const NEVER_STARTED =
  "the local stack stopped (crash or power cut) before this submit was acknowledged, so its search never started; submit it again";

/**
 * Start-up check of the local stack (issue 15 item 2), before the durable backend resumes work and
 * before any request is served. A dashboard submit writes the job row, then its query, then creates
 * the orchestration (instance row, then its start message), and only then answers: a cut between
 * two of these steps leaves work nobody will finish. Each such item is repaired when everything it
 * needs is stored (an instance whose start message is missing is started from its stored input) and
 * failed with a reason otherwise (a dashboard job without an orchestration). The job API checks its
 * own jobs at its start (`jobapi/jobs/consistency-check.ts`).
 */
export async function checkStackConsistency(d: {
  store: DurableStore;
  dashboardJobs: DashboardJobStore;
  logger: Logger;
}): Promise<StackConsistencyReport> {
  const report: StackConsistencyReport = { restarted_instances: [], failed_dashboard_jobs: [] };
  await d.store.init();
  for await (const instance of d.store.listInstances({ statuses: ["Pending"] })) {
    if (instance.historyLength > 0) continue;
    const inbox = await d.store.getInbox(instance.instanceId);
    const started = inbox.some(
      (m) => m.event.EventType === EventType.ExecutionStarted && m.event[EXEC_KEY] === instance.executionId,
    );
    if (started) continue;
    await d.store.enqueue(
      instance.instanceId,
      historyEvent(EventType.ExecutionStarted, {
        Name: instance.name,
        Input: instance.input,
        [EXEC_KEY]: instance.executionId,
      }),
    );
    report.restarted_instances.push(instance.instanceId);
    d.logger.warn("orchestration created but never started: starting it from its stored input", {
      instance_id: instance.instanceId,
      name: instance.name,
    });
  }

  const { jobs } = await d.dashboardJobs.list({ page: 1, pageSize: Number.MAX_SAFE_INTEGER });
  for (const job of jobs) {
    if (TERMINAL_JOB_STATES.has(job.status) || (await d.store.getInstance(job.operation_id))) continue;
    const failed = await d.dashboardJobs.update(job.job_id, (j) =>
      TERMINAL_JOB_STATES.has(j.status) ? undefined : { ...j, status: "failed", error: NEVER_STARTED },
    );
    if (failed?.status !== "failed") continue;
    report.failed_dashboard_jobs.push(job.job_id);
    d.logger.warn("dashboard job failed by the start-up consistency check", {
      dashboard_job_id: job.job_id,
      operation_id: job.operation_id,
      reason: NEVER_STARTED,
    });
  }
  d.logger.info("start-up consistency check", {
    restarted_instances: report.restarted_instances.length,
    failed_dashboard_jobs: report.failed_dashboard_jobs.length,
  });
  return report;
}
