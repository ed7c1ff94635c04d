import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadActionTypes } from "../../shared/ops/actions/action-types.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { AUDIT_SCAN_LIMIT, queryAudit } from "../../shared/ops/audit-query.js";
import { CatalogLoadError } from "../../shared/ops/catalog/json-catalog.js";
import { createEventLog, type OpsEvent } from "../../shared/ops/events.js";
import { correlateIncidents, publishSeverityChanges, SEVERITY_CHANGED } from "../../shared/ops/incidents/incidents.js";
import { createOpsLoop } from "../../shared/ops/ops-loop.js";
import { evaluateRules, loadRuleCatalog } from "../../shared/ops/rules/rule-catalog.js";
import { type ControlPlaneStateReader, verifyAction } from "../../shared/ops/verifier/verifier.js";
import { azuriteTables } from "../support/service-fakes.js";

const actions = loadActionTypes();
const rules = loadRuleCatalog(actions);
const folder = mkdtempSync(path.join(tmpdir(), "ops-core-"));
const { tables } = azuriteTables("ops");

afterAll(() => {
  rmSync(folder, { recursive: true, force: true });
});

function writeCatalog(name: string, text: string): string {
  const file = path.join(folder, name);
  writeFileSync(file, text);
  return file;
}

describe("rule and action-type catalogs", () => {
  it("load from config/ at version 1, every proposed action naming a catalogued action type with a default mode", () => {
    expect(actions.version).toBe(1);
    expect(rules.version).toBe(1);
    const ids = new Set(actions.action_types.map((a) => a.id));
    for (const want of [
      "retry_job",
      "cancel_job",
      "rewarm_database",
      "prepare_database_update",
      "rotate_api_token",
      "redeploy_job_api",
      "scale_node_pool",
      "kill_switch",
    ])
      expect(ids.has(want)).toBe(true);
    for (const rule of rules.rules) if (rule.proposed_action) expect(ids.has(rule.proposed_action)).toBe(true);
    expect(actions.action_types.filter((a) => a.id !== "kill_switch").every((a) => a.default_mode === "shadow")).toBe(
      true,
    );
  });

  it("give a deterministic verdict citing the rule id and its proposed action, and no_rule for an unknown signal", () => {
    const event = { event_type: "job.failed", resource_ref: "blast_job/j-1" };
    expect(evaluateRules(rules, event)).toEqual({
      tier: "T0",
      decision: "propose_action",
      severity: "medium",
      rule_ids: ["R-JOB-001"],
      proposed_action: "retry_job",
    });
    expect(evaluateRules(rules, event)).toEqual(evaluateRules(rules, event));
    expect(evaluateRules(rules, { event_type: "job.failed", resource_ref: "blast_database/nt" })).toEqual({
      tier: "T0",
      decision: "no_rule",
      severity: "info",
      rule_ids: [],
    });
  });

  it("refuse an invalid catalog naming the file and the line of the bad field", () => {
    const text = JSON.stringify(
      {
        version: 1,
        vocabulary: [],
        rules: [...rules.rules.slice(0, 2), { ...rules.rules[2], severity: "apocalyptic" }],
      },
      null,
      2,
    );
    const file = writeCatalog("bad-rules.json", text);
    const line = text.split("\n").findIndex((l) => l.includes('"apocalyptic"')) + 1;
    let error: unknown;
    try {
      loadRuleCatalog(actions, file);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CatalogLoadError);
    expect((error as CatalogLoadError).message).toBe(
      `${file}:${line}: rules.2.severity: ${(error as CatalogLoadError).problem.split(": ").slice(1).join(": ")}`,
    );
    expect((error as CatalogLoadError).line).toBe(line);
  });

  it("refuse unparseable JSON and a proposed action missing from the action catalog, each with its line", () => {
    const broken = writeCatalog("broken.json", '{\n  "version": 1,\n  "action_types": [\n    oops\n  ]\n}\n');
    expect(() => loadActionTypes(broken)).toThrow(/broken\.json:4: not valid JSON/);
    const text = JSON.stringify(
      { ...rules, rules: [{ ...rules.rules[0], proposed_action: "reboot_universe" }] },
      null,
      2,
    );
    const file = writeCatalog("unknown-action.json", text);
    const line = text.split("\n").findIndex((l) => l.includes("reboot_universe")) + 1;
    expect(() => loadRuleCatalog(actions, file)).toThrow(
      `${file}:${line}: rules.0.proposed_action: unknown action type reboot_universe`,
    );
  });
});

describe("verifier (T2)", () => {
  const state = (overrides: Partial<ControlPlaneStateReader> = {}): ControlPlaneStateReader => ({
    jobStatus: async (id) => (id === "j-failed" ? "failed" : id === "j-running" ? "running" : null),
    database: async (name) => (name === "nt" ? { update_available: true } : null),
    apiTokenConfigured: async () => true,
    clusterReachable: async () => undefined,
    nodePoolBounds: async () => ({ min: 1, max: 5 }),
    killSwitchOn: async () => false,
    ...overrides,
  });

  it("finds an action eligible only when every precondition holds against current state", async () => {
    const report = await verifyAction(
      { action_type: "retry_job", target: "blast_job/j-failed", params: {} },
      actions,
      state(),
    );
    expect(report.verdict).toBe("eligible");
    expect(report.checks.map((c) => [c.precondition, c.result])).toEqual([
      ["job_exists", "pass"],
      ["job_failed", "pass"],
      ["kill_switch_off", "pass"],
    ]);
  });

  it("denies a failed precondition, an unknown action type and a target of the wrong resource type", async () => {
    expect(
      (await verifyAction({ action_type: "retry_job", target: "blast_job/j-running", params: {} }, actions, state()))
        .reason,
    ).toBe("precondition job_failed does not hold");
    expect(
      (
        await verifyAction(
          { action_type: "retry_job", target: "blast_job/j-failed", params: {} },
          actions,
          state({ killSwitchOn: async () => true }),
        )
      ).verdict,
    ).toBe("deny");
    expect(
      (await verifyAction({ action_type: "format_disk", target: "blast_job/j-failed", params: {} }, actions, state()))
        .verdict,
    ).toBe("deny");
    expect(
      (await verifyAction({ action_type: "retry_job", target: "blast_database/nt", params: {} }, actions, state()))
        .verdict,
    ).toBe("deny");
    expect(
      (
        await verifyAction(
          { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 9 } },
          actions,
          state({ clusterReachable: async () => true }),
        )
      ).verdict,
    ).toBe("deny");
  });

  it("abstains, naming the missing evidence, when state cannot be observed or its reader fails", async () => {
    const unobserved = await verifyAction(
      { action_type: "redeploy_job_api", target: "job_api/default", params: {} },
      actions,
      state(),
    );
    expect(unobserved).toMatchObject({ verdict: "abstain", missing_evidence: ["cluster_reachable"] });
    const failing = await verifyAction(
      { action_type: "retry_job", target: "blast_job/j-failed", params: {} },
      actions,
      state({ killSwitchOn: async () => Promise.reject(new Error("table down")) }),
    );
    expect(failing).toMatchObject({ verdict: "abstain", missing_evidence: ["kill_switch_off"] });
  });
});

describe("incidents", () => {
  const event = (id: string, type: string, ref: string, at: string): OpsEvent => ({
    event_id: id,
    idempotency_key: id,
    source: "test",
    event_type: type,
    detected_at: at,
    ingested_at: at,
    mode: "shadow",
    correlation_id: id,
    resource_ref: ref,
    payload: null,
  });
  const windowMs = 30 * 60_000;

  it("correlate events on one resource within the window, keep severity monotonic and report each rise once", () => {
    const events = [
      event("e1", "preflight.failed", "blast_job/j-1", "2026-01-01T10:00:00.000Z"),
      event("e2", "job.failed", "blast_job/j-1", "2026-01-01T10:10:00.000Z"),
      event("e3", "preflight.failed", "blast_job/j-1", "2026-01-01T10:20:00.000Z"),
      event("e4", "job.failed", "blast_job/j-2", "2026-01-01T10:21:00.000Z"),
      event("e5", "job.failed", "blast_job/j-1", "2026-01-01T12:00:00.000Z"),
    ];
    const { incidents, severityChanges } = correlateIncidents(events, rules, {
      windowMs,
      now: new Date("2026-01-01T12:05:00Z"),
    });
    expect(incidents.map((i) => [i.resource_ref, i.member_event_ids, i.severity, i.state])).toEqual([
      ["blast_job/j-1", ["e1", "e2", "e3"], "medium", "quiet"],
      ["blast_job/j-2", ["e4"], "medium", "quiet"],
      ["blast_job/j-1", ["e5"], "medium", "open"],
    ]);
    // e3 (low) after e2 (medium) does not lower the severity, and only the rise low → medium is reported.
    expect(severityChanges).toHaveLength(1);
    expect(severityChanges[0]).toMatchObject({ from: "low", to: "medium", incident_id: incidents[0]?.incident_id });
    expect(incidents[0]?.rule_ids).toEqual(["R-JOB-002", "R-JOB-001"]);
    // Recomputing from the same events gives the same ids and notices.
    expect(
      correlateIncidents([...events].reverse(), rules, { windowMs, now: new Date("2026-01-01T12:05:00Z") })
        .severityChanges,
    ).toEqual(severityChanges);
  });

  it("publish a severity_changed notice once however often the rise is found again (fixed audit id)", async () => {
    const log = createEventLog(tables());
    const e1 = await log.record({
      idempotency_key: "k1",
      source: "test",
      event_type: "preflight.failed",
      correlation_id: "c",
      resource_ref: "blast_job/j-9",
      detected_at: "2026-01-01T10:00:00Z",
    });
    await log.record({
      idempotency_key: "k2",
      source: "test",
      event_type: "job.failed",
      correlation_id: "c",
      resource_ref: "blast_job/j-9",
      detected_at: "2026-01-01T10:01:00Z",
    });
    for (let replay = 0; replay < 2; replay++) {
      const { severityChanges } = correlateIncidents(await log.list(), rules, {
        windowMs,
        now: new Date("2026-01-01T10:02:00Z"),
      });
      await publishSeverityChanges(log, severityChanges);
    }
    const notices = await log.list({ event_type: SEVERITY_CHANGED });
    expect(notices).toHaveLength(1);
    expect(notices[0]?.correlation_id).toMatch(/^INC-/);
    // The notice is not itself a member of any incident.
    const again = correlateIncidents(await log.list(), rules, { windowMs, now: new Date("2026-01-01T10:02:00Z") });
    expect(again.incidents).toHaveLength(1);
    expect(again.incidents[0]?.member_event_ids[0]).toBe(e1.event_id);
  });
});

describe("audit query", () => {
  it("filters by event id, actor, decision, mode and time range, and pages with a cursor without repeats or gaps", async () => {
    let clock = Date.parse("2026-01-01T00:00:00Z");
    const audit = createAuditLog(tables(), {
      now: () => {
        clock += 1000;
        return new Date(clock);
      },
    });
    const actor = (n: number) => ({ oid: `oid-${n % 2}`, name: `User ${n % 2}` });
    for (let n = 0; n < 7; n++)
      await audit.record({
        actor: actor(n),
        action: "console.tool_call",
        target: "query_audit",
        outcome: "succeeded",
        request_id: `r${n}`,
        details: { event_id: `ev-${n % 3}`, decision: n % 2 ? "deny" : "eligible", mode: n < 4 ? "shadow" : "enforce" },
      });
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await queryAudit(audit, { page_size: 3, cursor });
      pages.push(page.entries.map((e) => e.request_id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(pages).toEqual([["r6", "r5", "r4"], ["r3", "r2", "r1"], ["r0"]]);
    const ids = async (q: Parameters<typeof queryAudit>[1]) =>
      (await queryAudit(audit, q)).entries.map((e) => e.request_id);
    expect(await ids({ page_size: 100, event_id: "ev-1" })).toEqual(["r4", "r1"]);
    expect(await ids({ page_size: 100, actor: "oid-1" })).toEqual(["r5", "r3", "r1"]);
    expect(await ids({ page_size: 100, actor: "User 0" })).toEqual(["r6", "r4", "r2", "r0"]);
    expect(await ids({ page_size: 100, decision: "deny" })).toEqual(["r5", "r3", "r1"]);
    expect(await ids({ page_size: 100, mode: "enforce" })).toEqual(["r6", "r5", "r4"]);
    expect(
      await ids({ page_size: 100, since: new Date("2026-01-01T00:00:03Z"), until: new Date("2026-01-01T00:00:05Z") }),
    ).toEqual(["r4", "r3", "r2"]);
    await expect(queryAudit(audit, { page_size: 3, cursor: "not-ours" })).rejects.toThrow("validation failed");
  });
});

describe("audit query past its scan bound", () => {
  it("C-081 pages on past the newest 1,000 entries instead of stopping there: the cursor reaches matches further back", async () => {
    let clock = Date.parse("2026-02-01T00:00:00Z");
    const audit = createAuditLog(tables(), {
      now: () => {
        clock += 10;
        return new Date(clock);
      },
    });
    // The two oldest entries are the only denials; 1,000 newer ones fill the first scan.
    const total = AUDIT_SCAN_LIMIT + 2;
    const record = (n: number) =>
      audit.record({
        actor: { oid: "oid-1", name: "User" },
        action: "console.tool_call",
        target: "query_audit",
        outcome: "succeeded",
        request_id: `deep-${n}`,
        details: { decision: n < 2 ? "deny" : "eligible" },
      });
    await record(0);
    await record(1);
    for (let n = 2; n < total; n += 100)
      await Promise.all(Array.from({ length: Math.min(100, total - n) }, (_, i) => record(n + i)));

    const found: string[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    do {
      const page = await queryAudit(audit, { decision: "deny", page_size: 10, cursor });
      found.push(...page.entries.map((e) => e.request_id));
      pages.push(page.entries.length);
      cursor = page.next_cursor;
    } while (cursor && pages.length < 10);
    expect(found).toEqual(["deep-1", "deep-0"]);
    // The first page read its bound and found nothing, yet said where to go on.
    expect(pages[0]).toBe(0);
    expect(cursor).toBeUndefined();

    // Without filters, pages of 100 walk the whole log once, newest first.
    const all: string[] = [];
    cursor = undefined;
    do {
      const page = await queryAudit(audit, { page_size: 100, cursor });
      all.push(...page.entries.map((e) => e.request_id));
      cursor = page.next_cursor;
    } while (cursor);
    const mine = all.filter((id) => id.startsWith("deep-"));
    expect(new Set(mine).size).toBe(total);
    expect(mine.slice(-2)).toEqual(["deep-1", "deep-0"]);
  }, 120_000);
});

describe("ops loop", () => {
  it("processes each new event once across two hosts, so explain_verdict has its trail, and publishes severity rises", async () => {
    const source = tables();
    const events = createEventLog(source);
    const audit = createAuditLog(source);
    const verify = async () => ({
      verdict: "abstain" as const,
      action_type: "retry_job",
      target: "blast_job/j-1",
      checks: [],
      missing_evidence: ["job_exists"],
      checked_at: new Date().toISOString(),
    });
    const loop = () =>
      createOpsLoop({ events, audit, rules, actions, verify, claims: source, incidentWindowMs: 1_800_000 });
    await events.record({
      idempotency_key: "l1",
      source: "dashboard.submit",
      event_type: "preflight.failed",
      correlation_id: "c",
      resource_ref: "blast_job/j-1",
    });
    await events.record({
      idempotency_key: "l2",
      source: "dashboard.submit",
      event_type: "job.failed",
      correlation_id: "c",
      resource_ref: "blast_job/j-1",
    });
    const [a, b] = await Promise.all([loop().runOnce("tick-a"), loop().runOnce("tick-b")]);
    expect([...a.processed, ...b.processed].sort()).toHaveLength(2);
    await loop().runOnce("tick-c");
    const trail = await audit.list({ action: "ops.event_processed" });
    expect(trail).toHaveLength(2);
    expect(trail.map((e) => e.details.rule_ids).sort()).toEqual([["R-JOB-001"], ["R-JOB-002"]]);
    expect(await events.list({ event_type: SEVERITY_CHANGED })).toHaveLength(1);
  });
});
