import type { ToolResult } from "../../console/tools/tool.js";
import { scanSecrets } from "../../ops/secret-scanner.js";
import { ACTIVITY_SEQUENCE_BUDGET, type ChannelActivity } from "./types.js";

const SUMMARY_LIMIT = 500;

/**
 * The activity sequence of a coordinator reply: one observed query per tool result (spec §2.4
 * rule 1: canonical server queries are `query`, no argv or exit code is made up), every field
 * through the secret scanner (rule 3), within the 48,000-character budget (rule 4). Entries past
 * the budget are dropped and the reply says so (`[CHANNEL OUTPUT TRUNCATED]`, rule 5).
 */
export function activitiesOf(
  results: readonly ToolResult[],
  at: string,
): { activities: ChannelActivity[]; clipped: boolean } {
  const activities: ChannelActivity[] = [];
  let used = 0;
  for (const result of results) {
    const summary =
      result.status === "ok"
        ? `ok; evidence ${result.evidence_ref}`
        : `error ${result.error.type}: ${result.error.message}`;
    const entry: ChannelActivity = {
      kind: "observed_execution",
      input_kind: "query",
      command: scanSecrets(result.tool).text,
      result_summary: scanSecrets(summary).text.slice(0, SUMMARY_LIMIT),
      status: result.status,
      authority: "read",
      started_at: at,
    };
    const size = JSON.stringify(entry).length;
    if (used + size > ACTIVITY_SEQUENCE_BUDGET) return { activities, clipped: true };
    used += size;
    activities.push(entry);
  }
  return { activities, clipped: false };
}
