import type { ActionTypeCatalog } from "./actions/action-types.js";
import type { AuditEntry, AuditLog } from "./audit.js";
import type { OpsEvent } from "./events.js";
import { evaluateRules, type RuleCatalog } from "./rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "./verifier/verifier.js";

/** What processing needs: the catalogs, the verifier over current state, and the audit log. */
export interface EventProcessorDependencies {
  rules: RuleCatalog;
  actions: ActionTypeCatalog;
  verify(action: ProposedAction): Promise<VerifierReport>;
  audit: AuditLog;
}

/**
 * Processes one ingested event: T0 verdict, the verifier's report on any proposed action, and one
 * `ops.event_processed` audit entry carrying both with the mode — the trail `explain_verdict`
 * reads. In `shadow` mode (every action type's default) nothing is executed.
 */
export async function processEvent(
  deps: EventProcessorDependencies,
  event: OpsEvent,
  requestId: string,
): Promise<AuditEntry> {
  const verdict = evaluateRules(deps.rules, event);
  const actionType = verdict.proposed_action
    ? deps.actions.action_types.find((a) => a.id === verdict.proposed_action)
    : undefined;
  const verifier_report = verdict.proposed_action
    ? await deps.verify({ action_type: verdict.proposed_action, target: event.resource_ref, params: {} })
    : null;
  // The event's mode can only narrow the action type's: an enforce event on a shadow action stays shadow.
  const mode = event.mode === "enforce" && actionType?.default_mode === "enforce" ? "enforce" : "shadow";
  return deps.audit.record({
    actor: { oid: "system", name: "operations core" },
    action: "ops.event_processed",
    target: event.resource_ref,
    outcome: "succeeded",
    request_id: requestId,
    details: {
      event_id: event.event_id,
      event_type: event.event_type,
      tier: verdict.tier,
      decision: verdict.decision,
      severity: verdict.severity,
      rule_ids: verdict.rule_ids,
      proposed_action: verdict.proposed_action ?? null,
      verifier_report,
      mode,
    },
  });
}
