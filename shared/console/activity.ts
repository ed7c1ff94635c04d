import type { AuditEntry, AuditLog } from "../ops/audit.js";

/** The activity kinds `/agents/activity` reports, and the tools whose calls make them. */
const KIND_OF_TOOL: Record<string, "inventory_scan" | "ontology_conversion" | "current_state_read"> = {
  query_inventory: "inventory_scan",
  explore_catalog: "ontology_conversion",
  query_subscription_scope: "current_state_read",
  query_subscription_health: "current_state_read",
  query_detection_readiness: "current_state_read",
  correlate_incident: "current_state_read",
};

/** At most this many activities are returned. */
export const ACTIVITY_LIMIT = 50;

/** One observed activity (spec §2.4 Activity entry): queries carry no argv or exit code. */
export interface ActivityEntry {
  kind: "observed_execution";
  activity: "inventory_scan" | "ontology_conversion" | "current_state_read";
  input_kind: "query";
  tool: string;
  status: string;
  authority: string;
  started_at: string;
  audit_id: string;
}

/**
 * The bounded history of inventory scans, ontology conversions and current-state reads, read from
 * the durable audit log (so it survives restarts), newest first.
 */
export async function agentActivity(audit: AuditLog): Promise<{ activities: ActivityEntry[]; limit: number }> {
  const entries = await audit.list({ action: "console.tool_call", limit: 1000 });
  const activities: ActivityEntry[] = [];
  for (const e of entries) {
    const activity = KIND_OF_TOOL[e.target];
    if (!activity) continue;
    activities.push({
      kind: "observed_execution",
      activity,
      input_kind: "query",
      tool: e.target,
      status: String(e.details.status ?? e.outcome),
      authority: "read",
      started_at: e.at,
      audit_id: e.audit_id,
    });
    if (activities.length >= ACTIVITY_LIMIT) break;
  }
  return { activities, limit: ACTIVITY_LIMIT };
}

/** The runtime state of one agent activity as `/agents/stream` reports it. */
export type AgentState = "completed" | "failed" | "refused";

/**
 * One frame of `GET /api/agents/stream` (spec §4, §6 item 1): the `/agents/activity` entry of one
 * audited agent run, plus its runtime state, its time and whether it is catch-up. Read
 * investigations appear as `read_investigation` with their execution mode.
 */
export interface AgentFrame {
  kind: "observed_execution";
  activity: ActivityEntry["activity"] | "read_investigation";
  input_kind: "query";
  tool: string;
  state: AgentState;
  authority: "read";
  at: string;
  audit_id: string;
  replay: boolean;
  mode?: string;
  steps?: number;
}

const STATE_OF: Record<AuditEntry["outcome"], AgentState> = {
  succeeded: "completed",
  failed: "failed",
  denied: "refused",
};

/** The agent frames one audit entry makes (none for entries that are not agent runs). */
export function agentFramesOf(entry: AuditEntry, replay: boolean): AgentFrame[] {
  const base = {
    kind: "observed_execution" as const,
    input_kind: "query" as const,
    state: STATE_OF[entry.outcome],
    authority: "read" as const,
    at: entry.at,
    audit_id: entry.audit_id,
    replay,
  };
  if (entry.action === "console.tool_call") {
    const activity = KIND_OF_TOOL[entry.target];
    return activity ? [{ ...base, activity, tool: entry.target }] : [];
  }
  if (entry.action === "console.read_investigation") {
    const mode = typeof entry.details.mode === "string" ? entry.details.mode : undefined;
    const steps = Array.isArray(entry.details.steps) ? entry.details.steps.length : undefined;
    return [
      {
        ...base,
        activity: "read_investigation",
        tool: "read_investigation",
        ...(mode ? { mode } : {}),
        ...(steps !== undefined ? { steps } : {}),
      },
    ];
  }
  return [];
}
