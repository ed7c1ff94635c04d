import type { TokenCredential } from "@azure/identity";
import type { MetricsClient, MetricsClientOptions } from "@azure/monitor-query-metrics";
import { ToolError } from "../tools/tool.js";
import type { MetricProvider } from "./providers.js";

/**
 * `query_metric`'s provider over Azure Monitor metrics for the one server-configured resource
 * (the cluster, say), with the metrics SDK loaded on first use. The caller picks the metric, never
 * the resource.
 */
export function createAzureMetricsProvider(options: {
  endpoint: string;
  resourceId: string;
  credential: TokenCredential;
  clientOptions?: MetricsClientOptions;
}): MetricProvider {
  let client: Promise<MetricsClient> | undefined;
  return {
    async query(request) {
      client ??= import("@azure/monitor-query-metrics").then(
        ({ MetricsClient }) => new MetricsClient(options.endpoint, options.credential, options.clientOptions),
      );
      const aggregation = request.aggregation.toLowerCase() as "average" | "total" | "maximum" | "minimum" | "count";
      const [result] = await (await client).queryResources([options.resourceId], [request.metric], request.namespace, {
        startTime: request.window.start,
        endTime: request.window.end,
        aggregation,
      });
      const metric = result?.metrics[0];
      if (!metric || metric.errorCode)
        throw new ToolError("unavailable", `the metric ${request.metric} is not available for the configured resource`);
      const series = metric.timeseries[0]?.data ?? [];
      return {
        unit: String(metric.unit),
        points: series.map((p) => ({
          at: p.timeStamp.toISOString(),
          value: typeof p[aggregation] === "number" ? (p[aggregation] as number) : null,
        })),
      };
    },
  };
}
