import { z } from "zod";
import { catalogPath } from "../../ops/actions/action-types.js";
import { loadCatalogFile } from "../../ops/catalog/json-catalog.js";

/** An ARM resource type (`Namespace.Provider/type`); it is written into a server-owned query, so nothing else is accepted. */
const resourceType = z
  .string()
  .regex(
    /^[A-Za-z]+(\.[A-Za-z]+)+\/[A-Za-z]+$/,
    "must be an ARM resource type such as Microsoft.Storage/storageAccounts",
  );

const healthMetricSchema = z.strictObject({
  resource_type: resourceType,
  metric: z.string().regex(/^[\w./ -]{1,200}$/),
  aggregation: z.enum(["Average", "Total", "Maximum", "Minimum", "Count"]),
  /** A value above this is a `warning` finding. */
  warn_above: z.number().optional(),
  /** A value below this is a `warning` finding. */
  warn_below: z.number().optional(),
  /** Why the metric is in the set: shown beside a finding. */
  why: z.string().min(1).max(200),
});

export const healthMetricSetSchema = z.strictObject({
  version: z.literal(1),
  /** How far back each metric is read (its latest value in this window counts). */
  window_minutes: z.number().int().min(5).max(1440),
  metrics: z.array(healthMetricSchema).min(1).max(20),
});

/** The representative metrics `query_subscription_health` reads (`config/health-metrics.json`). */
export type HealthMetricSet = z.output<typeof healthMetricSetSchema>;

/** Loads and validates the metric set; a bad file throws naming the file and line. */
export function loadHealthMetricSet(file = catalogPath("health-metrics.json")): HealthMetricSet {
  return loadCatalogFile(file, healthMetricSetSchema);
}
