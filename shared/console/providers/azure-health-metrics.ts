import type { ResourceGraphClient, ResourceGraphClientOptionalParams } from "@azure/arm-resourcegraph";
import type { TokenCredential } from "@azure/identity";
import type { MetricsClient, MetricsClientOptions } from "@azure/monitor-query-metrics";
import type { HealthMetricSet } from "./health-metrics.js";

/** One resource × metric reading of the representative set. */
export interface MetricObservation {
  name: string;
  type: string;
  resource_group: string;
  metric: string;
  aggregation: string;
  unit: string;
  /** The latest value in the window; null when Azure Monitor had no data (or refused the metric). */
  value: number | null;
  /** Azure Monitor's error code when it refused the metric for this resource. */
  error?: string;
}

export interface HealthMetricsReader {
  read(): Promise<{ observations: MetricObservation[]; truncated: boolean; observed_at: string }>;
}

/** Azure Monitor's metrics batch takes at most this many resources per call. */
const BATCH = 50;
/** At most this many resources of the set's types are read. */
const MAX_RESOURCES = 200;

/** The server-owned Resource Graph query listing the resources the metric set applies to; its types come from the validated set. */
export function healthMetricResourcesQuery(set: HealthMetricSet): string {
  const types = [...new Set(set.metrics.map((m) => `'${m.resource_type.toLowerCase()}'`))].join(", ");
  return `Resources | where type in~ (${types}) | project id, name, type = tolower(type), resourceGroup | order by id asc`;
}

type Row = { id?: unknown; name?: unknown; type?: unknown; resourceGroup?: unknown };

/**
 * Reads the representative metric set (config `health-metrics.json`) for the configured scope:
 * Resource Graph lists the scope's resources of the set's types, the metrics SDK reads each metric
 * for them in batches over the set's window. Both SDKs load on first use.
 */
export function createAzureHealthMetrics(options: {
  subscriptionId: string;
  resourceGroups?: readonly string[];
  endpoint: string;
  credential: TokenCredential;
  set: HealthMetricSet;
  graphClientOptions?: ResourceGraphClientOptionalParams;
  metricsClientOptions?: MetricsClientOptions;
  now?: () => Date;
}): HealthMetricsReader {
  let graph: Promise<ResourceGraphClient> | undefined;
  let metrics: Promise<MetricsClient> | undefined;
  const now = options.now ?? (() => new Date());
  const groups = new Set((options.resourceGroups ?? []).map((g) => g.toLowerCase()));
  const text = (v: unknown) => (typeof v === "string" ? v : "");
  return {
    async read() {
      graph ??= import("@azure/arm-resourcegraph").then(
        ({ ResourceGraphClient }) => new ResourceGraphClient(options.credential, options.graphClientOptions),
      );
      metrics ??= import("@azure/monitor-query-metrics").then(
        ({ MetricsClient }) => new MetricsClient(options.endpoint, options.credential, options.metricsClientOptions),
      );
      const page = await (await graph).resources({
        query: healthMetricResourcesQuery(options.set),
        subscriptions: [options.subscriptionId],
        options: { resultFormat: "objectArray", top: MAX_RESOURCES },
      });
      const rows = ((page.data as Row[] | undefined) ?? []).filter(
        (r) => groups.size === 0 || groups.has(text(r.resourceGroup).toLowerCase()),
      );
      const truncated = page.resultTruncated === "true" || page.skipToken !== undefined;
      const end = now();
      const start = new Date(end.getTime() - options.set.window_minutes * 60_000);
      const observations: MetricObservation[] = [];
      let batches = 0;
      let failed = 0;
      for (const spec of options.set.metrics) {
        const targets = rows.filter((r) => text(r.type) === spec.resource_type.toLowerCase());
        for (let i = 0; i < targets.length; i += BATCH) {
          const batch = targets.slice(i, i + BATCH);
          const aggregation = spec.aggregation.toLowerCase() as "average" | "total" | "maximum" | "minimum" | "count";
          batches += 1;
          let results: Awaited<ReturnType<MetricsClient["queryResources"]>>;
          try {
            results = await (await metrics).queryResources(
              batch.map((r) => text(r.id)),
              [spec.metric],
              spec.resource_type,
              { startTime: start, endTime: end, aggregation },
            );
          } catch {
            // One refused batch (a resource outside the endpoint's region, say) is a gap for its
            // resources, not for the whole set.
            failed += 1;
            for (const row of batch)
              observations.push({
                name: text(row.name),
                type: text(row.type),
                resource_group: text(row.resourceGroup),
                metric: spec.metric,
                aggregation: spec.aggregation,
                unit: "Unspecified",
                value: null,
                error: "QueryFailed",
              });
            continue;
          }
          batch.forEach((row, n) => {
            const metric =
              results.find((r) => r.resourceId?.toLowerCase() === text(row.id).toLowerCase())?.metrics[0] ??
              results[n]?.metrics[0];
            const points = metric?.timeseries[0]?.data ?? [];
            const latest = points
              .map((p) => p[aggregation])
              .filter((v): v is number => typeof v === "number")
              .at(-1);
            observations.push({
              name: text(row.name),
              type: text(row.type),
              resource_group: text(row.resourceGroup),
              metric: spec.metric,
              aggregation: spec.aggregation,
              unit: String(metric?.unit ?? "Unspecified"),
              value: latest ?? null,
              ...(metric?.errorCode ? { error: metric.errorCode } : !metric ? { error: "NoResult" } : {}),
            });
          });
        }
      }
      if (batches > 0 && failed === batches) throw new Error("every Azure Monitor metrics request failed");
      return { observations, truncated, observed_at: end.toISOString() };
    },
  };
}
