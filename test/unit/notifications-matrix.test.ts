import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import {
  checkOperationalRoute,
  NotificationRouteUnavailableError,
  parseNotificationMatrix,
} from "../../shared/notify/matrix.js";
import { loadNotifyConfig } from "../../shared/notify/notify-config.js";
import { scanOutbound } from "../../shared/notify/outbound-scan.js";
import { escapeMrkdwn, SECTION_LIMIT, sectionText } from "../../shared/notify/channels/platform-b.js";
import { CatalogLoadError } from "../../shared/ops/catalog/json-catalog.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SHIPPED = path.join(ROOT, "config/notifications-matrix.yaml");

const base = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    teams:
      kind: platform_a
      categories: [A1, A2]
    email:
      kind: email
      categories: [A2, A4]
    hook:
      kind: webhook
      categories: [A2]
    pager:
      kind: paging
      categories: [A2]
      runbook_url: https://runbooks.example/ops
  routes:
    hil_approval:
      trust_tier: a1_hil_approval
      primary: teams
    operational_alert:
      trust_tier: a2_operational_alert
      primary: pager
      fallback: [hook, email]
`;

/** The refusal of a matrix text: `file:line: field: problem`. */
function refusal(text: string): CatalogLoadError {
  try {
    parseNotificationMatrix("notifications-matrix.yaml", text);
  } catch (error) {
    if (error instanceof CatalogLoadError) return error;
    throw error;
  }
  throw new Error("the matrix loaded");
}

const lineOf = (text: string, needle: string) => text.split("\n").findIndex((l) => l.includes(needle)) + 1;

describe("config/notifications-matrix.yaml (spec §2.5, §8 special routing rules)", () => {
  it("C-243 C-244 C-245 C-246 C-247 C-248 C-250 C-251 the shipped matrix is version 1, loads, and defines hil_approval, operational_alert and digest_shadow_accuracy_daily", () => {
    const matrix = parseNotificationMatrix(SHIPPED, readFileSync(SHIPPED, "utf8"));
    expect(matrix.version).toBe(1);
    expect(matrix.routes[matrix.default_route]).toBeDefined();
    expect(Object.keys(matrix.routes)).toEqual(
      expect.arrayContaining(["hil_approval", "operational_alert", "digest_shadow_accuracy_daily"]),
    );
    for (const route of Object.values(matrix.routes)) {
      expect(["a1_hil_approval", "a2_operational_alert", "a4_digest"]).toContain(route.trust_tier);
      for (const id of [route.primary, ...route.fallback]) expect(matrix.channels[id]).toBeDefined();
      if (route.on_all_fail) expect(matrix.routes[route.on_all_fail]).toBeDefined();
    }
    expect(matrix.routes.hil_approval?.on_all_fail).toBe("hil_escalate");
  });

  it("a version other than 1 is refused naming its line", () => {
    const text = base.replace("version: 1", "version: 2");
    const e = refusal(text);
    expect(e.message).toMatch(/^notifications-matrix\.yaml:2: matrix\.version: must be 1/);
  });

  it("C-518 C-361 C-365 C-368 a category outside the channel kind's trust matrix is refused at load (A1 on email, A4 on a webhook)", () => {
    const a1Email = base.replace("categories: [A2, A4]", "categories: [A1, A2, A4]");
    expect(refusal(a1Email).message).toBe(
      `notifications-matrix.yaml:${lineOf(a1Email, "[A1, A2, A4]")}: matrix.channels.email.categories.0: A1 is not allowed on a email channel (spec §5 item 4 allows A2, A4)`,
    );
    const a4Hook = base.replace("kind: webhook\n      categories: [A2]", "kind: webhook\n      categories: [A2, A4]");
    expect(refusal(a4Hook).message).toMatch(/matrix\.channels\.hook\.categories\.1: A4 is not allowed on a webhook/);
  });

  it("C-518 a route whose category its primary does not declare is refused", () => {
    const text = base.replace("primary: teams", "primary: hook");
    expect(refusal(text).message).toBe(
      `notifications-matrix.yaml:${lineOf(text, "primary: hook")}: matrix.routes.hil_approval.primary: channel hook does not declare A1, the category of a1_hil_approval`,
    );
  });

  it("C-519 C-376 C-377 a fallback that lowers the trust tier (an A1 route falling back to email) is a load error", () => {
    const text = base.replace("      primary: teams\n", "      primary: teams\n      fallback: [email]\n");
    expect(refusal(text).message).toBe(
      `notifications-matrix.yaml:${lineOf(text, "fallback: [email]")}: matrix.routes.hil_approval.fallback.0: fallback email lowers the trust tier: a1_hil_approval needs A1 and email declares A2, A4`,
    );
  });

  it("an unknown channel, a channel twice in one route, an unknown on_all_fail and an on_all_fail cycle are refused", () => {
    expect(refusal(base.replace("fallback: [hook, email]", "fallback: [hook, sms]")).message).toMatch(
      /matrix\.routes\.operational_alert\.fallback\.1: unknown channel: sms/,
    );
    expect(refusal(base.replace("fallback: [hook, email]", "fallback: [hook, pager]")).message).toMatch(
      /fallback\.1: channel pager appears twice: a cycle in the fallbacks/,
    );
    expect(refusal(base.replace("primary: teams", "primary: teams\n      on_all_fail: nowhere")).message).toMatch(
      /matrix\.routes\.hil_approval\.on_all_fail: unknown route: nowhere/,
    );
    const cycle = `${base.replace("primary: teams", "primary: teams\n      on_all_fail: hil_escalate")}    hil_escalate:
      trust_tier: a1_hil_approval
      primary: teams
      on_all_fail: hil_approval
`;
    expect(refusal(cycle).message).toMatch(/on_all_fail: a cycle: hil_approval → hil_escalate → hil_approval/);
  });

  it("C-520 the role-dm audience is refused on any route but the break-glass usage summary", () => {
    const text = `${base}    digest_weekly:
      trust_tier: a4_digest
      primary: email
      audience: role-dm
`;
    expect(refusal(text).message).toBe(
      `notifications-matrix.yaml:${lineOf(text, "audience: role-dm")}: matrix.routes.digest_weekly.audience: role-dm is only for the break-glass usage summary (digest_break_glass_usage)`,
    );
    const dm = text.replace("digest_weekly", "digest_break_glass_usage");
    const ok = dm
      .replace("categories: [A1, A2]", "categories: [A1, A2, A4]")
      .replace("primary: email\n      audience", "primary: teams\n      audience");
    expect(parseNotificationMatrix("m.yaml", ok).routes.digest_break_glass_usage?.audience).toBe("role-dm");
  });

  it("C-478 C-520 a role-dm route names only per-recipient channels: a direct message never posts to a shared audience", () => {
    const text = `${base.replace("categories: [A1, A2]", "categories: [A1, A2, A4]")}    digest_break_glass_usage:
      trust_tier: a4_digest
      period: weekly
      audience: role-dm
      primary: teams
      fallback: [email]
`;
    expect(refusal(text).message).toBe(
      `notifications-matrix.yaml:${lineOf(text, "fallback: [email]")}: matrix.routes.digest_break_glass_usage.fallback.0: email is a channel of kind email, which posts to a shared audience; a role-dm route names only per-recipient channels (platform_a, platform_a_guest, local_inbox)`,
    );
  });

  it("C-521 mention-artifact-owner needs its metadata fields, and only the four listed ones", () => {
    const route = (extra: string) => `${base}    digest_override_retro:
      trust_tier: a4_digest
      primary: email
      audience: mention-artifact-owner
${extra}`;
    expect(refusal(route("")).message).toMatch(
      /digest_override_retro\.audience: mention-artifact-owner needs metadata_fields \(rule_author, override_requester, exemption_requester, pr_author_and_reviewers\)/,
    );
    expect(refusal(route("      metadata_fields: [owner_email]\n")).message).toMatch(
      /digest_override_retro\.metadata_fields\.0: Invalid option/,
    );
    expect(
      parseNotificationMatrix("m.yaml", route("      metadata_fields: [rule_author, override_requester]\n")).routes
        .digest_override_retro?.metadata_fields,
    ).toEqual(["rule_author", "override_requester"]);
  });

  it("C-516 C-522 a paging channel without a runbook URL is refused, and every channel's retry budget is bounded", () => {
    const text = base.replace("      runbook_url: https://runbooks.example/ops\n", "");
    expect(refusal(text).message).toMatch(/matrix\.channels\.pager: a paging channel needs runbook_url/);
    expect(refusal(base.replace("kind: webhook", "kind: webhook\n      retry: { max_attempts: 50 }")).message).toMatch(
      /matrix\.channels\.hook\.retry\.max_attempts: Too big/,
    );
    const matrix = parseNotificationMatrix("m.yaml", base);
    for (const channel of Object.values(matrix.channels)) expect(channel.retry.max_attempts).toBeLessThanOrEqual(5);
  });

  it("not valid YAML is refused with its line", () => {
    expect(refusal("matrix:\n  version: 1\n  routes: [\n").message).toMatch(
      /^notifications-matrix\.yaml:\d+: not valid YAML/,
    );
  });
});

describe("start-up rule: an A2 channel on operational_alert (spec §6 item 4, §8)", () => {
  const matrix = parseNotificationMatrix("m.yaml", base);

  it("C-525 a non-local start with no registered A2 channel on operational_alert refuses to start", () => {
    expect(() => checkOperationalRoute(matrix, new Set(["teams"]), { local: false, log: () => undefined })).toThrow(
      NotificationRouteUnavailableError,
    );
    expect(checkOperationalRoute(matrix, new Set(["hook"]), { local: false, log: () => undefined })).toBe(true);
  });

  it("C-456 C-457 a local start logs notification_route_unavailable at INFO and keeps fail-closed escalation", () => {
    const logged: [string, Record<string, unknown>][] = [];
    expect(checkOperationalRoute(matrix, new Set(), { local: true, log: (m, f) => logged.push([m, f]) })).toBe(false);
    expect(logged).toEqual([
      [
        "notification_route_unavailable",
        {
          event: "notification_route_unavailable",
          route: "operational_alert",
          escalation: "fail_closed_human_approval_queue",
        },
      ],
    ]);
  });
});

describe("notification settings (issue 25; spec §2.6, §7 item 8)", () => {
  const catalogDir = path.join(ROOT, "config");

  it("C-525 the shipped matrix with no channel settings refuses a non-local start, and starts locally", () => {
    expect(() => loadNotifyConfig({}, { local: false, catalogDir })).toThrow(/notification_route_unavailable/);
    const logged: string[] = [];
    const config = loadNotifyConfig({}, { local: true, catalogDir, log: (m) => logged.push(m) });
    expect(config.registered.size).toBe(0);
    expect(logged).toEqual(["notification_route_unavailable"]);
  });

  it("C-252 C-498 a channel registers only from its settings, and a half-configured channel refuses to start naming what is missing", () => {
    const config = loadNotifyConfig(
      { SVC_WEBHOOK_URL: "https://hooks.example/in", SVC_WEBHOOK_SECRET_REF: "kv:webhook-secret" },
      { local: false, catalogDir },
    );
    expect([...config.registered]).toEqual(["webhook"]);
    const e = (() => {
      try {
        loadNotifyConfig({ SVC_WEBHOOK_URL: "https://hooks.example/in" }, { local: false, catalogDir });
      } catch (error) {
        return error;
      }
    })();
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).problems).toEqual(["SVC_WEBHOOK_SECRET_REF: is required for the webhook channel"]);
  });

  it("env: references, plain-HTTP vendor URLs and the local inbox are refused outside the local profile", () => {
    const e = (() => {
      try {
        loadNotifyConfig(
          {
            SVC_WEBHOOK_URL: "http://hooks.example/in",
            SVC_WEBHOOK_SECRET_REF: "env:WEBHOOK_SECRET",
            SVC_NOTIFY_INBOX_DIR: "/tmp/inbox",
          },
          { local: false, catalogDir },
        );
      } catch (error) {
        return error as ConfigError;
      }
    })();
    expect(e?.problems).toEqual([
      "SVC_WEBHOOK_SECRET_REF: env: references are for the local profile only (use kv:<secret name>)",
      "SVC_WEBHOOK_URL: must be https:// outside the local profile",
      "SVC_NOTIFY_INBOX_DIR: the local inbox is for the local profile only",
    ]);
  });

  it("a secret value in a setting is refused: only references are accepted", () => {
    expect(() =>
      loadNotifyConfig(
        { SVC_PAGING_ROUTING_KEY_REF: "R0123456789ABCDEF0123456789ABCDEF" },
        { local: true, catalogDir },
      ),
    ).toThrow(/SVC_PAGING_ROUTING_KEY_REF: must be a secret reference/);
    expect(() =>
      loadNotifyConfig({ SVC_SMTP_URL: "smtp://user:pw@mail.example:587" }, { local: true, catalogDir }),
    ).toThrow(/SVC_SMTP_URL: must not carry credentials/);
  });
});

describe("outbound secret scan and chat platform B limits", () => {
  it("C-526 C-534 C-535 C-536 C-237 C-238 secrets, bearer values, subscription ids and e-mail addresses are redacted; opaque ids stay", () => {
    const sub = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    const text = `Approval apr_7f3k2 failed: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2ln, Bearer:abcdefgh12345678 password=hunter2secret on /subscriptions/${sub}/resourceGroups/rg for alice@contoso.com (xoxb-1234567890-abcdefghij)`;
    const { text: out, redacted } = scanOutbound(text);
    expect(redacted).toBeGreaterThanOrEqual(6);
    for (const leaked of ["eyJhbGci", "abcdefgh12345678", "hunter2secret", sub, "alice@contoso.com", "xoxb-"])
      expect(out).not.toContain(leaked);
    expect(out).toContain("apr_7f3k2");
  });

  it("C-514 C-241 a section is at most 2,900 characters after escaping, never cut inside an entity, with the channel truncation marker", () => {
    const long = "<b>&".repeat(2000);
    const { text, degraded } = sectionText(long);
    expect(degraded).toBe(true);
    expect(text.length).toBeLessThanOrEqual(SECTION_LIMIT);
    expect(text.endsWith("[CHANNEL OUTPUT TRUNCATED]")).toBe(true);
    expect(text.replace("\n[CHANNEL OUTPUT TRUNCATED]", "")).toMatch(/^(&lt;b&gt;&amp;)+(&lt;b&gt;|&lt;b|&lt;)?$/);
    expect(sectionText("a < b")).toEqual({ text: escapeMrkdwn("a < b"), degraded: false });
  });
});
