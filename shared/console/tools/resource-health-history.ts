import type { ResourceHealthEntry, ResourceHealthProvider } from "../providers/providers.js";
import { MAX_QUERY_WINDOW_MS, parseWindowMs } from "./provider-tools.js";
import { requireProvider, ToolError } from "./tool.js";

/** At most this many entries are returned (the earliest first); more sets `truncated`. */
export const HEALTH_HISTORY_ENTRY_LIMIT = 200;

const KIND_ORDER: Record<ResourceHealthEntry["kind"], number> = { availability_state: 0, annotation: 1 };

/**
 * Query rule 8: one resource's health history over at most 24 hours (a longer interval is clamped
 * and the answer says so), availability-state transitions and annotations merged in time order,
 * with customer-initiated, status-only and platform-initiated counts. No history is `unavailable`:
 * the current state is never given in its place.
 */
export async function resourceHealthHistory(
  provider: ResourceHealthProvider | undefined,
  request: { resource: string | undefined; window: string | undefined; now: Date },
) {
  const health = requireProvider(provider, "the resource health provider");
  if (!request.resource)
    throw new ToolError(
      "invalid_arguments",
      "Which resource's health history? Give filter=<name> or filter=<resource group>/<name>.",
      { clarifying_question: true },
    );
  const parsed = parseWindowMs(request.window);
  if (request.window !== undefined && !parsed)
    throw new ToolError("invalid_arguments", "the window must be minutes, hours or days, such as 6h or 7 days");
  const window = parsed ?? { ms: MAX_QUERY_WINDOW_MS, clamped: false };
  const end = request.now;
  const start = new Date(end.getTime() - window.ms);
  const windowAnswer = {
    ...(request.window !== undefined ? { requested: request.window } : {}),
    start: start.toISOString(),
    end: end.toISOString(),
    hours: window.ms / 3_600_000,
    clamped: window.clamped,
    ...(window.clamped ? { note: "the interval was clamped to 24 hours" } : {}),
  };
  const history = await health.history(request.resource, { start, end });
  if (history.entries.length === 0) {
    throw new ToolError(
      "unavailable",
      `Resource Health has no history for ${history.resource.name} in this window; the current state is not given in its place`,
      { query_kind: "resource_health_history", resource: history.resource, window: windowAnswer, history: "none" },
    );
  }
  const merged = [...history.entries].sort(
    (a, b) => Date.parse(a.at) - Date.parse(b.at) || KIND_ORDER[a.kind] - KIND_ORDER[b.kind],
  );
  const counts = { customer_initiated: 0, status_only: 0, platform_initiated: 0 };
  for (const e of merged) counts[e.initiator] += 1;
  return {
    data: {
      query_kind: "resource_health_history",
      resource: history.resource,
      window: windowAnswer,
      entries: merged.slice(0, HEALTH_HISTORY_ENTRY_LIMIT),
      entry_total: merged.length,
      counts,
      kinds: {
        availability_state: merged.filter((e) => e.kind === "availability_state").length,
        annotation: merged.filter((e) => e.kind === "annotation").length,
      },
      truncated: history.truncated || merged.length > HEALTH_HISTORY_ENTRY_LIMIT,
      provenance: "Azure Resource Health",
      observed_at: history.observed_at,
    },
    evidence_ref: `resource_health:${history.resource.resource_group}/${history.resource.name}@${history.observed_at}`,
  };
}
