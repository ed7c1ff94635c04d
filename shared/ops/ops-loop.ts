import type { ActionTypeCatalog } from "./actions/action-types.js";
import type { AuditLog } from "./audit.js";
import { processEvent } from "./event-processor.js";
import type { EventLog } from "./events.js";
import {
  correlateIncidents,
  type Incident,
  publishSeverityChanges,
  SEVERITY_CHANGED,
  type SeverityChanged,
} from "./incidents/incidents.js";
import type { RuleCatalog } from "./rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "./verifier/verifier.js";
import { isStatus } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";

export const PROCESSED_EVENTS_TABLE = "opsprocessed";

export interface OpsLoopDependencies {
  events: EventLog;
  audit: AuditLog;
  rules: RuleCatalog;
  actions: ActionTypeCatalog;
  verify(action: ProposedAction): Promise<VerifierReport>;
  /** Where processing claims live (one row per processed event). */
  claims: TableSource;
  incidentWindowMs: number;
  /**
   * Told of the correlated incidents and the severity rises after each pass (the notification
   * emitters: incident-open email, `severity_changed` A2 notice). Must be idempotent: a later pass
   * or another host reports the same incidents again. Its failure does not fail the pass.
   */
  onIncidents?: (incidents: readonly Incident[], severityChanges: readonly SeverityChanged[]) => Promise<void>;
  /** Where a failed `onIncidents` is reported. */
  onIncidentsError?: (error: unknown) => void;
  now?: () => Date;
}

/**
 * One pass of the operations core over recent events: each event not yet processed is claimed
 * (once across hosts) and processed (T0, the verifier, the `ops.event_processed` audit entry), and
 * incidents are correlated so each severity rise is published once. Run by a timer; safe to run
 * on two hosts at once.
 */
export function createOpsLoop(deps: OpsLoopDependencies) {
  const claims = tableOpener(deps.claims, PROCESSED_EVENTS_TABLE);
  const now = deps.now ?? (() => new Date());
  return {
    async runOnce(
      requestId: string,
      lookbackMs = 24 * 3_600_000,
    ): Promise<{ processed: string[]; severity_changes: number }> {
      const since = new Date(now().getTime() - lookbackMs);
      const events = await deps.events.list({ since, limit: 1000 });
      const processed: string[] = [];
      for (const event of [...events].reverse()) {
        if (event.event_type === SEVERITY_CHANGED) continue;
        try {
          // Claim first: a crash after the claim leaves one event unprocessed rather than processed twice.
          await (await claims()).createEntity({
            partitionKey: "e",
            rowKey: event.event_id,
            claimed_at: now().toISOString(),
          });
        } catch (error) {
          if (isStatus(error, 409)) continue;
          throw error;
        }
        await processEvent(deps, event, requestId);
        processed.push(event.event_id);
      }
      const { incidents, severityChanges } = correlateIncidents(events, deps.rules, {
        windowMs: deps.incidentWindowMs,
        now: now(),
      });
      await publishSeverityChanges(deps.events, severityChanges);
      if (deps.onIncidents)
        await deps.onIncidents(incidents, severityChanges).catch((error: unknown) => deps.onIncidentsError?.(error));
      return { processed, severity_changes: severityChanges.length };
    },
  };
}
