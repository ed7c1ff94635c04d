import type { OpsEvent } from "../../shared/ops/events.js";
import { createOpsLoop } from "../../shared/ops/ops-loop.js";
import type { TableClientFactory } from "../../shared/storage/table-source.js";
import { actions, consoleHarness, rules } from "./console-harness.js";
import { eventually } from "./local-stack.js";

/**
 * The console's event log and audit over `tables`, with an operations loop on the real catalogs.
 * `verdictOf` runs the loop and returns the verdict recorded for the event, by this loop or by
 * another host's (a running stack's timer) that claimed it first.
 */
export function opsWorld(tables: TableClientFactory) {
  const harness = consoleHarness(tables);
  const loop = createOpsLoop({
    events: harness.events,
    audit: harness.audit,
    rules,
    actions,
    verify: harness.verify,
    claims: tables,
    incidentWindowMs: 1_800_000,
  });
  async function verdictOf(event: OpsEvent) {
    await loop.runOnce(`test-tick-${event.event_id}`);
    const details = await eventually(
      async () =>
        (await harness.audit.list({ action: "ops.event_processed", limit: 1000 })).find(
          (entry) => entry.details?.event_id === event.event_id,
        )?.details,
      30_000,
    );
    return {
      decision: details.decision,
      severity: details.severity,
      rule_ids: details.rule_ids,
      proposed_action: details.proposed_action,
    };
  }
  return { ...harness, tables, loop, verdictOf };
}
