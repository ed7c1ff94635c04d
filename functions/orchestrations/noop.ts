import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";

export const NOOP_ECHO_ACTIVITY = "noopEcho";

/** Returns its message unchanged: proves an enqueue reaches a consumer and comes back (§2.9 rule 3). */
const noopEcho = df.app.activity(NOOP_ECHO_ACTIVITY, {
  handler: (input: { message: string }) => ({ message: input.message }),
});

const noop: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<{ message: string }>();
  const echoed: { message: string } = yield noopEcho(input);
  return echoed;
};

df.app.orchestration(Orchestrations.noop, noop);
