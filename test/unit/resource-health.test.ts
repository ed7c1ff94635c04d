import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConsoleConfig } from "../../shared/console/console-config.js";
import { classifyCause, resourceOfStatusId } from "../../shared/console/providers/azure-resource-health.js";
import { healthMetricResourcesQuery } from "../../shared/console/providers/azure-health-metrics.js";
import { loadHealthMetricSet } from "../../shared/console/providers/health-metrics.js";

const SUB = "11111111-2222-4333-8444-555555555555";
const STATUS = "/providers/Microsoft.ResourceHealth/availabilityStatuses/current";

describe("Resource Health's ids and attribution", () => {
  it("takes the resource's name, type and group from a status id, nested types included, and refuses anything else", () => {
    expect(
      resourceOfStatusId(
        `/subscriptions/${SUB}/resourceGroups/rg-blast/providers/Microsoft.ContainerService/managedClusters/blast${STATUS}`,
      ),
    ).toEqual({
      id: `/subscriptions/${SUB}/resourceGroups/rg-blast/providers/Microsoft.ContainerService/managedClusters/blast`,
      name: "blast",
      type: "microsoft.containerservice/managedclusters",
      resource_group: "rg-blast",
    });
    expect(
      resourceOfStatusId(
        `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.Sql/servers/s1/databases/db1${STATUS}`,
      ),
    ).toMatchObject({ name: "db1", type: "microsoft.sql/servers/databases", resource_group: "rg" });
    for (const bad of [
      undefined,
      "",
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.Web/sites/app`,
      `/subscriptions/${SUB}/resourceGroups/rg/providers/Microsoft.Web/sites/..${STATUS}`,
      `/subscriptions/not-a-guid/resourceGroups/rg/providers/Microsoft.Web/sites/app${STATUS}`,
      `https://evil.example/x${STATUS}`,
    ]) {
      expect(resourceOfStatusId(bad)).toBeUndefined();
    }
  });

  it("classifies who caused an entry from healthEventCause, context or reasonType, and says unknown when none does", () => {
    expect(classifyCause({ healthEventCause: "PlatformInitiated" })).toBe("platform");
    expect(classifyCause({ context: "Platform Initiated" })).toBe("platform");
    expect(classifyCause({ reasonType: "Unplanned" })).toBe("platform");
    expect(classifyCause({ reasonType: "Planned" })).toBe("platform");
    expect(classifyCause({ healthEventCause: "UserInitiated" })).toBe("customer");
    expect(classifyCause({ context: "Customer Initiated" })).toBe("customer");
    expect(classifyCause({ reasonType: "User_Initiated" })).toBe("customer");
    expect(classifyCause({})).toBe("unknown");
    expect(classifyCause({ reasonType: "Outage?" })).toBe("unknown");
  });
});

describe("the representative metric set and the health settings", () => {
  it("ships a valid set whose types are the only text in its server-owned Resource Graph query", () => {
    const set = loadHealthMetricSet();
    expect(set.metrics.map((m) => m.resource_type)).toEqual(
      expect.arrayContaining([
        "Microsoft.ContainerService/managedClusters",
        "Microsoft.Storage/storageAccounts",
        "Microsoft.Web/sites",
      ]),
    );
    expect(healthMetricResourcesQuery(set)).toBe(
      "Resources | where type in~ ('microsoft.containerservice/managedclusters', 'microsoft.storage/storageaccounts', 'microsoft.web/sites') | project id, name, type = tolower(type), resourceGroup | order by id asc",
    );
  });

  it("refuses a set that would put other text into the query, naming the file and line", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-hm-"));
    try {
      const file = path.join(dir, "health-metrics.json");
      writeFileSync(
        file,
        `{\n  "version": 1,\n  "window_minutes": 60,\n  "metrics": [\n    { "resource_type": "Microsoft.Web/sites') | union (Resources", "metric": "Http5xx", "aggregation": "Total", "why": "x" }\n  ]\n}\n`,
      );
      expect(() => loadHealthMetricSet(file)).toThrow(
        new RegExp(
          `^${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:5: metrics\\.0\\.resource_type: must be an ARM resource type`,
        ),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("SVC_HEALTH_RESOURCE_GROUPS: unset reads the whole subscription; a list is split and a bad name refuses to load", () => {
    expect(loadConsoleConfig({}).healthResourceGroups).toEqual([]);
    expect(loadConsoleConfig({ SVC_HEALTH_RESOURCE_GROUPS: "rg-blast, rg-data" }).healthResourceGroups).toEqual([
      "rg-blast",
      "rg-data",
    ]);
    expect(() => loadConsoleConfig({ SVC_HEALTH_RESOURCE_GROUPS: "rg/../x" })).toThrow(/SVC_HEALTH_RESOURCE_GROUPS/);
  });
});
