import type { AccessToken } from "@azure/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAzureHealthMetrics } from "../../shared/console/providers/azure-health-metrics.js";
import { createAzureResourceHealthProvider } from "../../shared/console/providers/azure-resource-health.js";
import { createResourceGraphInventoryProvider } from "../../shared/console/providers/azure-resource-graph.js";
import { createArmSubscriptionProvider } from "../../shared/console/providers/azure-subscription.js";
import { loadHealthMetricSet } from "../../shared/console/providers/health-metrics.js";
import type { ConsoleProviders, SubscriptionHealth } from "../../shared/console/providers/providers.js";
import { createSubscriptionHealth } from "../../shared/console/providers/subscription-health.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { type FakeAzureApis, startFakeAzureApis } from "../fakes/azure-apis.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("rhealth");
let fake: FakeAzureApis;
const SUBSCRIPTION = "11111111-2222-4333-8444-555555555555";
const RG = `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-blast/providers`;
const CLUSTER = `${RG}/Microsoft.ContainerService/managedClusters/blast`;
const STORE = `${RG}/Microsoft.Storage/storageAccounts/blaststore`;
const FUNC = `${RG}/Microsoft.Web/sites/blast-func`;
const set = loadHealthMetricSet();

beforeAll(async () => {
  fake = await startFakeAzureApis();
});
afterAll(async () => {
  await fake?.close();
});

const credential = () => ({
  getToken: async (): Promise<AccessToken> => ({ token: fake.token, expiresOnTimestamp: Date.now() + 3_600_000 }),
});
/** The real SDK clients pointed at the fake: its CA trusted, no retries so a refusal is seen at once. */
const armOptions = () => ({ endpoint: fake.url, tlsOptions: { ca: fake.ca }, retryOptions: { maxRetries: 0 } });

/** The console with the real Azure providers of the subscription's scope, as `functions/composition/console-parts.ts` wires them. */
function harness(options: { metrics?: boolean; resourceGroups?: string[]; subscription?: boolean } = {}) {
  const resourceGroups = options.resourceGroups ?? [];
  const inventory = createResourceGraphInventoryProvider({
    subscriptionId: SUBSCRIPTION,
    credential: credential(),
    clientOptions: armOptions(),
  });
  const resourceHealth = createAzureResourceHealthProvider({
    subscriptionId: SUBSCRIPTION,
    resourceGroups,
    credential: credential(),
    clientOptions: armOptions(),
  });
  const metrics =
    options.metrics === false
      ? undefined
      : {
          reader: createAzureHealthMetrics({
            subscriptionId: SUBSCRIPTION,
            resourceGroups,
            endpoint: fake.url,
            credential: credential(),
            set,
            graphClientOptions: armOptions(),
            metricsClientOptions: { tlsOptions: { ca: fake.ca }, retryOptions: { maxRetries: 0 } },
          }),
          set,
        };
  const health = createSubscriptionHealth({
    inventory,
    resourceHealth,
    ...(metrics ? { metrics } : {}),
    resourceGroups,
  });
  const providers: ConsoleProviders =
    options.subscription === false
      ? {}
      : {
          inventory,
          resourceHealth,
          subscription: createArmSubscriptionProvider({
            subscriptionId: SUBSCRIPTION,
            credential: credential(),
            clientOptions: armOptions(),
            health,
          }),
        };
  return consoleHarness(azurite.tables(), { providers });
}
async function run(h: ReturnType<typeof harness>, text: string): Promise<ToolResult> {
  const reply = await h.coordinator.handleTurn(callerWith("Reader"), { text });
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}
const dataOf = <T>(result: ToolResult): T => {
  expect(result.status).toBe("ok");
  return (result as { data: T }).data;
};

function scopeWithThreeResources() {
  fake.failResourceHealth = false;
  fake.truncateResources = false;
  fake.resources = [
    {
      name: "blast",
      type: "Microsoft.ContainerService/managedClusters",
      location: "eastus",
      resourceGroup: "rg-blast",
      state: "Succeeded",
      id: CLUSTER,
    },
    {
      name: "blaststore",
      type: "Microsoft.Storage/storageAccounts",
      location: "eastus",
      resourceGroup: "rg-blast",
      state: "Succeeded",
      id: STORE,
    },
    {
      name: "blast-func",
      type: "Microsoft.Web/sites",
      location: "eastus",
      resourceGroup: "rg-blast",
      state: "Failed",
      id: FUNC,
    },
  ];
  fake.resourceGroups = [
    {
      name: "rg-blast",
      type: "microsoft.resources/subscriptions/resourcegroups",
      location: "eastus",
      resourceGroup: "rg-blast",
    },
  ];
  fake.healthStatuses = [
    {
      resourceId: CLUSTER,
      properties: {
        availabilityState: "Degraded",
        summary: "A node pool is being repaired by the platform.",
        reasonType: "Unplanned",
        context: "Platform Initiated",
        category: "Unplanned",
        occuredTime: "2026-01-01T09:00:00Z",
      },
    },
    {
      resourceId: STORE,
      properties: {
        availabilityState: "Available",
        summary: "There are no known problems.",
        occuredTime: "2026-01-01T08:00:00Z",
      },
    },
    {
      resourceId: FUNC,
      properties: {
        availabilityState: "Unavailable",
        summary: "The app was stopped.",
        reasonType: "UserInitiated",
        context: "Customer Initiated",
        occuredTime: "2026-01-01T09:30:00Z",
      },
    },
  ];
  const point = (value: { average?: number; total?: number }) => [
    { timeStamp: new Date(Date.now() - 60_000).toISOString(), ...value },
  ];
  fake.metrics = {};
  fake.refuseMetricsFor = [];
  fake.resourceMetrics = {
    [`${CLUSTER.toLowerCase()}|node_cpu_usage_percentage`]: point({ average: 92.5 }),
    [`${CLUSTER.toLowerCase()}|node_memory_working_set_percentage`]: point({ average: 40 }),
    [`${STORE.toLowerCase()}|Availability`]: point({ average: 100 }),
    [`${STORE.toLowerCase()}|Transactions`]: point({ total: 1200 }),
    // No Http5xx for the Functions app: Azure Monitor refuses it, which is a coverage gap.
  };
}

describe("query_subscription_health over Resource Graph, Resource Health and Azure Monitor (the real SDKs against fakes of their REST APIs)", () => {
  it("C-093 C-094: reads all three sources of the configured scope and returns findings, cause classification, coverage gaps, freshness and truncation", async () => {
    scopeWithThreeResources();
    const before = fake.requests.length;
    const health = dataOf<SubscriptionHealth>(await run(harness(), "query_subscription_health"));
    const calls = fake.requests.slice(before);

    // C-093: the three sources, each called for the configured subscription with the bearer token.
    expect(calls.every((c) => c.authorized)).toBe(true);
    expect(calls.some((c) => c.path === "/providers/Microsoft.ResourceGraph/resources")).toBe(true);
    expect(
      calls.find((c) => c.path.endsWith("/providers/Microsoft.ResourceHealth/availabilityStatuses")),
    ).toMatchObject({
      method: "GET",
      path: `/subscriptions/${SUBSCRIPTION}/providers/Microsoft.ResourceHealth/availabilityStatuses`,
      query: expect.stringContaining("api-version=2022-10-01"),
    });
    const batches = calls.filter((c) => c.path === `/subscriptions/${SUBSCRIPTION}/metrics:getBatch`);
    expect(batches.map((b) => b.body.resourceids)).toEqual(expect.arrayContaining([[CLUSTER], [STORE], [FUNC]]));
    expect(health.sources?.map((s) => [s.source, s.status])).toEqual([
      ["resource_graph", "ok"],
      ["resource_health", "ok"],
      ["metrics", "ok"],
    ]);

    // C-094 findings, most severe first, each with its cause.
    expect(health.findings).toEqual([
      {
        source: "resource_health",
        status: "unavailable",
        summary: "The app was stopped.",
        resource: "blast-func",
        resource_type: "microsoft.web/sites",
        resource_group: "rg-blast",
        cause: "customer",
      },
      {
        source: "resource_graph",
        status: "failed",
        summary: "provisioning state Failed",
        resource: "blast-func",
        resource_type: "microsoft.web/sites",
        resource_group: "rg-blast",
        cause: "unknown",
      },
      {
        source: "resource_health",
        status: "degraded",
        summary: "A node pool is being repaired by the platform.",
        resource: "blast",
        resource_type: "microsoft.containerservice/managedclusters",
        resource_group: "rg-blast",
        cause: "platform",
      },
      expect.objectContaining({
        source: "metrics",
        status: "warning",
        resource: "blast",
        summary: expect.stringMatching(
          /^node_cpu_usage_percentage Average 92\.5 Percent above 85 over the last 60 minutes/,
        ),
      }),
    ]);
    // Cause classification, coverage gaps (the metric Azure refused), freshness per source and truncation.
    expect(health.cause_classification).toEqual({ platform: 1, customer: 1, unknown: 2 });
    expect(health.coverage_gaps).toEqual(["metrics: Http5xx on blast-func returned no data (MetricNotFound)"]);
    for (const s of health.sources ?? []) expect(Date.parse(s.observed_at ?? "")).not.toBeNaN();
    expect(health.observed_at).toBe([...(health.sources ?? []).map((s) => s.observed_at)].sort()[0]);
    expect(health).toMatchObject({ truncated: false, findings_total: 4 });
    // No resource id (it carries the subscription id) leaves the providers.
    expect(JSON.stringify(health)).not.toContain(SUBSCRIPTION);
  });

  it("C-094: a source that fails or is not configured is a named coverage gap without freshness, and more findings than 40 are cut and flagged truncated", async () => {
    scopeWithThreeResources();
    fake.failResourceHealth = true;
    const partial = dataOf<SubscriptionHealth>(await run(harness({ metrics: false }), "query_subscription_health"));
    expect(partial.sources).toEqual([
      expect.objectContaining({ source: "resource_graph", status: "ok" }),
      { source: "resource_health", status: "failed", checked: 0, truncated: false },
      { source: "metrics", status: "not_configured", checked: 0, truncated: false },
    ]);
    expect(partial.coverage_gaps).toEqual(["resource_health: the source did not answer", "metrics: not configured"]);
    expect(partial.findings.map((f) => f.source)).toEqual(["resource_graph"]);

    fake.failResourceHealth = false;
    fake.healthStatuses = Array.from({ length: 45 }, (_, n) => ({
      resourceId: `${RG}/Microsoft.Compute/virtualMachines/vm-${String(n).padStart(2, "0")}`,
      properties: { availabilityState: "Unavailable", summary: "stopped", reasonType: "UserInitiated" },
    }));
    // A status whose id names no resource group resource is counted as a gap, not dropped silently.
    fake.healthStatuses.push({
      resourceId: `/subscriptions/${SUBSCRIPTION}/providers/Microsoft.Web/certificates/c1`,
      properties: { availabilityState: "Unavailable" },
    });
    const many = dataOf<SubscriptionHealth>(await run(harness({ metrics: false }), "query_subscription_health"));
    expect(many.coverage_gaps).toContain("resource_health: 1 statuses name no resource this console can read");
    expect(many.findings).toHaveLength(40);
    expect(many).toMatchObject({ findings_total: 46, truncated: true });
    expect(many.findings.slice(0, 3).map((f) => f.resource)).toEqual(["vm-00", "vm-01", "vm-02"]);

    // A metrics request Azure Monitor refuses is a gap for its resource only; all refused, the source failed.
    scopeWithThreeResources();
    fake.refuseMetricsFor = [STORE.toLowerCase()];
    const someRefused = dataOf<SubscriptionHealth>(await run(harness(), "query_subscription_health"));
    expect(someRefused.coverage_gaps).toEqual(
      expect.arrayContaining([
        "metrics: Availability on blaststore returned no data (QueryFailed)",
        "metrics: Transactions on blaststore returned no data (QueryFailed)",
      ]),
    );
    expect(someRefused.findings.some((f) => f.source === "metrics" && f.resource === "blast")).toBe(true);
    expect(someRefused.sources?.find((s) => s.source === "metrics")?.status).toBe("ok");
    fake.refuseMetricsFor = [CLUSTER, STORE, FUNC].map((id) => id.toLowerCase());
    const allRefused = dataOf<SubscriptionHealth>(await run(harness(), "query_subscription_health"));
    expect(allRefused.sources?.find((s) => s.source === "metrics")).toEqual({
      source: "metrics",
      status: "failed",
      checked: 0,
      truncated: false,
    });
    expect(allRefused.coverage_gaps).toContain("metrics: the source did not answer");
    fake.refuseMetricsFor = [];
  });

  it("C-094: the configured resource groups bound what Resource Health and the inventory report", async () => {
    scopeWithThreeResources();
    fake.resources.push({
      name: "elsewhere",
      type: "Microsoft.Web/sites",
      location: "eastus",
      resourceGroup: "rg-other",
      state: "Failed",
      id: `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-other/providers/Microsoft.Web/sites/elsewhere`,
    });
    fake.healthStatuses.push({
      resourceId: `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-other/providers/Microsoft.Web/sites/elsewhere`,
      properties: { availabilityState: "Unavailable", summary: "down" },
    });
    const before = fake.requests.length;
    const health = dataOf<SubscriptionHealth>(
      await run(harness({ resourceGroups: ["rg-blast"], metrics: false }), "query_subscription_health"),
    );
    expect(health.findings.map((f) => f.resource)).not.toContain("elsewhere");
    expect([
      ...new Set(
        fake.requests
          .slice(before)
          .filter((c) => c.path.includes("ResourceHealth"))
          .map((c) => c.path),
      ),
    ]).toEqual([
      `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-blast/providers/Microsoft.ResourceHealth/availabilityStatuses`,
    ]);
  });

  it("without a configured subscription the tool answers unavailable, and with no source answering it is unavailable too, never an empty all-clear", async () => {
    expect(await run(harness({ subscription: false }), "query_subscription_health")).toMatchObject({
      status: "unavailable",
      error: { type: "unavailable" },
    });
    scopeWithThreeResources();
    fake.failResourceHealth = true;
    const h = consoleHarness(azurite.tables(), {
      providers: {
        subscription: createArmSubscriptionProvider({
          subscriptionId: SUBSCRIPTION,
          credential: credential(),
          clientOptions: armOptions(),
          health: createSubscriptionHealth({
            resourceHealth: createAzureResourceHealthProvider({
              subscriptionId: SUBSCRIPTION,
              credential: credential(),
              clientOptions: armOptions(),
            }),
          }),
        }),
      },
    });
    expect(await run(h, "query_subscription_health")).toMatchObject({ status: "unavailable" });
    fake.failResourceHealth = false;
  });
});

describe("resource-health history (query rule 8: query_inventory kind=resource_health_history)", () => {
  const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();

  it("C-160 C-161 C-162: asked for 7 days it reads 24 hours, merges state transitions and annotations in time order and counts who initiated them", async () => {
    scopeWithThreeResources();
    // Azure returns the newest first; the fake pages them two at a time.
    fake.healthHistory = {
      [CLUSTER.toLowerCase()]: [
        {
          availabilityState: "Available",
          title: "Available",
          summary: "The cluster is running.",
          occuredTime: hoursAgo(2),
        },
        {
          availabilityState: "Unavailable",
          title: "Stopped",
          summary: "The cluster was stopped by a user.",
          reasonType: "UserInitiated",
          context: "Customer Initiated",
          occuredTime: hoursAgo(9),
        },
        {
          title: "Stop requested",
          summary: "A stop operation was requested.",
          healthEventType: "Lifecycle",
          healthEventCause: "UserInitiated",
          occuredTime: hoursAgo(10),
        },
        {
          title: "Planned maintenance",
          summary: "Node image upgrade.",
          healthEventType: "Downtime",
          healthEventCause: "PlatformInitiated",
          healthEventCategory: "Planned",
          occuredTime: hoursAgo(19),
        },
        {
          availabilityState: "Degraded",
          title: "Degraded",
          summary: "A host failed.",
          reasonType: "Unplanned",
          context: "Platform Initiated",
          category: "Unplanned",
          occuredTime: hoursAgo(20),
        },
        {
          availabilityState: "Unavailable",
          title: "Outage",
          summary: "Three days ago.",
          reasonType: "Unplanned",
          context: "Platform Initiated",
          occuredTime: hoursAgo(72),
        },
      ],
    };
    const before = fake.requests.length;
    const result = await run(harness(), 'query_inventory kind=resource_health_history filter=blast window="7 days"');
    const data = dataOf<{
      window: { hours: number; clamped: boolean; note: string; start: string; end: string };
      entries: { at: string; kind: string; initiator: string; title: string }[];
      counts: Record<string, number>;
      kinds: Record<string, number>;
      resource: Record<string, string>;
    }>(result);
    // C-160: 7 days asked, 24 hours used, and the answer says so.
    expect(data.window).toMatchObject({
      requested: "7 days",
      hours: 24,
      clamped: true,
      note: "the interval was clamped to 24 hours",
    });
    expect(Date.parse(data.window.end) - Date.parse(data.window.start)).toBe(24 * 3_600_000);
    expect(data.entries.map((e) => e.title)).not.toContain("Outage");
    // C-161: chronological, both kinds present.
    expect(data.entries.map((e) => [e.kind, e.title])).toEqual([
      ["availability_state", "Degraded"],
      ["annotation", "Planned maintenance"],
      ["annotation", "Stop requested"],
      ["availability_state", "Stopped"],
      ["availability_state", "Available"],
    ]);
    expect(data.kinds).toEqual({ availability_state: 3, annotation: 2 });
    // C-162: the three counts.
    expect(data.counts).toEqual({ customer_initiated: 2, status_only: 1, platform_initiated: 2 });
    expect(data.resource).toEqual({
      name: "blast",
      type: "microsoft.containerservice/managedclusters",
      resource_group: "rg-blast",
    });
    // The history came from the per-resource list (paged), resolved from the configured scope.
    const historyCalls = fake.requests
      .slice(before)
      .filter((c) =>
        c.path.toLowerCase().includes("/managedclusters/blast/providers/microsoft.resourcehealth/availabilitystatuses"),
      );
    expect(historyCalls.length).toBe(3);
    expect(
      historyCalls.every(
        (c) => c.authorized && c.path === `${CLUSTER}/providers/Microsoft.ResourceHealth/availabilityStatuses`,
      ),
    ).toBe(true);
    expect(JSON.stringify(result)).not.toContain(SUBSCRIPTION);
  });

  it("C-163: with no history in the window the answer is unavailable and never the resource's current state", async () => {
    scopeWithThreeResources();
    fake.healthStatuses[0] = {
      resourceId: CLUSTER,
      properties: { availabilityState: "Degraded", summary: "CURRENT-STATE-SUMMARY", reasonType: "Unplanned" },
    };
    const h = harness();
    // Empty, only older than the window, and none at all (Resource Health answers 404).
    for (const history of [
      [],
      [{ availabilityState: "Unavailable", summary: "OLD-ENTRY", occuredTime: hoursAgo(30) }],
      undefined,
    ]) {
      fake.healthHistory = history ? { [CLUSTER.toLowerCase()]: history } : {};
      const result = await run(h, "query_inventory kind=resource_health_history filter=blast");
      expect(result).toMatchObject({
        status: "unavailable",
        error: { type: "unavailable", details: { history: "none", resource: { name: "blast" } } },
      });
      const text = JSON.stringify(result);
      for (const leaked of ["CURRENT-STATE-SUMMARY", "Degraded", "OLD-ENTRY"]) expect(text).not.toContain(leaked);
    }
    // Resource Health failing is a typed unavailable too, not an internal error.
    fake.failResourceHealth = true;
    expect(await run(h, "query_inventory kind=resource_health_history filter=blast")).toMatchObject({
      status: "unavailable",
      error: { type: "unavailable" },
    });
    fake.failResourceHealth = false;
  });

  it("resolves the resource only inside the configured scope: an unknown or path-like name is not_found and reaches no request path; no provider is unavailable", async () => {
    scopeWithThreeResources();
    const h = harness();
    const before = fake.requests.length;
    for (const name of [
      "nothere",
      "../../providers/Microsoft.Authorization/roleAssignments",
      "blast?x=1",
      "rg-blast/blast/extra",
    ]) {
      expect(await run(h, `query_inventory kind=resource_health_history filter=${JSON.stringify(name)}`)).toMatchObject(
        { status: "error", error: { type: "not_found" } },
      );
    }
    expect(
      fake.requests
        .slice(before)
        .every(
          (c) => c.path === `/subscriptions/${SUBSCRIPTION}/providers/Microsoft.ResourceHealth/availabilityStatuses`,
        ),
    ).toBe(true);
    expect(await run(h, "query_inventory kind=resource_health_history")).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments" },
    });
    // Two resources of one name: the answer asks which, and <resource group>/<name> picks one.
    const twin = `/subscriptions/${SUBSCRIPTION}/resourceGroups/rg-other/providers/Microsoft.Web/sites/blast`;
    fake.healthStatuses.push({ resourceId: twin, properties: { availabilityState: "Available" } });
    fake.healthHistory = {
      [twin.toLowerCase()]: [
        {
          availabilityState: "Available",
          title: "Started",
          occuredTime: new Date(Date.now() - 3_600_000).toISOString(),
        },
      ],
    };
    expect(await run(h, "query_inventory kind=resource_health_history filter=blast")).toMatchObject({
      status: "error",
      error: {
        type: "invalid_arguments",
        details: { candidates: [{ resource_group: "rg-blast" }, { resource_group: "rg-other" }] },
      },
    });
    expect(await run(h, "query_inventory kind=resource_health_history filter=rg-other/blast")).toMatchObject({
      status: "ok",
      data: {
        resource: { name: "blast", resource_group: "rg-other", type: "microsoft.web/sites" },
        counts: { status_only: 1 },
      },
    });
    expect(await run(h, "query_inventory kind=list window=2h")).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments" },
    });
    expect(
      await run(harness({ subscription: false }), "query_inventory kind=resource_health_history filter=blast"),
    ).toMatchObject({ status: "unavailable" });
  });
});
