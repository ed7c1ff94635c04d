import { createHash } from "node:crypto";
import type { EventLog, OpsEvent } from "../events.js";
import { type RuleCatalog, SEVERITIES, type Severity, evaluateRules } from "../rules/rule-catalog.js";

/** Incident states: `open` while signals keep arriving, `quiet` once the window passed without one. */
export type IncidentState = "open" | "quiet";

/** Events on one resource of one correlation key, grouped while each follows the last within the window. */
export interface Incident {
  /** Deterministic: derived from the first member's event id, so a recomputation names it the same. */
  incident_id: string;
  resource_ref: string;
  correlation_key: string;
  state: IncidentState;
  /** Monotonic: the highest verdict severity any member reached; it never falls. */
  severity: Severity;
  opened_at: string;
  last_event_at: string;
  member_event_ids: string[];
  rule_ids: string[];
  /** Each rise of the committed severity, in order (the first entry is the opening severity). */
  severity_history: { severity: Severity; at: string; event_id: string }[];
}

/** The `severity_changed` notice of one rise: its fixed audit id deduplicates delivery and replay. */
export interface SeverityChanged {
  incident_id: string;
  from: Severity;
  to: Severity;
  at: string;
  audit_id: string;
}

/** The event type of a severity rise (spec §6.3). */
export const SEVERITY_CHANGED = "incident.severity_changed";

const rank = (s: Severity) => SEVERITIES.indexOf(s);

/** The incident id for the group that starts with `firstEventId`. */
export function incidentIdOf(firstEventId: string): string {
  return `INC-${createHash("sha256").update(firstEventId).digest("hex").slice(0, 12)}`;
}

/** The fixed audit id of one severity rise (spec §6.3): the same rise always has the same id. */
export function severityChangeAuditId(incidentId: string, to: Severity): string {
  return `sev-${createHash("sha256").update(`${incidentId}\n${to}`).digest("hex").slice(0, 24)}`;
}

/**
 * Correlates events into incidents: same `resource_ref`, same correlation key (the rule's
 * resource type, so one resource's different signals group together) and each event within
 * `windowMs` of the previous member. A pure function over the durable event log, so incidents are
 * as durable as the events and recomputing them gives the same ids, severities and notices.
 */
export function correlateIncidents(
  events: readonly OpsEvent[],
  rules: RuleCatalog,
  options: { windowMs: number; now: Date },
): { incidents: Incident[]; severityChanges: SeverityChanged[] } {
  const ordered = [...events].sort(
    (a, b) => a.detected_at.localeCompare(b.detected_at) || a.event_id.localeCompare(b.event_id),
  );
  const open = new Map<string, Incident>();
  const incidents: Incident[] = [];
  const severityChanges: SeverityChanged[] = [];
  for (const event of ordered) {
    // The notices this module publishes are about incidents, not members of them.
    if (event.event_type === SEVERITY_CHANGED) continue;
    const verdict = evaluateRules(rules, event);
    const key = `${event.resource_ref}\n${event.resource_ref.split("/", 1)[0]}`;
    const at = Date.parse(event.detected_at);
    let incident = open.get(key);
    if (incident && at - Date.parse(incident.last_event_at) > options.windowMs) {
      incident.state = "quiet";
      incident = undefined;
    }
    if (!incident) {
      incident = {
        incident_id: incidentIdOf(event.event_id),
        resource_ref: event.resource_ref,
        correlation_key: event.resource_ref.split("/", 1)[0] ?? event.resource_ref,
        state: "open",
        severity: verdict.severity,
        opened_at: event.detected_at,
        last_event_at: event.detected_at,
        member_event_ids: [],
        rule_ids: [],
        severity_history: [{ severity: verdict.severity, at: event.detected_at, event_id: event.event_id }],
      };
      open.set(key, incident);
      incidents.push(incident);
    } else if (rank(verdict.severity) > rank(incident.severity)) {
      severityChanges.push({
        incident_id: incident.incident_id,
        from: incident.severity,
        to: verdict.severity,
        at: event.detected_at,
        audit_id: severityChangeAuditId(incident.incident_id, verdict.severity),
      });
      incident.severity = verdict.severity;
      incident.severity_history.push({ severity: verdict.severity, at: event.detected_at, event_id: event.event_id });
    }
    incident.last_event_at = event.detected_at;
    incident.member_event_ids.push(event.event_id);
    for (const id of verdict.rule_ids) if (!incident.rule_ids.includes(id)) incident.rule_ids.push(id);
  }
  for (const incident of open.values())
    if (options.now.getTime() - Date.parse(incident.last_event_at) > options.windowMs) incident.state = "quiet";
  return { incidents, severityChanges };
}

/**
 * Publishes each rise as a `severity_changed` event keyed by its fixed audit id, so a rise found
 * again (a recomputation, a restart replaying the log) is recorded once.
 */
export async function publishSeverityChanges(
  events: EventLog,
  changes: readonly SeverityChanged[],
): Promise<OpsEvent[]> {
  const out: OpsEvent[] = [];
  for (const change of changes) {
    out.push(
      await events.record({
        idempotency_key: change.audit_id,
        source: "ops.incidents",
        event_type: SEVERITY_CHANGED,
        detected_at: change.at,
        correlation_id: change.incident_id,
        resource_ref: `incident/${change.incident_id}`,
        payload: { ...change, category: "A2" },
      }),
    );
  }
  return out;
}
