import { createHash } from "node:crypto";
import type { Incident, SeverityChanged } from "../../ops/incidents/incidents.js";
import { BATCHABLE_SEVERITIES } from "../digests/digests.js";
import type { Notifier } from "../types.js";

/** The fixed audit id of an incident's opening notice: the same incident always has the same id. */
export function incidentOpenAuditId(incidentId: string): string {
  return `inc-open-${createHash("sha256").update(incidentId).digest("hex").slice(0, 24)}`;
}

/**
 * The operations core's notices (spec §2.4 incident-open email, §6 item 3 `severity_changed`):
 * each open incident gets one incident-open message (route `incident_open` when the matrix has it),
 * each committed severity rise one A2 notice. Both carry fixed audit ids, so the router's
 * idempotent send drops the repeats of later passes, other hosts and start-up replay.
 *
 * What may wait for a digest (`batchable`, honoured where the route names a `low_severity_digest`):
 * the opening notice of an incident whose severity is still low or info — a pre-flight refusal,
 * a recorded token rotation — goes into the day's notices digest instead of a message of its own.
 * Once the incident rises, a later pass finds it no longer batchable and the opening notice goes
 * out at once (it was never sent on its own, so the router sends it now). A `severity_changed`
 * notice is never batched: spec §6 item 3 has it delivered immediately.
 */
export function createIncidentNotices(deps: { notifier: Notifier; incidentOpenRoute?: string }) {
  return async (incidents: readonly Incident[], changes: readonly SeverityChanged[]): Promise<void> => {
    for (const incident of incidents) {
      if (incident.state !== "open") continue;
      const audit_id = incidentOpenAuditId(incident.incident_id);
      const opening = incident.severity_history[0]?.severity ?? incident.severity;
      await deps.notifier.send({
        category: "A2",
        template_key: "incident.open",
        recipient: "operational",
        title: `Incident ${incident.incident_id} opened`,
        body_markdown: `Incident ${incident.incident_id} opened at ${incident.opened_at} with severity ${opening}.`,
        correlation_id: incident.incident_id,
        audit_id,
        idempotency_key: `incident.open/${incident.incident_id}`,
        severity: opening,
        batchable: BATCHABLE_SEVERITIES.includes(incident.severity),
        ...(deps.incidentOpenRoute ? { route: deps.incidentOpenRoute } : {}),
        params: {
          incident_id: incident.incident_id,
          status: incident.state,
          severity: opening,
          opened_at: incident.opened_at,
          member_count: incident.member_event_ids.length,
          assignment: "unassigned",
          audit_id,
        },
      });
    }
    for (const change of changes)
      await deps.notifier.send({
        category: "A2",
        template_key: "incident.severity_changed",
        recipient: "operational",
        title: `Incident ${change.incident_id}: severity ${change.from} → ${change.to}`,
        body_markdown: `The committed severity of incident ${change.incident_id} rose from ${change.from} to ${change.to} at ${change.at}.`,
        params: { incident_id: change.incident_id, from: change.from, to: change.to, at: change.at },
        correlation_id: change.incident_id,
        audit_id: change.audit_id,
        idempotency_key: `incident.severity_changed/${change.audit_id}`,
        severity: change.to,
        batchable: false,
      });
  };
}
