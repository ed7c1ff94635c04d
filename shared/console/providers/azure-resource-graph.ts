import { createHash } from "node:crypto";
import type { ResourceGraphClient, ResourceGraphClientOptionalParams } from "@azure/arm-resourcegraph";
import type { TokenCredential } from "@azure/identity";
import type { InventoryProvider, InventoryRecord, InventorySnapshot } from "./providers.js";

/** The fixed, server-owned Resource Graph queries: prompt text never reaches them. */
export const RESOURCE_GRAPH_QUERIES = {
  resources:
    "Resources | project name, type, location, resourceGroup, state = tostring(coalesce(properties.provisioningState, properties.status, '')), shutdown_time = tostring(properties.dailyRecurrence.time), shutdown_zone = tostring(properties.timeZoneId), shutdown_status = tostring(properties.status) | order by name asc",
  resourceGroups:
    "ResourceContainers | where type =~ 'microsoft.resources/subscriptions/resourcegroups' | project name, type, location, resourceGroup = name | order by name asc",
} as const;

/** Resource Graph pages hold at most 1000 records; the snapshot reads at most this many. */
const PAGE = 1000;
const MAX_RECORDS = 5000;

/** Azure's auto-shutdown schedules, reported under the spec's resource type. */
const SHUTDOWN_TYPE = "microsoft.devtestlab/schedules";

type Row = Record<string, unknown>;

/**
 * `query_inventory`'s provider over Azure Resource Graph for the server-configured subscription,
 * with the ARM SDK loaded on first use. Each snapshot reads fresh (Resource Graph is itself a
 * cache of ARM, so its freshness is the observation time), pages through results up to a bound and
 * says when it stopped early (`truncated`).
 */
export function createResourceGraphInventoryProvider(options: {
  subscriptionId: string;
  credential: TokenCredential;
  clientOptions?: ResourceGraphClientOptionalParams;
  now?: () => Date;
}): InventoryProvider {
  let client: Promise<ResourceGraphClient> | undefined;
  const now = options.now ?? (() => new Date());

  async function all(query: string): Promise<{ rows: Row[]; truncated: boolean }> {
    client ??= import("@azure/arm-resourcegraph").then(
      ({ ResourceGraphClient }) => new ResourceGraphClient(options.credential, options.clientOptions),
    );
    const rows: Row[] = [];
    let skipToken: string | undefined;
    do {
      const page = await (await client).resources({
        query,
        subscriptions: [options.subscriptionId],
        options: { resultFormat: "objectArray", top: PAGE, ...(skipToken ? { skipToken } : {}) },
      });
      rows.push(...((page.data as Row[] | undefined) ?? []));
      if (page.resultTruncated === "true") return { rows, truncated: true };
      skipToken = page.skipToken;
    } while (skipToken && rows.length < MAX_RECORDS);
    return { rows, truncated: skipToken !== undefined };
  }

  const text = (v: unknown) => (typeof v === "string" ? v : "");

  return {
    async snapshot(): Promise<InventorySnapshot> {
      const [resources, groups] = await Promise.all([
        all(RESOURCE_GRAPH_QUERIES.resources),
        all(RESOURCE_GRAPH_QUERIES.resourceGroups),
      ]);
      const records: InventoryRecord[] = [];
      for (const r of resources.rows) {
        const type = text(r.type).toLowerCase();
        const record: InventoryRecord = {
          name: text(r.name),
          type,
          location: text(r.location),
          resource_group: text(r.resourceGroup),
          state: text(r.state),
          relations: [],
          kind: "resource",
        };
        if (type === SHUTDOWN_TYPE) {
          record.type = "compute.vm-shutdown-schedule";
          record.schedule = {
            enabled: text(r.shutdown_status) === "Enabled",
            time: text(r.shutdown_time),
            time_zone: text(r.shutdown_zone),
          };
        }
        records.push(record);
      }
      for (const g of groups.rows)
        records.push({
          name: text(g.name),
          type: "resource_group",
          location: text(g.location),
          resource_group: text(g.name),
          state: "present",
          relations: [],
          kind: "resource_group",
        });
      const observed_at = now().toISOString();
      const masked = `…${options.subscriptionId.slice(-4)}`;
      return {
        snapshot_id: `arg-${createHash("sha256").update(`${observed_at}\n${records.length}`).digest("hex").slice(0, 16)}`,
        observed_at,
        scope: `subscription ${masked}`,
        provenance: "Azure Resource Graph",
        records,
        truncated: resources.truncated || groups.truncated,
        coverage_gaps: [],
      };
    },
  };
}
