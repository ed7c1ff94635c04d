import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { type BriefingInput, composeBriefing } from "../../shared/notify/digests/briefing.js";
import { type Digests, mayBatch, periodAt, withLowSeverityDigests } from "../../shared/notify/digests/digests.js";
import { createIncidentNotices } from "../../shared/notify/emitters/incident-notices.js";
import { digestPeriodOf, parseNotificationMatrix } from "../../shared/notify/matrix.js";
import type { Notification } from "../../shared/notify/types.js";
import type { Incident } from "../../shared/ops/incidents/incidents.js";

const period = { from: "2026-11-23T00:00:00.000Z", to: "2026-11-30T00:00:00.000Z" };
const base: BriefingInput = { title: "Weekly override retrospective", period };

describe("the A4 briefing composer (spec §6 item 6)", () => {
  it("C-479 the same input gives the same briefing, whatever the order it arrives in", () => {
    const notices = [
      { severity: "low", template_key: "t", title: "b", correlation_id: "c2", at: "2026-11-24T10:00:00Z" },
      { severity: "info", template_key: "t", title: "a", correlation_id: "c1", at: "2026-11-24T09:00:00Z" },
    ] as const;
    const breaches = [
      { metric: "p99_latency_ms", value: 900, threshold: 500 },
      { metric: "error_rate", value: 0.2, threshold: 0.05 },
    ];
    const one = composeBriefing({ ...base, notices: [...notices], guard_breaches: breaches });
    const two = composeBriefing({ ...base, notices: [...notices].reverse(), guard_breaches: [...breaches].reverse() });
    expect(two).toEqual(one);
  });

  it("C-480 C-481 C-482 the incident tally by severity, the four action outcomes, the cost run-rate delta and forecast risk", () => {
    const b = composeBriefing({
      ...base,
      incidents: { critical: 1, high: 2, low: 4 },
      actions: { auto: 5, human_approved: 2, rolled_back: 1, observation_only: 3 },
      cost: { run_rate_before: 200, run_rate_now: 230, currency: "USD", forecast_risk: "medium" },
    });
    expect(b.lines).toEqual([
      "Incidents: 7 (critical 1, high 2, low 4).",
      "Actions: 11 — auto 5, human-approved 2, rolled back 1, observation only 3.",
      "Cost run-rate: 230.00 USD/day (+15.0% from 200.00 USD/day).",
      "Forecast risk: medium.",
    ]);
    expect(b.cost_delta).toBeCloseTo(0.15);
    expect(b.has_significant_activity).toBe(true);
  });

  it("C-483 guard-metric breaches are explicit escalations, first in the body and counted in the headline", () => {
    const b = composeBriefing({ ...base, guard_breaches: [{ metric: "error_rate", value: 0.2, threshold: 0.05 }] });
    expect(b.escalations).toEqual(["ESCALATION: guard metric error_rate at 0.2 breached its threshold 0.05."]);
    expect(b.headline).toBe("Weekly override retrospective: 2026-11-23 to 2026-11-30 — 1 escalation");
    expect(b.has_significant_activity).toBe(true);
  });

  it("C-484 an input left out gets no line: no zero incidents, no cost, no actions invented", () => {
    const b = composeBriefing({
      ...base,
      actions: { auto: 1, human_approved: 0, rolled_back: 0, observation_only: 0 },
    });
    expect(b.lines).toHaveLength(1);
    expect(b.lines.join("\n")).not.toMatch(/Incidents|Cost|Forecast|Notices|ESCALATION/);
    expect(b.cost_delta).toBeUndefined();
  });

  it("C-485 C-486 a quiet period — or one whose only change is a cost swing under 1% — has no significant activity", () => {
    const quiet = composeBriefing({
      ...base,
      incidents: {},
      actions: { auto: 0, human_approved: 0, rolled_back: 0, observation_only: 0 },
    });
    expect(quiet).toMatchObject({
      headline: "Weekly override retrospective: no significant activity",
      has_significant_activity: false,
    });
    const noise = composeBriefing({ ...base, cost: { run_rate_before: 200, run_rate_now: 201, currency: "USD" } });
    expect(noise.has_significant_activity).toBe(false);
    expect(noise.lines).toEqual(["Cost run-rate: 201.00 USD/day (+0.5% from 200.00 USD/day), within noise."]);
    const swing = composeBriefing({ ...base, cost: { run_rate_before: 200, run_rate_now: 196, currency: "USD" } });
    expect(swing.has_significant_activity).toBe(true);
    expect(swing.lines[0]).toContain("−2.0%");
  });

  it("batched notices are counted by severity and listed (at most 20, then a count)", () => {
    const notices = Array.from({ length: 23 }, (_, i) => ({
      severity: i % 2 === 0 ? ("low" as const) : ("info" as const),
      template_key: "ops.notice",
      title: `notice ${String(i).padStart(2, "0")}`,
      correlation_id: `c${i}`,
      at: `2026-11-24T10:${String(i).padStart(2, "0")}:00Z`,
    }));
    const b = composeBriefing({ ...base, notices });
    expect(b.lines[0]).toBe("Notices: 23 (low 12, info 11).");
    expect(b.lines[1]).toBe("- [low] notice 00");
    expect(b.lines.at(-1)).toBe("- … and 3 more notices");
  });
});

describe("digest periods (UTC)", () => {
  it("a day, an ISO week from Monday, a calendar month", () => {
    const at = new Date("2026-11-27T18:30:00Z"); // a Friday
    expect(periodAt("daily", at)).toEqual({
      start: new Date("2026-11-27T00:00:00Z"),
      end: new Date("2026-11-28T00:00:00Z"),
    });
    expect(periodAt("weekly", at)).toEqual({
      start: new Date("2026-11-23T00:00:00Z"),
      end: new Date("2026-11-30T00:00:00Z"),
    });
    expect(periodAt("weekly", new Date("2026-11-29T23:59:59Z")).start).toEqual(new Date("2026-11-23T00:00:00Z"));
    expect(periodAt("weekly", new Date("2026-11-30T00:00:00Z")).start).toEqual(new Date("2026-11-30T00:00:00Z"));
    expect(periodAt("monthly", new Date("2026-12-31T23:00:00Z"))).toEqual({
      start: new Date("2026-12-01T00:00:00Z"),
      end: new Date("2027-01-01T00:00:00Z"),
    });
  });

  it("a digest route's period is its `period`, else its name's suffix; only a4_digest routes have one", () => {
    const text = `matrix:
  version: 1
  default_route: ops
  channels:
    mail: { kind: email, categories: [A2, A4] }
  routes:
    ops: { trust_tier: a2_operational_alert, primary: mail }
    digest_shadow_accuracy_daily: { trust_tier: a4_digest, primary: mail }
    digest_retro: { trust_tier: a4_digest, primary: mail, period: weekly }
    digest_other: { trust_tier: a4_digest, primary: mail }
`;
    const m = parseNotificationMatrix("m.yaml", text);
    const of = (r: string) => digestPeriodOf(r, m.routes[r] as NonNullable<(typeof m.routes)[string]>);
    expect([of("digest_shadow_accuracy_daily"), of("digest_retro"), of("digest_other"), of("ops")]).toEqual([
      "daily",
      "weekly",
      undefined,
      undefined,
    ]);
    expect(() =>
      parseNotificationMatrix(
        "m.yaml",
        text.replace("primary: mail }\n    digest_shadow", "primary: mail, period: daily }\n    digest_shadow"),
      ),
    ).toThrow(/matrix\.routes\.ops\.period: only an a4_digest route has a digest period/);
  });

  it("low_severity_digest names an a4_digest route with a period, and only on an a2 route", () => {
    const text = (extra: string) => `matrix:
  version: 1
  default_route: ops
  channels:
    mail: { kind: email, categories: [A2, A4] }
  routes:
    ops: { trust_tier: a2_operational_alert, primary: mail, low_severity_digest: ${extra} }
    digest_notices_daily: { trust_tier: a4_digest, primary: mail }
    digest_undated: { trust_tier: a4_digest, primary: mail }
`;
    expect(parseNotificationMatrix("m.yaml", text("digest_notices_daily")).routes.ops?.low_severity_digest).toBe(
      "digest_notices_daily",
    );
    expect(() => parseNotificationMatrix("m.yaml", text("digest_undated"))).toThrow(
      /matrix\.routes\.ops\.low_severity_digest: digest_undated is not an a4_digest route with a period/,
    );
    expect(() => parseNotificationMatrix("m.yaml", text("nowhere"))).toThrow(/nowhere is not an a4_digest route/);
  });
});

describe("what may wait for a digest (batchable)", () => {
  const shipped = parseNotificationMatrix(
    "config/notifications-matrix.yaml",
    readFileSync(path.join(import.meta.dirname, "../../config/notifications-matrix.yaml"), "utf8"),
  );
  const incident = (severity: Incident["severity"], history: Incident["severity"][] = [severity]): Incident => ({
    incident_id: "INC-000000000001",
    resource_ref: "blast_job/j-1",
    correlation_key: "blast_job",
    state: "open",
    severity,
    opened_at: "2026-11-26T09:00:00.000Z",
    last_event_at: "2026-11-26T09:00:00.000Z",
    member_event_ids: history.map((_, i) => `e-${i}`),
    rule_ids: ["R-JOB-002"],
    severity_history: history.map((s, i) => ({ severity: s, at: "2026-11-26T09:00:00.000Z", event_id: `e-${i}` })),
  });

  /** The incident emitter over the shipped matrix's low-severity batching: what was batched, what was sent. */
  function emitterWorld() {
    const batched: string[] = [];
    const sent: Notification[] = [];
    const digests = {
      add: async (n: { route: string; template_key: string }) => {
        batched.push(`${n.route}:${n.template_key}`);
        return "batched" as const;
      },
      flush: async () => [],
    } as unknown as Digests;
    const notifier = withLowSeverityDigests(
      {
        send: async (m: Notification) => {
          sent.push(m);
          return { delivery_id: m.idempotency_key, confirmed: true, channel: "email", at: "2026-11-26T09:00:00Z" };
        },
      },
      digests,
      shipped,
    );
    return { batched, sent, notices: createIncidentNotices({ notifier, incidentOpenRoute: "incident_open" }) };
  }

  it("C-218 C-472 the opening notice of a low or info incident waits for the day's notices digest; a medium one is mailed at once", async () => {
    const w = emitterWorld();
    await w.notices([incident("low"), { ...incident("info"), incident_id: "INC-000000000002" }], []);
    expect(w.batched).toEqual(["digest_ops_notices_daily:incident.open", "digest_ops_notices_daily:incident.open"]);
    expect(w.sent).toEqual([]);
    await w.notices([{ ...incident("medium"), incident_id: "INC-000000000003" }], []);
    expect(w.sent.map((m) => [m.template_key, m.batchable])).toEqual([["incident.open", false]]);
  });

  it("C-218 an incident opened low that has since risen gets its opening notice at once, with the severity it opened at", async () => {
    const w = emitterWorld();
    await w.notices([incident("high", ["low", "high"])], []);
    expect(w.batched).toEqual([]);
    expect(w.sent.map((m) => [m.template_key, m.severity, m.params?.severity])).toEqual([
      ["incident.open", "low", "low"],
    ]);
  });

  it("C-453 C-455 a severity_changed notice is never batched, even a rise to low (spec §6 item 3: immediate delivery)", async () => {
    const w = emitterWorld();
    await w.notices(
      [],
      [{ incident_id: "INC-000000000001", from: "info", to: "low", at: "2026-11-26T09:00:00Z", audit_id: "sev-1" }],
    );
    expect(w.batched).toEqual([]);
    expect(w.sent.map((m) => [m.template_key, m.batchable, m.audit_id])).toEqual([
      ["incident.severity_changed", false, "sev-1"],
    ]);
  });

  it("C-012 the router batches only an A2 low/info notice an emitter marked batchable, never a fan-out page, an A1 request or anything above low", () => {
    const base: Notification = {
      category: "A2",
      template_key: "ops.notice",
      recipient: "operational",
      title: "t",
      body_markdown: "b",
      correlation_id: "c",
      idempotency_key: "k",
      severity: "low",
      batchable: true,
    };
    expect(mayBatch(base)).toBe(true);
    expect(mayBatch({ ...base, severity: "info" })).toBe(true);
    expect(mayBatch({ ...base, batchable: undefined })).toBe(false);
    expect(mayBatch({ ...base, severity: "medium" })).toBe(false);
    expect(mayBatch({ ...base, severity: undefined })).toBe(false);
    // The kill switch's announcement and break-glass pages go to every channel at once.
    expect(mayBatch({ ...base, fan_out: "all" })).toBe(false);
    expect(mayBatch({ ...base, category: "A1" })).toBe(false);
    expect(mayBatch({ ...base, category: "A4" })).toBe(false);
  });
});
