import path from "node:path";
import { JobDispatcher, type DispatcherOptions } from "../../jobapi/jobs/dispatcher.js";

/**
 * A job dispatcher that is never started: jobs stay queued, as when every active slot is busy.
 * For tests of the submit path (its writes, admission), not of running jobs.
 */
export function idleDispatcher(
  o: Pick<DispatcherOptions, "jobs" | "artifacts" | "catalog" | "logger" | "nodeMemoryBytes"> & { dir: string },
): JobDispatcher {
  return new JobDispatcher({
    jobs: o.jobs,
    artifacts: o.artifacts,
    catalog: o.catalog,
    executor: { name: "none", oneNode: true, run: async () => {} },
    logger: o.logger,
    workDir: path.join(o.dir, "work"),
    maxActiveJobs: 1,
    nodeMemoryBytes: o.nodeMemoryBytes,
    memoryMarginBytes: 0,
    threadsPerShard: "auto",
    shardSlots: 1,
    shardAttempts: 1,
  });
}
