import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { planDelivery } from "../../shared/console/approvals/load-policy.js";
import { loadConsoleConfig } from "../../shared/console/console-config.js";

const quiet = { quietHours: { startMinute: 22 * 60, endMinute: 7 * 60, timeZone: "UTC" }, groupIntervalSeconds: 900 };

describe("approval load policy", () => {
  it("C-279: a non-critical request in quiet hours is deferred to their end", () => {
    expect(planDelivery("medium", new Date("2026-01-01T23:10:00Z"), quiet)).toEqual({
      policy: "deferred",
      send_at: "2026-01-02T07:00:00.000Z",
    });
    expect(planDelivery("low", new Date("2026-01-02T03:00:00Z"), quiet)).toEqual({
      policy: "deferred",
      send_at: "2026-01-02T07:00:00.000Z",
    });
  });

  it("C-280: non-critical requests outside quiet hours are grouped at the next interval boundary, one send per group", () => {
    const a = planDelivery("medium", new Date("2026-01-01T10:01:00Z"), quiet);
    const b = planDelivery("high", new Date("2026-01-01T10:14:59Z"), quiet);
    expect(a).toEqual({ policy: "grouped", send_at: "2026-01-01T10:15:00.000Z" });
    expect(b.send_at).toBe(a.send_at);
  });

  it("C-282 C-283: a critical request is sent now, bypassing quiet hours and grouping", () => {
    expect(planDelivery("critical", new Date("2026-01-01T23:10:00Z"), quiet)).toEqual({
      policy: "send_now",
      send_at: "2026-01-01T23:10:00.000Z",
    });
    expect(planDelivery("critical", new Date("2026-01-01T10:01:00Z"), quiet)).toEqual({
      policy: "send_now",
      send_at: "2026-01-01T10:01:00.000Z",
    });
  });

  it("reads quiet hours, the group interval and the break-glass cap from SVC_* settings, refusing a cap above 14400", () => {
    const config = loadConsoleConfig({
      SVC_APPROVAL_QUIET_HOURS: "22:00-07:00",
      SVC_APPROVAL_GROUP_INTERVAL_SECONDS: "900",
      SVC_SERVER_TIME_ZONE: "Asia/Seoul",
    });
    expect(config.loadPolicy).toEqual({
      groupIntervalSeconds: 900,
      quietHours: { startMinute: 1320, endMinute: 420, timeZone: "Asia/Seoul" },
      criticalSeverities: ["critical"],
      fatigue: { maxListedMembers: 20 },
    });
    expect(config.breakGlass.max_ttl_seconds).toBe(14_400);
    expect(() => loadConsoleConfig({ SVC_BREAK_GLASS_MAX_TTL_SECONDS: "20000" })).toThrow(
      /SVC_BREAK_GLASS_MAX_TTL_SECONDS/,
    );
    expect(() => loadConsoleConfig({ SVC_APPROVAL_QUIET_HOURS: "late" })).toThrow(/SVC_APPROVAL_QUIET_HOURS/);
    expect(() => loadConsoleConfig({ SVC_METRICS_ENDPOINT: "https://eastus.metrics.monitor.azure.com" })).toThrow(
      /SVC_METRICS_RESOURCE_ID: set both or neither/,
    );
  });
});

/** Writes `text` as a policy file in a fresh folder and returns its path. */
function policyFile(text: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), "approval-load-")), "approval-load.yaml");
  writeFileSync(file, text);
  return file;
}

describe("the approval-load policy file (SVC_APPROVAL_LOAD_POLICY)", () => {
  it("the shipped config/approval-load.yaml is the default: no quiet hours or grouping, reminders 3600 and 600 s, critical sent at once, a digest cap of 20", () => {
    const config = loadConsoleConfig({});
    expect(config.loadPolicy).toEqual({
      groupIntervalSeconds: 0,
      criticalSeverities: ["critical"],
      fatigue: { maxListedMembers: 20 },
    });
    expect(config.reminderOffsetsSeconds).toEqual([3600, 600]);
  });

  it("reads quiet hours with their time zone, the group interval, reminders, critical severities and the fatigue cap from the named file", () => {
    const file = policyFile(
      [
        "version: 1",
        "quiet_hours:",
        '  start: "21:30"',
        '  end: "06:00"',
        "time_zone: Asia/Seoul",
        "group_interval_seconds: 600",
        "reminder_offsets_seconds: [1800, 900, 60]",
        "critical_severities: [high, critical]",
        "fatigue:",
        "  max_listed_members: 5",
        "",
      ].join("\n"),
    );
    const config = loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: file });
    expect(config.loadPolicy).toEqual({
      groupIntervalSeconds: 600,
      quietHours: { startMinute: 21 * 60 + 30, endMinute: 360, timeZone: "Asia/Seoul" },
      criticalSeverities: ["high", "critical"],
      fatigue: { maxListedMembers: 5 },
    });
    expect(config.reminderOffsetsSeconds).toEqual([1800, 900, 60]);
    // 23:00 in Seoul is 14:00 UTC: a medium request waits for 06:00 Seoul (21:00 UTC); a high one, critical here, goes now.
    expect(planDelivery("medium", new Date("2026-01-01T14:00:00Z"), config.loadPolicy)).toEqual({
      policy: "deferred",
      send_at: "2026-01-01T21:00:00.000Z",
    });
    expect(planDelivery("high", new Date("2026-01-01T14:00:00Z"), config.loadPolicy)).toEqual({
      policy: "send_now",
      send_at: "2026-01-01T14:00:00.000Z",
    });
  });

  it("a set SVC_APPROVAL_* setting wins over the file's entry; the rest still comes from the file", () => {
    const file = policyFile(
      "version: 1\nquiet_hours: { start: '22:00', end: '07:00' }\ngroup_interval_seconds: 600\nreminder_offsets_seconds: [1200]\n",
    );
    const config = loadConsoleConfig({
      SVC_APPROVAL_LOAD_POLICY: file,
      SVC_APPROVAL_GROUP_INTERVAL_SECONDS: "300",
      SVC_APPROVAL_QUIET_HOURS: "23:00-05:00",
    });
    expect(config.loadPolicy).toMatchObject({
      groupIntervalSeconds: 300,
      quietHours: { startMinute: 23 * 60, endMinute: 300, timeZone: "UTC" },
    });
    expect(config.reminderOffsetsSeconds).toEqual([1200]);
    expect(
      loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: file, SVC_APPROVAL_REMINDER_OFFSETS_SECONDS: "600" })
        .reminderOffsetsSeconds,
    ).toEqual([600]);
  });

  it("an invalid file stops start-up naming the file and the line of the bad entry", () => {
    const badValue = policyFile("version: 1\n# the interval\ngroup_interval_seconds: -5\n");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: badValue })).toThrow(
      `${badValue}:3: group_interval_seconds:`,
    );
    const badTime = policyFile("version: 1\nquiet_hours:\n  start: '22:00'\n  end: '7 am'\n");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: badTime })).toThrow(
      `${badTime}:4: quiet_hours.end: must look like 22:00`,
    );
    const unknownKey = policyFile("version: 1\nfatigue:\n  max_listed_members: 3\n  auto_approve: true\n");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: unknownKey })).toThrow(
      new RegExp(`^${unknownKey.replaceAll(/[.*+?^${}()|[\]\\]/g, "\\$&")}:[23]: fatigue`),
    );
    const badSeverity = policyFile("version: 1\ncritical_severities:\n  - critical\n  - urgent\n");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: badSeverity })).toThrow(
      `${badSeverity}:4: critical_severities.1:`,
    );
    const notYaml = policyFile("version: 1\ngroup_interval_seconds: [1, 2\nreminder_offsets_seconds: [1]\n");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: notYaml })).toThrow(
      /^.+approval-load\.yaml:[23]: not valid YAML/,
    );
    const missing = path.join(tmpdir(), "no-such-approval-load.yaml");
    expect(() => loadConsoleConfig({ SVC_APPROVAL_LOAD_POLICY: missing })).toThrow(`${missing}:1: cannot be read`);
  });

  it("without SVC_APPROVAL_LOAD_POLICY, a catalog directory with no policy file uses the built-in defaults", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "catalog-"));
    expect(loadConsoleConfig({ SVC_CATALOG_DIR: dir }).loadPolicy).toEqual({
      groupIntervalSeconds: 0,
      criticalSeverities: ["critical"],
      fatigue: { maxListedMembers: 20 },
    });
  });
});
