import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { createLogAnalyticsProvider } from "../../shared/console/providers/azure-log-analytics.js";
import { createAzureMetricsProvider } from "../../shared/console/providers/azure-metrics.js";
import { createArmSubscriptionProvider } from "../../shared/console/providers/azure-subscription.js";
import {
  createResourceGraphInventoryProvider,
  RESOURCE_GRAPH_QUERIES,
} from "../../shared/console/providers/azure-resource-graph.js";
import { LOG_TEMPLATES } from "../../shared/console/tools/provider-tools.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { type FakeAzureApis, sdkOptionsFor, startFakeAzureApis, staticTokenCredential } from "../fakes/azure-apis.js";
import { consoleHarness, firstToolResult } from "../support/console-harness.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let fake: FakeAzureApis;
let counter = 0;
const SUBSCRIPTION = "11111111-2222-4333-8444-555555555555";
const CLUSTER = `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-blast/providers/Microsoft.ContainerService/managedClusters/blast`;

beforeAll(async () => {
  [azurite, fake] = await Promise.all([testAzurite(), startFakeAzureApis()]);
});
afterAll(async () => {
  await Promise.all([azurite?.stop(), fake?.close()]);
});

const credential = staticTokenCredential;
const clientOptions = () => sdkOptionsFor(fake);

function harness(token = fake.token) {
  return consoleHarness(prefixedTables(azurite.connectionString, `azp${++counter}x${Date.now().toString(36)}`), {
    providers: {
      logs: createLogAnalyticsProvider({
        workspaceId: fake.workspaceId,
        credential: credential(token),
        clientOptions: clientOptions(),
      }),
      inventory: createResourceGraphInventoryProvider({
        subscriptionId: SUBSCRIPTION,
        credential: credential(token),
        clientOptions: clientOptions(),
      }),
      subscription: createArmSubscriptionProvider({
        subscriptionId: SUBSCRIPTION,
        credential: credential(token),
        clientOptions: clientOptions(),
      }),
      metrics: createAzureMetricsProvider({
        endpoint: fake.url,
        resourceId: CLUSTER,
        credential: credential(token),
        clientOptions: { tlsOptions: { ca: fake.ca }, retryOptions: { maxRetries: 0 } },
      }),
    },
  });
}
const run = (h: ReturnType<typeof harness>, text: string): Promise<ToolResult> => firstToolResult(h.coordinator, text);

describe("query_log over Log Analytics (the real Azure Monitor Logs SDK against a fake of its REST API)", () => {
  it("C-105 C-106 C-168 C-169 C-170 C-172 C-173 C-174 C-175 C-181: sends only the server-owned template to the one workspace and redacts the cells it returns", async () => {
    fake.logTables = {
      exceptions: [],
      requests: [],
      traces: [
        {
          timestamp: new Date(Date.now() - 30 * 60_000).toISOString(),
          severityLevel: 3,
          message:
            "failed for bob@example.org from 10.1.2.3 with Bearer abc.def token=s3cr3t at https://x.example/a id 0f8fad5b-d9cb-469f-a165-70867728950e",
        },
      ],
    };
    const h = harness();
    const result = await run(h, 'query_log template=error_sample window="2 hours"');
    expect(result.status).toBe("ok");
    const request = fake.requests.filter((r) => r.path.endsWith("/query")).at(-1);
    expect(request).toMatchObject({
      path: `/workspaces/${fake.workspaceId}/query`,
      authorized: true,
      body: { query: LOG_TEMPLATES.error_sample },
    });
    const [start, end] = String(request?.body.timespan).split("/");
    expect((Date.parse(end ?? "") - Date.parse(start ?? "")) / 3_600_000).toBe(2);
    const cell = JSON.stringify((result as { data: unknown }).data);
    expect(cell).toContain("failed for [email] from [ip]");
    for (const leaked of ["bob@example.org", "10.1.2.3", "abc.def", "s3cr3t", "x.example", "0f8fad5b-d9cb"])
      expect(cell).not.toContain(leaked);
    // One workspace only: the caller cannot name another.
    expect(await run(h, `query_log template=failed_requests workspace=${"f".repeat(8)}`)).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments" },
    });
  });

  it("a token the workspace refuses is a typed error, never a guess or a trace", async () => {
    const result = await run(harness("wrong-token"), "query_log template=failed_requests");
    expect(result.status).toBe("error");
    expect(JSON.stringify(result)).not.toMatch(/InvalidAuthenticationToken|\bat \w+ \(/);
  });
});

describe("query_inventory over Resource Graph (the real ARM SDK against a fake of its REST API)", () => {
  it("C-088 C-132 C-133 C-139 C-140: pages through the subscription's resources, sorts by name before the 40-record cut and masks the subscription in the scope", async () => {
    fake.resources = Array.from({ length: 1500 }, (_, n) => ({
      name: `vm-${String(1499 - n).padStart(4, "0")}`,
      type: "Microsoft.Compute/virtualMachines",
      location: "eastus",
      resourceGroup: "rg-blast",
      state: n % 2 ? "Succeeded" : "Failed",
      id: `/subscriptions/${SUBSCRIPTION}/x/${n}`,
    }));
    fake.resourceGroups = [
      {
        name: "rg-blast",
        type: "microsoft.resources/subscriptions/resourcegroups",
        location: "eastus",
        resourceGroup: "rg-blast",
      },
    ];
    fake.truncateResources = false;
    const h = harness();
    const before = fake.requests.length;
    const data = (await run(h, "query_inventory resource_type=microsoft.compute/virtualmachines")) as {
      data: { total: number; records: Record<string, unknown>[]; scope: string; provenance: string };
    };
    expect(data.data.total).toBe(1500);
    expect(data.data.records.map((r) => r.name)).toEqual(
      Array.from({ length: 40 }, (_, n) => `vm-${String(n).padStart(4, "0")}`),
    );
    for (const r of data.data.records)
      expect(Object.keys(r).sort()).toEqual(["location", "name", "relations", "resource_group", "state", "type"]);
    expect(data.data.scope).toBe("subscription …5555");
    expect(JSON.stringify(data)).not.toContain(SUBSCRIPTION);
    const graphCalls = fake.requests.slice(before).filter((r) => r.path.endsWith("/resources"));
    expect(graphCalls.map((r) => (r.body.options as { $skipToken?: string }).$skipToken ?? "first")).toEqual(
      expect.arrayContaining(["first", "1000"]),
    );
    expect(graphCalls.every((r) => r.authorized && (r.body.subscriptions as string[])[0] === SUBSCRIPTION)).toBe(true);
    expect(new Set(graphCalls.map((r) => r.body.query))).toEqual(
      new Set([RESOURCE_GRAPH_QUERIES.resources, RESOURCE_GRAPH_QUERIES.resourceGroups]),
    );
    const summary = (await run(h, "query_inventory kind=scope_counts")) as {
      data: { resource_total: number; resource_group_total: number };
    };
    expect(summary.data).toMatchObject({ resource_total: 1500, resource_group_total: 1 });
  });

  it("C-145 C-149 C-152: shutdown schedules come from Resource Graph; an unsupported time zone or a truncated answer makes the count unavailable", async () => {
    const schedule = (name: string, time: string, zone: string) => ({
      name,
      type: "microsoft.devtestlab/schedules",
      location: "eastus",
      resourceGroup: "rg",
      state: "Enabled",
      shutdown_time: time,
      shutdown_zone: zone,
      shutdown_status: "Enabled",
    });
    fake.resources = [schedule("shutdown-a", "2359", "UTC")];
    fake.truncateResources = false;
    const h = harness();
    const ok = await run(h, "query_inventory kind=scheduled_shutdown");
    expect(ok).toMatchObject({
      status: "ok",
      data: { query_kind: "scheduled_shutdown", resource_type: "compute.vm-shutdown-schedule" },
    });
    // Azure stores Windows zone names; an IANA-only reference time cannot place them, so no count is claimed.
    fake.resources = [schedule("shutdown-b", "1900", "Pacific Standard Time")];
    expect(await run(h, "query_inventory kind=scheduled_shutdown")).toMatchObject({ status: "unavailable" });
    fake.resources = [schedule("shutdown-a", "2359", "UTC")];
    fake.truncateResources = true;
    expect(await run(h, "query_inventory kind=scheduled_shutdown")).toMatchObject({ status: "unavailable" });
    fake.truncateResources = false;
  });
});

describe("query_metric over Azure Monitor (the real metrics SDK against a fake of its REST API)", () => {
  it("C-108: returns the configured resource's metric values for the window and aggregation", async () => {
    fake.metrics = {
      node_cpu_usage_percentage: [
        { timeStamp: "2026-01-01T10:00:00Z", average: 41.5 },
        { timeStamp: "2026-01-01T10:01:00Z", average: 43 },
      ],
    };
    const h = harness();
    const result = await run(
      h,
      "query_metric namespace=Microsoft.ContainerService/managedClusters metric=node_cpu_usage_percentage window=2h aggregation=Average",
    );
    expect(result).toMatchObject({
      status: "ok",
      data: {
        unit: "Percent",
        points: [
          { at: "2026-01-01T10:00:00.000Z", value: 41.5 },
          { at: "2026-01-01T10:01:00.000Z", value: 43 },
        ],
        window: { clamped: false },
      },
    });
    const call = fake.requests.filter((r) => r.path.endsWith("metrics:getBatch")).at(-1);
    expect(call).toMatchObject({
      path: `/subscriptions/${SUBSCRIPTION}/metrics:getBatch`,
      authorized: true,
      body: { resourceids: [CLUSTER] },
    });
    // A metric the resource does not have is unavailable, not zero.
    expect(
      await run(h, "query_metric namespace=Microsoft.ContainerService/managedClusters metric=made_up"),
    ).toMatchObject({ status: "unavailable" });
  });
});

describe("query_subscription_scope over ARM (the real subscriptions SDK against a fake of its REST API)", () => {
  it("C-089 C-090 C-091 C-092: shows the configured subscription's name and state, masks its id, states when it was observed and takes no caller scope", async () => {
    fake.subscriptions = { [SUBSCRIPTION]: { displayName: "BLAST production", state: "Enabled" } };
    const h = harness();
    const result = await run(h, "query_subscription_scope");
    expect(result).toMatchObject({
      status: "ok",
      data: { display_name: "BLAST production", state: "Enabled", subscription_id_masked: `${"*".repeat(32)}5555` },
    });
    expect(Date.parse((result as { data: { observed_at: string } }).data.observed_at)).not.toBeNaN();
    expect(JSON.stringify(result)).not.toContain(SUBSCRIPTION);
    expect(
      fake.requests.filter((r) => r.path.startsWith("/subscriptions/") && r.method === "GET").at(-1),
    ).toMatchObject({ path: `/subscriptions/${SUBSCRIPTION}`, authorized: true });
    expect(await run(h, "query_subscription_scope subscription=00000000-0000-0000-0000-000000000000")).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments" },
    });
    // Without its health sources (azure-resource-health.test.ts wires them) health is unavailable, not a guess.
    expect(await run(h, "query_subscription_health")).toMatchObject({ status: "unavailable" });
  });
});
