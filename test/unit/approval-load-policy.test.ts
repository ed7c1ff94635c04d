import { describe, expect, it } from "vitest";
import { planDelivery } from "../../shared/console/approvals/load-policy.js";
import { loadConsoleConfig } from "../../shared/console/console-config.js";

const quiet = { quietHours: { startMinute: 22 * 60, endMinute: 7 * 60, timeZone: "UTC" }, groupIntervalSeconds: 900 };

describe("approval load policy", () => {
  it("C-279: a non-critical request in quiet hours is deferred to their end", () => {
    expect(planDelivery("medium", new Date("2026-01-01T23:10:00Z"), quiet)).toEqual({ policy: "deferred", send_at: "2026-01-02T07:00:00.000Z" });
    expect(planDelivery("low", new Date("2026-01-02T03:00:00Z"), quiet)).toEqual({ policy: "deferred", send_at: "2026-01-02T07:00:00.000Z" });
  });

  it("C-280: non-critical requests outside quiet hours are grouped at the next interval boundary, one send per group", () => {
    const a = planDelivery("medium", new Date("2026-01-01T10:01:00Z"), quiet);
    const b = planDelivery("high", new Date("2026-01-01T10:14:59Z"), quiet);
    expect(a).toEqual({ policy: "grouped", send_at: "2026-01-01T10:15:00.000Z" });
    expect(b.send_at).toBe(a.send_at);
  });

  it("C-282 C-283: a critical request is sent now, bypassing quiet hours and grouping", () => {
    expect(planDelivery("critical", new Date("2026-01-01T23:10:00Z"), quiet)).toEqual({ policy: "send_now", send_at: "2026-01-01T23:10:00.000Z" });
    expect(planDelivery("critical", new Date("2026-01-01T10:01:00Z"), quiet)).toEqual({ policy: "send_now", send_at: "2026-01-01T10:01:00.000Z" });
  });

  it("reads quiet hours, the group interval and the break-glass cap from SVC_* settings, refusing a cap above 14400", () => {
    const config = loadConsoleConfig({ SVC_APPROVAL_QUIET_HOURS: "22:00-07:00", SVC_APPROVAL_GROUP_INTERVAL_SECONDS: "900", SVC_SERVER_TIME_ZONE: "Asia/Seoul" });
    expect(config.loadPolicy).toEqual({ groupIntervalSeconds: 900, quietHours: { startMinute: 1320, endMinute: 420, timeZone: "Asia/Seoul" } });
    expect(config.breakGlass.max_ttl_seconds).toBe(14_400);
    expect(() => loadConsoleConfig({ SVC_BREAK_GLASS_MAX_TTL_SECONDS: "20000" })).toThrow(/SVC_BREAK_GLASS_MAX_TTL_SECONDS/);
    expect(() => loadConsoleConfig({ SVC_APPROVAL_QUIET_HOURS: "late" })).toThrow(/SVC_APPROVAL_QUIET_HOURS/);
    expect(() => loadConsoleConfig({ SVC_METRICS_ENDPOINT: "https://eastus.metrics.monitor.azure.com" })).toThrow(/SVC_METRICS_RESOURCE_ID: set both or neither/);
  });
});
