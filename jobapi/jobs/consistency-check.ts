import type { DatabaseCatalog } from "../../shared/databases/database-catalog.js";
import { type JobRecord, TERMINAL_STATUSES } from "../../shared/jobs/model.js";
import type { Logger } from "../../shared/logging/logger.js";
import { type ArtifactStore, MERGED_ARTIFACT } from "./artifact-store.js";
import type { JobStore } from "./job-store.js";

/** One job the start-up check ended, and why. */
export interface JobConsistencyFinding {
  job_id: string;
  status_before: string;
  reason: string;
}

/**
 * Start-up check (issue 15): what a job row references must exist. A job row is written after its
 * query blob and marked completed after its results, so storage that keeps every acknowledged
 * write never trips this; storage that lost writes in a crash (or a hand-edited folder) would
 * otherwise leave a job queued forever or a completed job whose results 404. Each such job is
 * failed with a reason a user can act on, never left stuck. Runs before the dispatcher starts.
 */
export async function checkJobConsistency(d: {
  jobs: JobStore;
  artifacts: ArtifactStore;
  catalog: DatabaseCatalog;
  logger: Logger;
}): Promise<{
  checked: number;
  failed: JobConsistencyFinding[];
}> {
  const failed: JobConsistencyFinding[] = [];
  let checked = 0;
  for await (const job of d.jobs.list()) {
    checked++;
    const reason = await missingReference(job, d);
    if (!reason) continue;
    const updated = await d.jobs.update(job.job_id, (j) => {
      // Changed since it was read (a cancel, a delete): the new state is judged next start.
      if (j.status !== job.status) return undefined;
      const at = new Date().toISOString();
      return { ...j, status: "failed", error: reason, updated_at: at, completed_at: at };
    });
    if (updated?.status !== "failed" || updated.error !== reason) continue;
    failed.push({ job_id: job.job_id, status_before: job.status, reason });
    d.logger.warn("job failed by the start-up consistency check", {
      job_id: job.job_id,
      status_before: job.status,
      reason,
    });
  }
  d.logger.info("start-up consistency check", { jobs_checked: checked, jobs_failed: failed.length });
  return { checked, failed };
}

async function missingReference(
  job: JobRecord,
  d: { artifacts: ArtifactStore; catalog: DatabaseCatalog },
): Promise<string | undefined> {
  if (job.status === "completed") {
    return (await d.artifacts.exists(job.job_id, MERGED_ARTIFACT))
      ? undefined
      : "its results are missing from storage (lost in a crash of the storage service); submit the search again";
  }
  if (TERMINAL_STATUSES.has(job.status)) return undefined;
  if (!(await d.artifacts.exists(job.job_id, "query.fa"))) {
    return "its query is missing from storage (lost in a crash of the storage service); submit the search again";
  }
  if (!(await d.catalog.get(job.db_name, job.db_version))) {
    return `the database release it was accepted for (${job.db_name} ${job.db_version}) is no longer in the database folder; submit the search again`;
  }
  return undefined;
}
