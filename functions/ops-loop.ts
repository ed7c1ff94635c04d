import { randomUUID } from "node:crypto";
import { app } from "@azure/functions";
import { appContext } from "./app-context.js";
import { consoleConfig, consoleParts } from "./console-deps.js";

/** The operations core's loop: processes new events (T0, verifier, audit) and publishes severity rises. */
app.timer("opsEventLoopTimer", {
  schedule: consoleConfig.opsLoopSchedule,
  handler: async () => {
    const runId = randomUUID();
    const result = await (await consoleParts()).opsLoop.runOnce(runId);
    if (result.processed.length > 0 || result.severity_changes > 0) appContext.logger.info("operations core processed events", { run_id: runId, processed: result.processed.length, severity_changes: result.severity_changes });
  },
});
