import { randomUUID } from "node:crypto";
import { app } from "@azure/functions";
import { appContext } from "./composition/app-context.js";
import { consoleConfig, consoleParts } from "./composition/console-deps.js";

/** The operations core's loop: processes new events (T0, verifier, audit) and publishes severity rises. */
app.timer("opsEventLoopTimer", {
  schedule: consoleConfig.opsLoopSchedule,
  handler: async () => {
    const runId = randomUUID();
    const result = await (await consoleParts()).opsLoop.runOnce(runId);
    if (result.processed.length > 0 || result.severity_changes > 0)
      appContext.logger.info("operations core processed events", {
        run_id: runId,
        processed: result.processed.length,
        severity_changes: result.severity_changes,
      });
  },
});

/**
 * The state snapshots the console's read-as-stored tools answer from (detection readiness, T2
 * recovery), recorded on the operations loop's schedule and once at start, so the tools answer
 * real data as soon as the app is up. Observing is read-only, so an extra run on a restart costs
 * nothing but a few reads.
 */
app.timer("opsSnapshotTimer", {
  schedule: consoleConfig.opsLoopSchedule,
  runOnStartup: true,
  handler: async () => {
    const { recorded, failed } = await (await consoleParts()).snapshots.runOnce();
    if (failed.length > 0) appContext.logger.warn("operations snapshots not recorded", { recorded, failed });
  },
});
