import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import * as df from "durable-functions";
import {
  investigationView,
  type ReadInvestigationInput,
  type ReadInvestigationOutput,
  recordInvestigation,
  runInvestigation,
} from "../../shared/console/read-investigations.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { consoleParts } from "../composition/console-deps.js";

export const RUN_READ_INVESTIGATION_ACTIVITY = "runReadInvestigation";

/** Runs the reads through the coordinator (each re-validated, role-checked and audited) and records the result. */
const runReadInvestigation = df.app.activity(RUN_READ_INVESTIGATION_ACTIVITY, {
  handler: async (input: ReadInvestigationInput): Promise<ReadInvestigationOutput> => {
    const { coordinator } = await consoleParts();
    const result = await runInvestigation(coordinator, {
      caller: input.caller,
      plan: input.plan,
      requestId: input.request_id,
    });
    const entry = await recordInvestigation(appContext.audit, {
      caller: input.caller,
      investigationId: input.investigation_id,
      requestId: input.request_id,
      plan: input.plan,
      choice: input.choice,
      result,
    });
    const view = investigationView(result, entry.audit_id);
    return result.outcome === "answered"
      ? { outcome: "succeeded", audit_id: entry.audit_id, result: view }
      : {
          outcome: "failed",
          audit_id: entry.audit_id,
          result: view,
          // The operation view is Reader-visible: no tool error text, only where the evidence is.
          error: `a read failed or was unavailable; the rest were not run (audit entry ${entry.audit_id})`,
        };
  },
});

/** A detached read investigation: one activity, so a host restart re-runs the reads rather than losing them. */
const readInvestigation: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<ReadInvestigationInput>();
  const output: ReadInvestigationOutput = yield runReadInvestigation(input);
  return output;
};

df.app.orchestration(Orchestrations.readInvestigation, readInvestigation);
