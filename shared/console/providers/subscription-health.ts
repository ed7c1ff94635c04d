import { INVENTORY_MAX_AGE_MS } from "../tools/inventory-tool.js";
import { ToolError } from "../tools/tool.js";
import type { HealthMetricsReader } from "./azure-health-metrics.js";
import type { HealthMetricSet } from "./health-metrics.js";
import type {
  HealthCause,
  HealthSource,
  InventoryProvider,
  ResourceHealthProvider,
  SubscriptionHealth,
} from "./providers.js";

/** At most this many findings are returned, most severe first; more sets `truncated`. */
export const HEALTH_FINDINGS_LIMIT = 40;
/** At most this many coverage gaps are listed; the rest are counted in a last entry. */
export const HEALTH_GAPS_LIMIT = 40;
/** Provisioning states Resource Graph reports that are findings. */
const BAD_PROVISIONING = new Set(["failed", "canceled"]);
const SEVERITY: Record<string, number> = { unavailable: 0, failed: 1, degraded: 2, warning: 3, unknown: 4 };

type Finding = SubscriptionHealth["findings"][number];

/**
 * `query_subscription_health` over the three sources of C-093 for the server-configured scope:
 * the inventory (Resource Graph: failed or canceled provisioning), Resource Health (every resource
 * not Available, with who caused it) and the representative metrics (a value past its threshold).
 * Each source is read independently; one that fails or is not configured is a named coverage gap
 * with no freshness, never silently skipped. With no source answering the result is `unavailable`.
 */
export function createSubscriptionHealth(sources: {
  inventory?: InventoryProvider;
  resourceHealth?: ResourceHealthProvider;
  metrics?: { reader: HealthMetricsReader; set: HealthMetricSet };
  resourceGroups?: readonly string[];
}): () => Promise<SubscriptionHealth> {
  const groups = new Set((sources.resourceGroups ?? []).map((g) => g.toLowerCase()));
  const inScope = (group: string) => groups.size === 0 || groups.has(group.toLowerCase());

  return async function health() {
    const findings: Finding[] = [];
    const gaps: string[] = [];
    const read: HealthSource[] = [];
    const [inventory, resourceHealth, metrics] = await Promise.allSettled([
      sources.inventory
        ? sources.inventory.snapshot({ maxAgeMs: INVENTORY_MAX_AGE_MS })
        : Promise.reject(notConfigured),
      sources.resourceHealth ? sources.resourceHealth.current() : Promise.reject(notConfigured),
      sources.metrics ? sources.metrics.reader.read() : Promise.reject(notConfigured),
    ]);

    const gap = (source: HealthSource["source"], outcome: PromiseRejectedResult) => {
      const status = outcome.reason === notConfigured ? "not_configured" : "failed";
      read.push({ source, status, checked: 0, truncated: false });
      gaps.push(`${source}: ${status === "not_configured" ? "not configured" : "the source did not answer"}`);
    };

    if (inventory.status === "fulfilled") {
      const resources = inventory.value.records.filter((r) => r.kind === "resource" && inScope(r.resource_group));
      for (const r of resources) {
        if (BAD_PROVISIONING.has(r.state.toLowerCase()))
          findings.push({
            source: "resource_graph",
            status: "failed",
            summary: `provisioning state ${r.state}`,
            resource: r.name,
            resource_type: r.type,
            resource_group: r.resource_group,
            cause: "unknown",
          });
      }
      read.push({
        source: "resource_graph",
        status: "ok",
        observed_at: inventory.value.observed_at,
        checked: resources.length,
        truncated: inventory.value.truncated,
      });
      for (const g of inventory.value.coverage_gaps) gaps.push(`resource_graph: ${g}`);
    } else gap("resource_graph", inventory);

    if (resourceHealth.status === "fulfilled") {
      const statuses = resourceHealth.value.statuses.filter((s) => inScope(s.resource_group));
      for (const s of statuses) {
        if (s.state === "Available") continue;
        findings.push({
          source: "resource_health",
          status: s.state.toLowerCase(),
          summary: s.summary || s.state,
          resource: s.name,
          resource_type: s.type,
          resource_group: s.resource_group,
          cause: s.cause,
        });
      }
      read.push({
        source: "resource_health",
        status: "ok",
        observed_at: resourceHealth.value.observed_at,
        checked: statuses.length,
        truncated: resourceHealth.value.truncated,
      });
      if (resourceHealth.value.unreadable)
        gaps.push(
          `resource_health: ${resourceHealth.value.unreadable} statuses name no resource this console can read`,
        );
    } else gap("resource_health", resourceHealth);

    if (metrics.status === "fulfilled" && sources.metrics) {
      const set = sources.metrics.set;
      for (const o of metrics.value.observations) {
        const spec = set.metrics.find((m) => m.metric === o.metric && m.resource_type.toLowerCase() === o.type);
        if (o.value === null) {
          gaps.push(`metrics: ${o.metric} on ${o.name} returned no data${o.error ? ` (${o.error})` : ""}`);
          continue;
        }
        const above = spec?.warn_above !== undefined && o.value > spec.warn_above;
        const below = spec?.warn_below !== undefined && o.value < spec.warn_below;
        if (above || below) {
          const limit = above ? `above ${spec?.warn_above}` : `below ${spec?.warn_below}`;
          findings.push({
            source: "metrics",
            status: "warning",
            summary: `${o.metric} ${o.aggregation} ${o.value} ${o.unit} ${limit} over the last ${set.window_minutes} minutes (${spec?.why})`,
            resource: o.name,
            resource_type: o.type,
            resource_group: o.resource_group,
            cause: "unknown",
          });
        }
      }
      read.push({
        source: "metrics",
        status: "ok",
        observed_at: metrics.value.observed_at,
        checked: metrics.value.observations.length,
        truncated: metrics.value.truncated,
      });
    } else if (metrics.status === "rejected") gap("metrics", metrics);

    const answered = read.filter((s) => s.observed_at !== undefined);
    if (answered.length === 0)
      throw new ToolError("unavailable", "no source of subscription health answered", { coverage_gaps: gaps });

    findings.sort(
      (a, b) =>
        (SEVERITY[a.status] ?? 5) - (SEVERITY[b.status] ?? 5) ||
        (a.resource ?? "").localeCompare(b.resource ?? "") ||
        a.source.localeCompare(b.source),
    );
    const cause_classification: Record<HealthCause, number> = { platform: 0, customer: 0, unknown: 0 };
    for (const f of findings) cause_classification[f.cause ?? "unknown"] += 1;
    const observed_at = answered.map((s) => s.observed_at as string).sort()[0] as string;
    return {
      findings: findings.slice(0, HEALTH_FINDINGS_LIMIT),
      findings_total: findings.length,
      cause_classification,
      sources: read,
      coverage_gaps:
        gaps.length > HEALTH_GAPS_LIMIT
          ? [...gaps.slice(0, HEALTH_GAPS_LIMIT), `… and ${gaps.length - HEALTH_GAPS_LIMIT} more coverage gaps`]
          : gaps,
      truncated:
        findings.length > HEALTH_FINDINGS_LIMIT || gaps.length > HEALTH_GAPS_LIMIT || read.some((s) => s.truncated),
      observed_at,
    };
  };
}

/** The rejection of a source this deployment has not configured (told apart from a failure). */
const notConfigured = new Error("not configured");
