import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { createApprovalStore } from "../../shared/console/approvals/approval-store.js";
import { createKillSwitchAnnouncer } from "../../shared/console/approvals/kill-switch-announcer.js";
import { activateBreakGlass, BreakGlassDeniedError } from "../../shared/console/break-glass/break-glass.js";
import { createEmailChannel } from "../../shared/notify/channels/email.js";
import { createPagingChannel } from "../../shared/notify/channels/paging.js";
import { createPlatformBChannel } from "../../shared/notify/channels/platform-b.js";
import { createWebhookChannel } from "../../shared/notify/channels/webhook.js";
import { createDeliveryStore, type DeliveryStore } from "../../shared/notify/delivery-store.js";
import { createDigestSources } from "../../shared/notify/digests/digest-sources.js";
import { createDigests, periodAt, withLowSeverityDigests } from "../../shared/notify/digests/digests.js";
import { createIncidentNotices } from "../../shared/notify/emitters/incident-notices.js";
import { parseNotificationMatrix } from "../../shared/notify/matrix.js";
import { createDurableNotifier } from "../../shared/notify/notify-queue.js";
import { type ChannelAdapter, createNotificationRouter } from "../../shared/notify/router.js";
import type { Notification } from "../../shared/notify/types.js";
import { createActionOutcomeStore } from "../../shared/ops/actions/action-outcomes.js";
import { type AuditLog, createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog } from "../../shared/ops/events.js";
import { createOpsLoop } from "../../shared/ops/ops-loop.js";
import { createDurableQueue, type DurableQueueOptions } from "../../shared/storage/durable-queue.js";
import { actions, rules } from "../support/console-harness.js";
import { prng } from "../support/helpers.js";
import type { KillChildConfig } from "../support/notify-kill-child.js";
import { killTestMessage } from "../support/notify-kill-messages.js";
import {
  postedArgs,
  startPagingFake,
  startPlatformBFake,
  startSmtpFake,
  startWebhookReceiver,
  testCertificate,
} from "../support/notify-vendors.js";
import { prefixedTables, startTestAzurite } from "../support/service-fakes.js";

const WEBHOOK_SECRET = `whsec_${Buffer.from("a-test-webhook-secret-of-32-bytes").toString("base64")}`;
const ROUTING_KEY = "R0123456789ABCDEF0123456789ABCDE";
const SLACK_TOKEN = "xoxb-test-1234567890-abcdefghij";

const MATRIX = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    pager:
      kind: paging
      categories: [A2]
      runbook_url: https://runbooks.example/ops
      retry: { max_attempts: 2, initial_backoff_ms: 100, max_backoff_ms: 5000 }
    slack:
      kind: platform_b
      categories: [A2, A4]
      retry: { max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5000 }
    slack_ko:
      kind: platform_b
      categories: [A2]
      locale: ko
    hook:
      kind: webhook
      categories: [A2]
      timeout_ms: 500
      retry: { max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5000 }
    mail:
      kind: email
      categories: [A2, A4]
    teams:
      kind: platform_a
      categories: [A1, A2]
  routes:
    hil_approval:
      trust_tier: a1_hil_approval
      primary: teams
    operational_alert:
      trust_tier: a2_operational_alert
      primary: pager
      fallback: [slack, hook]
      on_all_fail: incident_open
    incident_open:
      trust_tier: a2_operational_alert
      primary: mail
    slack_only:
      trust_tier: a2_operational_alert
      primary: slack
    slack_ko_only:
      trust_tier: a2_operational_alert
      primary: slack_ko
    hook_only:
      trust_tier: a2_operational_alert
      primary: hook
    pager_only:
      trust_tier: a2_operational_alert
      primary: pager
    digest_ops_notices_daily:
      trust_tier: a4_digest
      primary: slack
    hook_with_digest:
      trust_tier: a2_operational_alert
      primary: hook
      low_severity_digest: digest_ops_notices_daily
    digest_kpi_cost_monthly:
      trust_tier: a4_digest
      primary: slack
`;

let azurite: RunningAzurite;
let tls: { key: string; cert: string };
let pager: Awaited<ReturnType<typeof startPagingFake>>;
let slack: Awaited<ReturnType<typeof startPlatformBFake>>;
let hook: Awaited<ReturnType<typeof startWebhookReceiver>>;
let smtp: Awaited<ReturnType<typeof startSmtpFake>>;
let counter = 0;

beforeAll(async () => {
  tls = testCertificate();
  [azurite, pager, slack, hook, smtp] = await Promise.all([
    startTestAzurite(),
    startPagingFake(tls),
    startPlatformBFake(SLACK_TOKEN),
    startWebhookReceiver(),
    startSmtpFake(tls, { auth: { user: "notify", pass: "smtp-password" } }),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([azurite?.stop(), pager?.close(), slack?.close(), hook?.close(), smtp?.close()]);
});

interface World {
  send: ReturnType<typeof createNotificationRouter>["send"];
  tables: ReturnType<typeof prefixedTables>;
  deliveries: DeliveryStore;
  audit: AuditLog;
  waits: number[];
  adapters: Map<string, ChannelAdapter>;
  /** A second router over the same tables: another host, or the same one after a restart. */
  otherHost(): ReturnType<typeof createNotificationRouter>;
}

/** Makes the world's pager hold each send until `release()`; `inPager` resolves once a send is held. */
function holdPager(w: World, vendorMessageId: string): { inPager: Promise<void>; release: () => void } {
  let entered: () => void = () => undefined;
  const inPager = new Promise<void>((resolve) => {
    entered = resolve;
  });
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  w.adapters.set("pager", {
    kind: "paging",
    operation: "events.enqueue",
    send: async () => {
      entered();
      await released;
      return { outcome: "acknowledged", vendor_message_id: vendorMessageId };
    },
  });
  return { inPager, release };
}

/** A router over fresh tables, the real adapters and the local vendor servers; waits are recorded, not slept. */
function world(): World {
  const tables = prefixedTables(azurite.connectionString, `nch${++counter}x${Date.now().toString(36)}`);
  const matrix = parseNotificationMatrix("matrix.yaml", MATRIX);
  const adapters = new Map<string, ChannelAdapter>([
    [
      "pager",
      createPagingChannel({
        eventsUrl: `${pager.url}/v2/enqueue`,
        routingKey: ROUTING_KEY,
        defaultRunbookUrl: "https://runbooks.example/ops",
        ca: tls.cert,
      }),
    ],
    ["slack", createPlatformBChannel({ apiUrl: `${slack.url}/api/`, token: SLACK_TOKEN, channel: "C0ALERTS" })],
    ["hook", createWebhookChannel({ url: `${hook.url}/in`, secret: WEBHOOK_SECRET })],
    ["slack_ko", createPlatformBChannel({ apiUrl: `${slack.url}/api/`, token: SLACK_TOKEN, channel: "C0KOREAN" })],
  ]);
  const deliveries = createDeliveryStore(tables);
  const audit = createAuditLog(tables);
  const waits: number[] = [];
  const make = () =>
    createNotificationRouter({
      matrix,
      channels: adapters,
      deliveries,
      audit,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
  return { send: make().send, tables, deliveries, audit, waits, adapters, otherHost: make };
}

const alert = (overrides: Partial<Notification> = {}): Notification => ({
  category: "A2",
  template_key: "ops.alert",
  recipient: "operational",
  title: "Queue saturated",
  body_markdown: "The BLAST queue has been saturated for 10 minutes.",
  correlation_id: `corr-${++counter}`,
  audit_id: `aud-${counter}`,
  idempotency_key: `ops.alert/${counter}`,
  severity: "high",
  ...overrides,
});

const clear = () => {
  for (const f of [pager, slack, hook]) {
    f.requests.length = 0;
    f.script.length = 0;
  }
};

describe("paging (PagerDuty Events API v2 over HTTPS)", () => {
  it("C-515 C-516 C-204 a page is a trigger with dedup_key = the correlation id and a runbook link; the 202's dedup_key is the acknowledgement", async () => {
    clear();
    const w = world();
    const message = alert({ route: "pager_only" });
    const receipt = await w.send(message);
    expect(receipt).toMatchObject({ confirmed: true, state: "delivered", channel: "pager" });
    expect(receipt.channels?.[0]).toMatchObject({
      channel: "pager",
      kind: "paging",
      operation: "events.enqueue",
      state: "delivered",
      vendor_message_id: message.correlation_id,
      text_degraded: false,
      attempts: 1,
    });
    const event = JSON.parse(pager.requests[0]?.body ?? "{}");
    expect(event).toMatchObject({
      routing_key: ROUTING_KEY,
      event_action: "trigger",
      dedup_key: message.correlation_id,
      payload: {
        severity: "error",
        source: "blastplane",
        custom_details: { runbook_url: "https://runbooks.example/ops" },
      },
      links: [{ href: "https://runbooks.example/ops", text: "Runbook" }],
    });
    // Sent again (a retried activity, or another host): one vendor call in all.
    await w.otherHost().send(message);
    expect(pager.requests).toHaveLength(1);
  });

  it("C-296 C-505 a 202 without the event's dedup_key is ambiguous: not retried, and the fallback is taken", async () => {
    clear();
    const w = world();
    pager.script.push({ status: 202, body: '{"status":"success"}' });
    const receipt = await w.send(alert());
    expect(pager.requests).toHaveLength(1);
    expect(receipt.channels?.map((c) => [c.channel, c.state, c.attempts])).toEqual([
      ["pager", "ambiguous", 1],
      ["slack", "delivered", 1],
    ]);
    expect(receipt).toMatchObject({ confirmed: true, state: "delivered", channel: "slack" });
  });

  it("C-294 C-366 the service's 400 (a wrong routing key) is a definitive failure without a retry", async () => {
    clear();
    const w = world();
    const adapter = createPagingChannel({
      eventsUrl: `${pager.url}/v2/enqueue`,
      routingKey: "short",
      defaultRunbookUrl: "https://runbooks.example/ops",
      ca: tls.cert,
    });
    const outcome = await adapter.send(
      { ...alert(), locale: "en" },
      { signal: AbortSignal.timeout(5000), attempt: 1, messageId: "m1" },
    );
    expect(outcome).toEqual({ outcome: "rejected", retryable: false, reason: "http_400" });
    expect(w.waits).toEqual([]);
  });

  it("C-516 a page with no runbook URL anywhere is refused before any call", async () => {
    clear();
    const adapter = createPagingChannel({
      eventsUrl: `${pager.url}/v2/enqueue`,
      routingKey: ROUTING_KEY,
      defaultRunbookUrl: undefined,
      ca: tls.cert,
    });
    const outcome = await adapter.send(
      { ...alert(), locale: "en" },
      { signal: AbortSignal.timeout(5000), attempt: 1, messageId: "m2" },
    );
    expect(outcome).toMatchObject({ outcome: "rejected", retryable: false, reason: "runbook_url_missing" });
    expect(pager.requests).toHaveLength(0);
  });
});

describe("chat platform B (Slack Web API through @slack/web-api)", () => {
  it("C-503 C-514 C-241 C-204 chat.postMessage with blocks; ok + ts is the acknowledgement; a long body is clipped to 2,900 characters after escaping and flagged degraded", async () => {
    clear();
    const w = world();
    const receipt = await w.send(
      alert({ route: "slack_only", body_markdown: `<script> & ${"queue saturated ".repeat(250)}` }),
    );
    expect(receipt.channels?.[0]).toMatchObject({
      channel: "slack",
      operation: "chat.postMessage",
      state: "delivered",
      text_degraded: true,
    });
    expect(receipt.channels?.[0]?.vendor_message_id).toMatch(/^\d+\.\d+$/);
    const args = postedArgs(slack.requests[0] ?? { path: "", headers: {}, body: "" });
    expect(args.channel).toBe("C0ALERTS");
    const blocks = args.blocks as { type: string; text?: { text: string } }[];
    const section = blocks.find((b) => b.type === "section")?.text?.text ?? "";
    expect(section.length).toBeLessThanOrEqual(2900);
    expect(section.startsWith("&lt;script&gt; &amp; ")).toBe(true);
    expect(section.endsWith("[CHANNEL OUTPUT TRUNCATED]")).toBe(true);
  });

  it("C-249 C-540 a channel declared `locale: ko` gets the template's Korean text, another the English, from the same message", async () => {
    clear();
    const w = world();
    const change = {
      template_key: "incident.severity_changed",
      params: { incident_id: "inc-ko-1", from: "medium", to: "high", at: "2026-11-27T21:00:00Z" },
    };
    for (const route of ["slack_ko_only", "slack_only"])
      expect((await w.send(alert({ ...change, route }))).state).toBe("delivered");
    const sections = slack.requests.map((r) => {
      const args = postedArgs(r);
      const blocks = args.blocks as { type: string; text?: { text: string } }[];
      return { channel: args.channel, text: blocks.map((b) => b.text?.text ?? "").join("\n") };
    });
    expect(sections.map((s) => s.channel)).toEqual(["C0KOREAN", "C0ALERTS"]);
    expect(sections[0]?.text).toContain("인시던트 inc-ko-1의 확정 심각도가");
    expect(sections[1]?.text).toContain("The committed severity of incident inc-ko-1 rose from medium to high");
    expect(sections[1]?.text).not.toMatch(/[\uAC00-\uD7A3]/);
  });

  it("C-522 a 429 is retried after its Retry-After within the budget; a 429 storm spends the budget and the router moves on (C-523)", async () => {
    clear();
    const w = world();
    slack.script.push({ status: 429, headers: { "retry-after": "2" }, body: '{"ok":false,"error":"ratelimited"}' });
    const once = await w.send(alert({ route: "slack_only" }));
    expect(once.channels?.[0]).toMatchObject({ state: "delivered", attempts: 2 });
    expect(w.waits).toEqual([2000]);

    clear();
    for (let i = 0; i < 3; i++)
      slack.script.push({ status: 429, headers: { "retry-after": "1" }, body: '{"ok":false,"error":"ratelimited"}' });
    pager.script.push({ status: 500 }, { status: 500 });
    const storm = await w.send(alert());
    expect(storm.channels?.map((c) => [c.channel, c.state, c.attempts, c.reason])).toEqual([
      ["pager", "definitive_failure", 2, "http_500"],
      ["slack", "definitive_failure", 3, "http_429"],
      ["hook", "delivered", 1, undefined],
    ]);
    expect(slack.requests).toHaveLength(3);
  });

  it("C-503 ok:false (a platform error) is a definitive failure; a 200 whose body is not the API's JSON is ambiguous, never retried", async () => {
    clear();
    const bad = createPlatformBChannel({
      apiUrl: `${slack.url}/api/`,
      token: "xoxb-wrong-token-0000000000",
      channel: "C0ALERTS",
    });
    expect(
      await bad.send({ ...alert(), locale: "en" }, { signal: AbortSignal.timeout(5000), attempt: 1, messageId: "m" }),
    ).toMatchObject({ outcome: "rejected", retryable: false, reason: "platform_error: invalid_auth" });
    const w = world();
    slack.script.push({ status: 200, body: "<html>gateway</html>", headers: { "content-type": "text/html" } });
    const receipt = await w.send(alert({ route: "slack_only" }));
    expect(receipt.state).toBe("ambiguous");
    expect(slack.requests).toHaveLength(2);
  });
});

describe("generic webhook (Standard Webhooks)", () => {
  it("C-362 the delivery verifies with standardwebhooks' own verify; a retry after a 503 keeps the same webhook-id, so a receiver deduplicates", async () => {
    clear();
    const w = world();
    hook.script.push({ status: 503 });
    const message = alert({ route: "hook_only" });
    const receipt = await w.send(message);
    expect(receipt.channels?.[0]).toMatchObject({ channel: "hook", state: "delivered", attempts: 2 });
    expect(hook.requests).toHaveLength(2);
    const [first, second] = hook.requests;
    expect(first?.headers["webhook-id"]).toBe(second?.headers["webhook-id"]);
    const payload = new Webhook(WEBHOOK_SECRET).verify(second?.body ?? "", second?.headers as Record<string, string>);
    expect(payload).toMatchObject({
      type: "blastplane.ops.alert",
      data: { category: "A2", correlation_id: message.correlation_id, audit_id: message.audit_id },
    });
    // A tampered body does not verify.
    expect(() =>
      new Webhook(WEBHOOK_SECRET).verify(`${second?.body} `, second?.headers as Record<string, string>),
    ).toThrow();
  });

  it("C-295 a cut connection and a receiver that hangs past the time limit are ambiguous and not retried", async () => {
    clear();
    const w = world();
    hook.script.push("cut");
    const cut = await w.send(alert({ route: "hook_only" }));
    expect(cut.channels?.[0]).toMatchObject({ state: "ambiguous", attempts: 1, reason: "transport_interrupted" });
    hook.script.push("hang");
    const hung = await w.send(alert({ route: "hook_only" }));
    expect(hung.channels?.[0]).toMatchObject({ state: "ambiguous", attempts: 1, reason: "timeout" });
    expect(hook.requests).toHaveLength(2);
  });
});

describe("email (nodemailer over SMTP with STARTTLS)", () => {
  it("C-218 C-219 C-220 the incident-open email goes over STARTTLS with the incident's fields and an HTTPS console link", async () => {
    smtp.messages.length = 0;
    const adapter = createEmailChannel({
      url: smtp.url,
      from: "blastplane@ops.example",
      to: ["oncall@ops.example", "lead@ops.example"],
      credential: { user: "notify", pass: "smtp-password" },
      consoleBaseUrl: "https://console.ops.example",
      ca: tls.cert,
    });
    const outcome = await adapter.send(
      {
        ...alert({
          template_key: "incident.open",
          params: {
            incident_id: "inc_20261127_0042",
            status: "open",
            severity: "high",
            opened_at: "2026-11-27T10:00:00Z",
            member_count: 7,
            assignment: "unassigned",
            audit_id: "aud_7c1",
          },
        }),
        locale: "en",
      },
      { signal: AbortSignal.timeout(10_000), attempt: 1, messageId: "abc123" },
    );
    expect(outcome).toMatchObject({ outcome: "acknowledged" });
    expect(smtp.messages).toHaveLength(1);
    const mail = smtp.messages[0];
    expect(mail?.secure).toBe(true);
    expect(mail?.to).toEqual(["oncall@ops.example", "lead@ops.example"]);
    // Quoted-printable, decoded.
    const raw = (mail?.raw ?? "")
      .replace(/=\r?\n/g, "")
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    for (const field of [
      "inc_20261127_0042",
      "Status: open",
      "Severity: high",
      "2026-11-27T10:00:00Z",
      "Events: 7",
      "Assignment: unassigned",
      "aud_7c1",
    ])
      expect(raw).toContain(field);
    expect(raw).toContain("https://console.ops.example/console?incident=inc_20261127_0042");
  });

  it("an SMTP server that refuses plain text login without TLS is never sent to in the clear; a 550 is definitive, a 451 retryable", async () => {
    smtp.messages.length = 0;
    smtp.script.push(550, 451);
    const adapter = createEmailChannel({
      url: smtp.url,
      from: "blastplane@ops.example",
      to: ["oncall@ops.example"],
      credential: { user: "notify", pass: "smtp-password" },
      ca: tls.cert,
    });
    const ctx = () => ({ signal: AbortSignal.timeout(10_000), attempt: 1, messageId: `m${++counter}` });
    expect(await adapter.send({ ...alert(), locale: "en" }, ctx())).toMatchObject({
      outcome: "rejected",
      retryable: false,
      reason: "smtp_550",
    });
    expect(await adapter.send({ ...alert(), locale: "en" }, ctx())).toMatchObject({
      outcome: "rejected",
      retryable: true,
      reason: "smtp_451",
    });
    // Without the test CA the STARTTLS upgrade fails: nothing is sent (requireTLS, no fallback to plain).
    const untrusted = createEmailChannel({ url: smtp.url, from: "blastplane@ops.example", to: ["oncall@ops.example"] });
    const refused = await untrusted.send({ ...alert(), locale: "en" }, ctx());
    expect(refused.outcome).toBe("rejected");
    expect(smtp.messages).toHaveLength(0);
  });
});

describe("the router (spec §5 item 6, §7 item 9, §8)", () => {
  it("C-523 C-524 primary → fallbacks in order → on_all_fail, each within its budget, every attempt audited", async () => {
    clear();
    smtp.messages.length = 0;
    const w = world();
    w.adapters.set(
      "mail",
      createEmailChannel({
        url: smtp.url,
        from: "blastplane@ops.example",
        to: ["oncall@ops.example"],
        credential: { user: "notify", pass: "smtp-password" },
        ca: tls.cert,
      }),
    );
    pager.script.push({ status: 400, body: '{"status":"invalid event"}' });
    slack.script.push({ status: 200, body: '{"ok":false,"error":"channel_not_found"}' });
    hook.script.push({ status: 410 });
    const message = alert();
    const receipt = await w.send(message);
    expect(receipt.channels?.map((c) => [c.channel, c.state])).toEqual([
      ["pager", "definitive_failure"],
      ["slack", "definitive_failure"],
      ["hook", "definitive_failure"],
      ["mail", "delivered"],
    ]);
    expect(receipt).toMatchObject({ confirmed: true, channel: "mail" });
    expect(smtp.messages).toHaveLength(1);
    const attempts = (await w.audit.list({ action: "notify.delivery_attempt", limit: 100 })).filter(
      (e) => e.request_id === message.correlation_id,
    );
    expect(attempts.map((e) => [e.target, e.outcome]).sort()).toEqual([
      ["email:mail", "succeeded"],
      ["paging:pager", "failed"],
      ["platform_b:slack", "failed"],
      ["webhook:hook", "failed"],
    ]);
  });

  it("C-376 C-377 an A1 message goes only to A1-capable channels: with platform A unavailable nothing reaches email or any A2 channel", async () => {
    clear();
    smtp.messages.length = 0;
    const w = world();
    const receipt = await w.send(
      alert({ category: "A1", template_key: "approval.request", recipient: "oid-approver" }),
    );
    expect(receipt).toMatchObject({ confirmed: false, state: "definitive_failure", channels: [] });
    // An A1 message forced onto an A2 route is refused, not sent.
    const forced = await w.send(alert({ category: "A1", route: "operational_alert" }));
    expect(forced.confirmed).toBe(false);
    expect([pager, slack, hook].map((f) => f.requests.length)).toEqual([0, 0, 0]);
    expect(smtp.messages).toHaveLength(0);
  });

  it("C-527 idempotent by correlation id, audit id and category across hosts: concurrent and repeated sends make one vendor call", async () => {
    clear();
    const w = world();
    const message = alert({ route: "hook_only" });
    const hosts = [w.otherHost(), w.otherHost(), w.otherHost()];
    const receipts = await Promise.all(hosts.map((h) => h.send({ ...message, recipient: `oid-${Math.random()}` })));
    await w.send(message);
    expect(hook.requests).toHaveLength(1);
    expect(receipts.filter((r) => r.state === "delivered").length).toBeGreaterThanOrEqual(1);
    // A different audit id is a different message.
    await w.send({ ...message, audit_id: "aud-other" });
    expect(hook.requests).toHaveLength(2);
  });

  it("C-527 a duplicate of a message another host is sending right now stops there: it never falls through to the fallbacks", async () => {
    clear();
    smtp.messages.length = 0;
    const w = world();
    // The pager holds the first send until the test lets it answer.
    const { inPager, release } = holdPager(w, "dedup-held");
    const message = alert({ route: "operational_alert" });
    const first = w.send(message);
    await inPager;
    const duplicate = await w.otherHost().send(message);
    expect(duplicate.confirmed).toBe(false);
    expect(duplicate.channels?.map((c) => [c.channel, c.state, c.reason])).toEqual([
      ["pager", "ambiguous", "in_flight_elsewhere"],
    ]);
    // Neither the route's fallbacks nor its on_all_fail route saw the duplicate.
    expect([slack.requests.length, hook.requests.length, smtp.messages.length]).toEqual([0, 0, 0]);
    release();
    expect(await first).toMatchObject({ confirmed: true, channel: "pager" });
  });

  it("C-527 a duplicate fanned out to all channels, each in flight elsewhere, never reaches the route's on_all_fail", async () => {
    clear();
    const w = world();
    const { inPager, release } = holdPager(w, "dedup-held-all");
    // The pager is the route's only channel here (the fallbacks are not configured); its
    // on_all_fail route mails.
    w.adapters.delete("slack");
    w.adapters.delete("hook");
    const mailed: string[] = [];
    w.adapters.set("mail", {
      kind: "email",
      operation: "smtp.send",
      send: async (sent) => {
        mailed.push(sent.correlation_id);
        return { outcome: "acknowledged", vendor_message_id: `mail-${mailed.length}` };
      },
    });
    const message = { ...alert({ route: "operational_alert" }), fan_out: "all" as const };
    const first = w.send(message);
    await inPager;
    const duplicate = await w.otherHost().send(message);
    expect(duplicate.channels?.map((c) => [c.channel, c.state, c.reason])).toEqual([
      ["pager", "ambiguous", "in_flight_elsewhere"],
    ]);
    expect(mailed).toEqual([]);
    release();
    expect(await first).toMatchObject({ confirmed: true, channel: "pager" });
    expect(mailed).toEqual([]);
  });

  it("C-295 a send a crashed host left claimed is recorded ambiguous and never sent again", async () => {
    clear();
    const w = world();
    const message = alert({ route: "hook_only" });
    // The host that claimed it died before the vendor answered: its claim stays `sending`.
    const dying = createNotificationRouter({
      matrix: parseNotificationMatrix("m.yaml", MATRIX),
      channels: new Map([
        [
          "hook",
          {
            kind: "webhook",
            operation: "webhook.post",
            send: () => new Promise(() => undefined),
          } satisfies ChannelAdapter,
        ],
      ]),
      deliveries: w.deliveries,
      audit: w.audit,
      now: () => new Date(Date.now() - 3_600_000),
    });
    void dying.send(message);
    await expect.poll(async () => (await w.deliveries.listRecent(10)).length).toBe(1);
    const receipt = await w.send(message);
    expect(receipt.channels?.[0]).toMatchObject({ state: "ambiguous", reason: "interrupted_send" });
    expect(hook.requests).toHaveLength(0);
    expect((await w.deliveries.listRecent(1))[0]?.state).toBe("ambiguous");
  });

  it("C-526 C-534 C-536 C-535 secrets in the body or a template parameter are redacted before any channel sees them", async () => {
    clear();
    const w = world();
    await w.send(
      alert({
        route: "hook_only",
        body_markdown:
          "Token refresh failed: Authorization: Bearer abcdefghijklmnop0123 for /subscriptions/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/resourceGroups/rg",
        params: { detail: "password=hunter2secret", owner: "alice@contoso.com", count: 3 },
      }),
    );
    const body = hook.requests[0]?.body ?? "";
    for (const secret of ["abcdefghijklmnop0123", "0f1e2d3c-4b5a", "hunter2secret", "alice@contoso.com"])
      expect(body).not.toContain(secret);
    expect(JSON.parse(body).data.params.count).toBe(3);
  });

  it("C-528 while the kill switch holds A1, an A1 message is not sent", async () => {
    const w = world();
    let held = true;
    const router = createNotificationRouter({
      matrix: parseNotificationMatrix("m.yaml", MATRIX),
      channels: new Map([
        [
          "teams",
          {
            kind: "platform_a",
            operation: "x",
            send: async () => ({ outcome: "acknowledged", vendor_message_id: "a1" }),
          },
        ],
      ]),
      deliveries: w.deliveries,
      audit: w.audit,
      a1Held: async () => held,
    });
    const a1 = alert({ category: "A1", template_key: "approval.request", recipient: "oid-approver" });
    expect(await router.send(a1)).toMatchObject({ confirmed: false, channels: [] });
    held = false;
    expect(await router.send(a1)).toMatchObject({ confirmed: true, channel: "teams" });
  });
});

describe("emitters through the router: break-glass and the kill switch (spec §8)", () => {
  const breakGlass = (w: World, requestId: string) =>
    activateBreakGlass(
      {
        config: { owners: ["oid-owner-1", "oid-owner-2"], max_ttl_seconds: 3600 },
        notifier: w.otherHost(),
        audit: w.audit,
      },
      { actor: { oid: "oid-op", name: "Operator" }, reason: "prod outage", requestId, now: new Date() },
    );

  it("C-531 C-532 C-533 break-glass is denied and the denial audited when no paging or chat channel confirms", async () => {
    clear();
    const w = world();
    // Every operational channel refuses: the pager twice (its budget), chat and the webhook for good.
    pager.script.push({ status: 500 }, { status: 500 }, { status: 500 }, { status: 500 });
    slack.script.push(
      { status: 200, body: '{"ok":false,"error":"channel_not_found"}' },
      { status: 200, body: '{"ok":false,"error":"channel_not_found"}' },
    );
    hook.script.push({ status: 410 }, { status: 410 });
    const requestId = `bg-denied-${++counter}`;
    const error = await breakGlass(w, requestId).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BreakGlassDeniedError);
    const [denial] = (await w.audit.list({ action: "console.break_glass", limit: 10 })).filter(
      (e) => e.request_id === requestId,
    );
    expect(denial).toMatchObject({
      outcome: "denied",
      details: { reason: "no_owner_page_confirmed", pager_receipt: { paged: 2, confirmed: 0 } },
    });
  });

  it("C-531 C-515 break-glass is granted when the paging service acknowledges: one page per activation on each channel, every Owner's page confirmed", async () => {
    clear();
    const w = world();
    const requestId = `bg-granted-${++counter}`;
    const result = await breakGlass(w, requestId);
    expect(result.pager_receipt).toMatchObject({ paged: 2, confirmed: 2 });
    // The paging service deduplicates by correlation id: one event, and chat and the webhook were paged too.
    expect(pager.requests).toHaveLength(1);
    expect(JSON.parse(pager.requests[0]?.body ?? "{}")).toMatchObject({
      dedup_key: requestId,
      payload: { severity: "critical" },
    });
    expect(slack.requests).toHaveLength(1);
    expect(hook.requests).toHaveLength(1);
  });

  it("C-530 the kill switch's announcement reaches every operational channel once per flip, whatever the number of recipients", async () => {
    clear();
    const w = world();
    const announce = createKillSwitchAnnouncer({
      store: createApprovalStore(w.tables),
      notifier: w.otherHost(),
      audit: w.audit,
      recipients: ["oid-a", "oid-b", "oid-c"],
    });
    const at = new Date().toISOString();
    await announce({ on: true, actor_oid: "oid-owner", at });
    expect([pager, slack, hook].map((f) => f.requests.length)).toEqual([1, 1, 1]);
    const [entry] = await w.audit.list({ action: "console.kill_switch_on", limit: 1 });
    expect(entry?.details).toMatchObject({ announced: 3, recipients: 3 });
  });
});

describe("the operations core's notices through the router", () => {
  it("C-218 C-219 C-453 C-454 C-455 an opened incident sends one incident-open email and each severity rise one A2 page, however often the loop and its replays run", async () => {
    clear();
    smtp.messages.length = 0;
    const w = world();
    w.adapters.set(
      "mail",
      createEmailChannel({
        url: smtp.url,
        from: "blastplane@ops.example",
        to: ["oncall@ops.example"],
        credential: { user: "notify", pass: "smtp-password" },
        consoleBaseUrl: "https://console.ops.example",
        ca: tls.cert,
      }),
    );
    const events = createEventLog(w.tables);
    const verify = async () => ({
      verdict: "abstain" as const,
      action_type: "retry_job",
      target: "blast_job/j-1",
      checks: [],
      missing_evidence: ["job_exists"],
      checked_at: new Date().toISOString(),
    });
    // Each pass is a host (or a restart) of its own: a new router over the same tables.
    const loop = () =>
      createOpsLoop({
        events,
        audit: w.audit,
        rules,
        actions,
        verify,
        claims: w.tables,
        incidentWindowMs: 1_800_000,
        onIncidents: createIncidentNotices({ notifier: w.otherHost(), incidentOpenRoute: "incident_open" }),
      });
    for (const [key, type] of [
      ["n1", "preflight.failed"],
      ["n2", "job.failed"],
    ] as const)
      await events.record({
        idempotency_key: `${key}-${counter}`,
        source: "dashboard.submit",
        event_type: type,
        correlation_id: "c",
        resource_ref: `blast_job/j-notify-${counter}`,
      });
    await loop().runOnce("tick-1");
    await loop().runOnce("tick-2");
    await Promise.all([loop().runOnce("tick-3"), loop().runOnce("tick-4")]);
    expect(smtp.messages).toHaveLength(1);
    const raw = (smtp.messages[0]?.raw ?? "")
      .replace(/=\r?\n/g, "")
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
    expect(raw).toMatch(/Incident INC-[0-9a-f]{12} opened/);
    expect(raw).toMatch(/Events: 2/);
    expect(raw).toMatch(/https:\/\/console\.ops\.example\/console\?incident=INC-/);
    // One severity rise (the second event raised it): one page, deduplicated by the incident's correlation id.
    const pages = pager.requests.map((r) => JSON.parse(r.body));
    expect(pages).toHaveLength(1);
    expect(pages[0]).toMatchObject({ dedup_key: expect.stringMatching(/^INC-/) });
    expect(pages[0].payload.summary).toMatch(/severity \w+ → \w+/);
  });
});

/**
 * The kill test's rounds: `NOTIFY_KILL_ROUNDS` (5 in `npm test`, as the power-cut and kill-loop
 * suites keep theirs small; set it higher for a deep run), `NOTIFY_KILL_SEED` replays a run. The
 * first five rounds kill once at each kill point — inside the 1st, 2nd and 3rd vendor request, and
 * after the 1st and 2nd sent message — in an order the seed shuffles; further rounds pick a point
 * at random. Each round costs a host start (a Node process), so rounds beyond the five add repeats
 * of points already proved.
 */
const KILL_ROUNDS = Math.max(1, Number(process.env.NOTIFY_KILL_ROUNDS ?? 5));
const KILL_SEED = Number(process.env.NOTIFY_KILL_SEED ?? 20261127);
/** Every point a round can kill at: inside the n-th vendor request, or after the n-th sent line. */
type KillPoint = { at: "vendor" | "sent"; after: number };
const KILL_POINTS: readonly KillPoint[] = [
  { at: "vendor", after: 1 },
  { at: "vendor", after: 2 },
  { at: "vendor", after: 3 },
  { at: "sent", after: 1 },
  { at: "sent", after: 2 },
];
/** Enough messages that every round ends in a kill (a round sends at most two), and a tail for the last host. */
const KILL_MESSAGES = 2 * KILL_ROUNDS + 8;
const KILL_MATRIX = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    hook:
      kind: webhook
      categories: [A2]
      retry: { max_attempts: 2, initial_backoff_ms: 100, max_backoff_ms: 1000 }
    pager:
      kind: paging
      categories: [A2]
      runbook_url: https://runbooks.example/ops
      retry: { max_attempts: 2, initial_backoff_ms: 100, max_backoff_ms: 1000 }
  routes:
    operational_alert:
      trust_tier: a2_operational_alert
      primary: hook
      fallback: [pager]
`;

describe("durable delivery: the notification queue (router item 3)", () => {
  it("C-527 a message accepted by a host that dies before its first send is delivered by the next drain once the lease runs out, once per channel", async () => {
    clear();
    const w = world();
    const matrix = parseNotificationMatrix("m.yaml", MATRIX);
    let clock = Date.parse("2026-11-27T10:00:00Z");
    const router = createNotificationRouter({ matrix, channels: w.adapters, deliveries: w.deliveries, audit: w.audit });
    const host = () =>
      createDurableNotifier({ router, tables: w.tables, matrix, leaseMs: 60_000, now: () => new Date(clock) });
    const message = alert({ route: "hook_only" });
    // The first host claims it and dies inside the router (its process is gone: the run never ends).
    const dying = createDurableNotifier({
      router: { send: router.send, deliver: () => new Promise(() => undefined) },
      tables: w.tables,
      matrix,
      leaseMs: 60_000,
      now: () => new Date(clock),
    });
    void dying.send(message);
    await expect.poll(() => host().stateOf(message), { timeout: 60_000 }).toBe("processing");
    expect(hook.requests).toHaveLength(0);
    // Another host drains while the lease holds: nothing is taken over.
    clock += 59_000;
    expect(await host().drain()).toBe(0);
    clock += 2_000;
    expect(await host().drain()).toBe(1);
    expect(hook.requests).toHaveLength(1);
    expect(await host().stateOf(message)).toBe("done");
    expect(await host().depth()).toBe(0);
    // A repeat of the accepted message is a duplicate: the recorded receipt, no second call.
    const again = await host().send(message);
    expect(again.state).toBe("delivered");
    expect(hook.requests).toHaveLength(1);
  });

  it("admission and closing are atomic; a full queue refuses with nothing recorded, so the same item is admitted later", async () => {
    const w = world();
    const queue = createDurableQueue<{ n: number }>({
      tables: w.tables,
      table: "dq",
      capacity: 2,
      idOf: (item) => `n/${item.n}`,
      name: "test queue",
    });
    const at = new Date("2026-11-27T10:00:00Z");
    expect(await queue.enqueue({ n: 1 }, at)).toBe("accepted");
    expect(await Promise.all([queue.enqueue({ n: 2 }, at), queue.enqueue({ n: 2 }, at)])).toEqual(
      expect.arrayContaining(["accepted", "duplicate"]),
    );
    await expect(queue.enqueue({ n: 3 }, at)).rejects.toThrow("the test queue is full; retry later");
    expect(await queue.stateOf("n/3")).toBeUndefined();
    const seen: number[] = [];
    expect(
      await queue.drain(
        async (item) => void seen.push(item.n),
        () => at,
      ),
    ).toBe(2);
    expect(seen.sort()).toEqual([1, 2]);
    expect(await queue.enqueue({ n: 3 }, at)).toBe("accepted");
    expect(await queue.enqueue({ n: 1 }, at)).toBe("duplicate");
  });

  it("C-295 a long item's lease is renewed while it runs (the channel queue's turns): a drain past the first lease does not run it a second time", async () => {
    const w = world();
    const options: DurableQueueOptions<{ n: number }> = {
      tables: w.tables,
      table: "dqlease",
      capacity: 2,
      leaseMs: 1_500,
      renewLease: true,
      idOf: (item) => `n/${item.n}`,
      name: "test queue",
    };
    const queue = createDurableQueue(options);
    const leaseUntil = async () => {
      for await (const row of w.tables("dqlease").listEntities<{ lease_until: string }>({
        queryOptions: { filter: "PartitionKey eq 'q' and RowKey ge 'slot_' and RowKey le 'slot_99999'" },
      }))
        return Date.parse(row.lease_until);
      return 0;
    };
    await queue.enqueue({ n: 1 }, new Date());
    const runs: string[] = [];
    let otherClosed = -1;
    const closed = await queue.drain(
      async (_item, claim) => {
        runs.push(`first ${claim.attempt}`);
        const firstLease = await leaseUntil();
        // The item runs past its first lease: the heartbeat (every 500 ms) extends it.
        await expect.poll(leaseUntil, { timeout: 20_000, interval: 100 }).toBeGreaterThan(firstLease);
        // Another host's worker timer drains after the first lease ran out: nothing to take over.
        otherClosed = await createDurableQueue(options).drain(
          async () => void runs.push("again"),
          () => new Date(firstLease + 1),
        );
        await claim.beforeDeliver();
      },
      () => new Date(),
    );
    expect(otherClosed).toBe(0);
    expect(closed).toBe(1);
    expect(runs).toEqual(["first 1"]);
    expect(await queue.stateOf("n/1")).toBe("done");
  });

  it("C-295 a worker that lost its claim (another took the item over after the lease ran out) delivers nothing: the fence refuses it", async () => {
    const w = world();
    const clock = Date.parse("2026-11-28T10:00:00Z");
    const options: DurableQueueOptions<{ n: number }> = {
      tables: w.tables,
      table: "dqfence",
      capacity: 2,
      leaseMs: 600_000,
      renewLease: true,
      idOf: (item) => `n/${item.n}`,
      name: "test queue",
    };
    const queue = createDurableQueue(options);
    await queue.enqueue({ n: 1 }, new Date(clock));
    const delivered: string[] = [];
    let taken = -1;
    let refused: unknown;
    await queue.drain(
      async (_item, claim) => {
        // This worker stalls past its lease; another one claims the item and answers it.
        taken = await createDurableQueue(options).drain(
          async (_again, second) => {
            await second.beforeDeliver();
            delivered.push("second worker");
          },
          () => new Date(clock + 601_000),
        );
        await claim.beforeDeliver().catch((error: unknown) => {
          refused = error;
          throw error;
        });
        delivered.push("stalled worker");
      },
      () => new Date(clock),
    );
    expect(taken).toBe(1);
    expect(refused).toMatchObject({ name: "LeaseLostError" });
    expect(delivered).toEqual(["second worker"]);
    expect(await queue.stateOf("n/1")).toBe("done");
    expect(await queue.depth()).toBe(0);
  });

  it("C-295 a worker whose lease ran out never closes the slot another worker holds now: the holder closes it, once", async () => {
    const w = world();
    const clock = Date.parse("2026-11-28T10:00:00Z");
    const options: DurableQueueOptions<{ n: number }> = {
      tables: w.tables,
      table: "dqclose",
      capacity: 2,
      leaseMs: 600_000,
      idOf: (item) => `n/${item.n}`,
      name: "test queue",
    };
    const queue = createDurableQueue(options);
    await queue.enqueue({ n: 1 }, new Date(clock));
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered = () => {};
    const secondRunning = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let second: Promise<number> | undefined;
    const firstClosed = await queue.drain(
      async () => {
        // This worker stalls past its lease; another claims the item and is still running it when this one ends.
        second = createDurableQueue(options).drain(
          async () => {
            entered();
            await released;
          },
          () => new Date(clock + 601_000),
        );
        await secondRunning;
      },
      () => new Date(clock),
    );
    expect(firstClosed).toBe(0);
    expect(await queue.depth()).toBe(1);
    expect(await queue.stateOf("n/1")).toBe("processing");
    release();
    expect(await second).toBe(1);
    expect(await queue.depth()).toBe(0);
    expect(await queue.stateOf("n/1")).toBe("done");
  });

  it(`C-527 C-295 C-290 SIGKILL a notifying host ${KILL_ROUNDS} times, at every kill point (seed ${KILL_SEED}): every accepted message reaches each channel by at most one vendor call, acknowledged or recorded ambiguous, none lost`, async () => {
    clear();
    const root = path.resolve(import.meta.dirname, "../..");
    const bundle = path.join(root, "dist/test", `notify-kill-child-${process.pid}.mjs`);
    await build({
      entryPoints: [path.join(root, "test/support/notify-kill-child.ts")],
      outfile: bundle,
      bundle: true,
      platform: "node",
      target: "node20",
      format: "esm",
      packages: "external",
      logLevel: "warning",
    });
    const tablePrefix = `nkill${++counter}x${Date.now().toString(36)}`;
    const tables = prefixedTables(azurite.connectionString, tablePrefix);
    const matrix = parseNotificationMatrix("kill-matrix.yaml", KILL_MATRIX);
    const deliveries = createDeliveryStore(tables);
    const observer = createDurableNotifier({
      router: createNotificationRouter({ matrix, channels: new Map(), deliveries, audit: createAuditLog(tables) }),
      tables,
      matrix,
    });
    const config = (from: number): KillChildConfig => ({
      connectionString: azurite.connectionString,
      tablePrefix,
      matrix: KILL_MATRIX,
      webhookUrl: `${hook.url}/in`,
      webhookSecret: WEBHOOK_SECRET,
      pagingUrl: `${pager.url}/v2/enqueue`,
      routingKey: ROUTING_KEY,
      ca: tls.cert,
      from,
      count: KILL_MESSAGES,
    });
    const rand = prng(KILL_SEED);
    let kills = 0;
    let vendorKills = 0;
    let drained = 0;

    /** Runs one host from message `from`; kills it at the `after`-th vendor request or sent line. */
    const runHost = (from: number, kill: KillPoint | undefined) =>
      new Promise<{ killed: boolean; done: boolean }>((resolve, reject) => {
        const child: ChildProcess = spawn(process.execPath, [bundle], {
          env: { ...process.env, NOTIFY_KILL_CHILD: JSON.stringify(config(from)) },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let killed = false;
        let done = false;
        let count = 0;
        let stderr = "";
        const killNow = () => {
          if (killed) return;
          killed = true;
          child.kill("SIGKILL");
        };
        const onVendor = () => {
          if (kill?.at === "vendor" && ++count === kill.after) {
            vendorKills++;
            killNow();
          }
        };
        hook.onRequest = onVendor;
        pager.onRequest = onVendor;
        let buffered = "";
        child.stdout?.on("data", (chunk: Buffer) => {
          buffered += chunk.toString("utf8");
          for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
            const line = JSON.parse(buffered.slice(0, nl)) as { step: string; closed?: number };
            buffered = buffered.slice(nl + 1);
            if (line.step === "drained") drained += line.closed ?? 0;
            if (line.step === "done") done = true;
            if (line.step === "sent" && kill?.at === "sent" && ++count === kill.after) killNow();
          }
        });
        child.stderr?.on("data", (chunk: Buffer) => {
          stderr += chunk.toString("utf8");
        });
        child.on("error", reject);
        child.on("exit", (code) => {
          hook.onRequest = undefined;
          pager.onRequest = undefined;
          if (!killed && code !== 0) reject(new Error(`the host exited with ${code}: ${stderr.slice(0, 2000)}`));
          else resolve({ killed, done });
        });
      });

    /** The first message no host has accepted (hosts send in order, so the accepted ones are a prefix). */
    const firstUnaccepted = async (from: number) => {
      let i = from;
      while (i < KILL_MESSAGES && (await observer.stateOf(killTestMessage(i))) !== undefined) i++;
      return i;
    };

    let next = 0;
    try {
      // Each kill point once (shuffled by the seed), then random points.
      const order = KILL_POINTS.map((point) => ({ point, key: rand() })).sort((a, b) => a.key - b.key);
      for (let round = 0; round < KILL_ROUNDS; round++) {
        const point = order[round]?.point ?? (KILL_POINTS[Math.floor(rand() * KILL_POINTS.length)] as KillPoint);
        const outcome = await runHost(next, point);
        if (outcome.killed) kills++;
        // A client resends only what was never accepted; an accepted message is the queue's to deliver.
        next = await firstUnaccepted(next);
      }
      const last = await runHost(next, undefined);
      expect(last.done).toBe(true);
    } finally {
      rmSync(bundle, { force: true });
    }

    expect(kills).toBe(KILL_ROUNDS);
    expect(await observer.depth()).toBe(0);
    const records = await deliveries.listRecent(10_000);
    const hookCalls = new Map<string, string[]>();
    for (const r of hook.requests) {
      const corr = (JSON.parse(r.body) as { data: { correlation_id: string } }).data.correlation_id;
      hookCalls.set(corr, [...(hookCalls.get(corr) ?? []), String(r.headers["webhook-id"])]);
    }
    const pagerCalls = new Map<string, string[]>();
    for (const r of pager.requests) {
      const key = (JSON.parse(r.body) as { dedup_key: string }).dedup_key;
      pagerCalls.set(key, [...(pagerCalls.get(key) ?? []), key]);
    }
    let ambiguous = 0;
    for (let i = 0; i < KILL_MESSAGES; i++) {
      const corr = killTestMessage(i).correlation_id;
      expect(await observer.stateOf(killTestMessage(i)), corr).toBe("done");
      for (const [channel, calls] of [
        ["hook", hookCalls.get(corr) ?? []],
        ["pager", pagerCalls.get(corr) ?? []],
      ] as const) {
        const rows = records.filter((r) => r.correlation_id === corr && r.channel === channel);
        expect(rows, `${corr} on ${channel}`).toHaveLength(1);
        const row = rows[0];
        expect(calls.length, `${corr} on ${channel}: vendor calls`).toBeLessThanOrEqual(1);
        expect(["delivered", "ambiguous"], `${corr} on ${channel}`).toContain(row?.state);
        if (row?.state === "delivered") expect(row.receipt?.vendor_message_id).toBe(calls[0]);
        else ambiguous++;
      }
    }
    // Each kill cut at most one send (hosts send one at a time); each kill inside a vendor call cut one.
    expect(ambiguous).toBeGreaterThanOrEqual(vendorKills);
    expect(ambiguous).toBeLessThanOrEqual(kills);
    // Restarted hosts delivered messages their killed predecessors had accepted.
    expect(drained).toBeGreaterThan(0);
  }, 900_000);
});

describe("digests (A4, spec §6 item 6) on a controlled clock", () => {
  const matrix = parseNotificationMatrix("m.yaml", MATRIX);
  const texts = () => slack.requests.map((r) => JSON.stringify(postedArgs(r).blocks));

  it("C-472 C-485 C-527 a day's low-severity notices go out as one digest once the day ends; a replayed notice, a second flush or another host add nothing; a quiet day sends nothing", async () => {
    clear();
    const w = world();
    let clock = Date.parse("2026-11-26T09:00:00Z");
    const host = () => createDigests({ tables: w.tables, matrix, notifier: w.otherHost(), now: () => new Date(clock) });
    const notice = (n: number, severity: "low" | "info") => ({
      route: "digest_ops_notices_daily",
      severity,
      template_key: "ops.notice",
      title: `Warm-up slow on node ${n}`,
      correlation_id: `warm-${n}`,
      idempotency_key: `warm/${n}`,
    });
    expect(await host().add(notice(1, "low"))).toBe("batched");
    clock += 3_600_000;
    expect(await host().add(notice(2, "info"))).toBe("batched");
    expect(await host().add(notice(1, "low"))).toBe("duplicate");
    clock = Date.parse("2026-11-26T23:59:59Z");
    expect(await host().flush()).toEqual([]);
    expect(slack.requests).toHaveLength(0);
    // The day has ended: one digest, through the router, acknowledged by the vendor.
    clock = Date.parse("2026-11-27T00:05:00Z");
    const [sent, ...rest] = await host().flush();
    expect(rest).toEqual([]);
    expect(sent).toMatchObject({
      route: "digest_ops_notices_daily",
      period_start: "2026-11-26T00:00:00.000Z",
      outcome: "sent",
      receipt: { confirmed: true, state: "delivered" },
    });
    expect(texts()).toHaveLength(1);
    expect(texts()[0]).toContain("Notices: 2 (low 1, info 1).");
    expect(texts()[0]).toContain("[low] Warm-up slow on node 1");
    // A notice of the new day waits for its own day; a second flush and another host send nothing more.
    expect(await host().add(notice(3, "low"))).toBe("batched");
    expect(await Promise.all([host().flush(), host().flush()])).toEqual([[], []]);
    expect(slack.requests).toHaveLength(1);
    // The 27th had one notice; the 28th none (nothing batched, no source): nothing at all is sent for it.
    clock = Date.parse("2026-11-29T01:00:00Z");
    expect((await host().flush()).map((r) => r.period_start)).toEqual(["2026-11-27T00:00:00.000Z"]);
    expect(await host().flush()).toEqual([]);
    expect(slack.requests).toHaveLength(2);
  });

  it("C-472 a batchable low or info alert on a route with a low-severity digest waits for the digest; anything else is sent at once", async () => {
    clear();
    const w = world();
    let clock = Date.parse("2026-11-26T09:00:00Z");
    const digests = createDigests({ tables: w.tables, matrix, notifier: w.otherHost(), now: () => new Date(clock) });
    const notifier = withLowSeverityDigests(w.otherHost(), digests, matrix, () => new Date(clock));
    const batched = await notifier.send(alert({ route: "hook_with_digest", severity: "low", batchable: true }));
    expect(batched).toMatchObject({ confirmed: false, channel: "digest:digest_ops_notices_daily" });
    await notifier.send(alert({ route: "hook_with_digest", severity: "info", batchable: true }));
    expect(hook.requests).toHaveLength(0);
    // Not batchable, or not low: sent now.
    await notifier.send(alert({ route: "hook_with_digest", severity: "low" }));
    await notifier.send(alert({ route: "hook_with_digest", severity: "high", batchable: true }));
    expect(hook.requests).toHaveLength(2);
    clock = Date.parse("2026-11-27T00:05:00Z");
    expect(await digests.flush()).toMatchObject([{ outcome: "sent", route: "digest_ops_notices_daily" }]);
    expect(texts()[0]).toContain("Notices: 2 (low 1, info 1).");
  });

  it("C-477 C-484 C-485 a monthly route with a source is flushed each month with what the source gave; a month without significant activity is suppressed", async () => {
    clear();
    const w = world();
    let clock = Date.parse("2026-12-01T00:30:00Z");
    const asked: string[] = [];
    const digests = createDigests({
      tables: w.tables,
      matrix,
      notifier: w.otherHost(),
      now: () => new Date(clock),
      sources: {
        digest_kpi_cost_monthly: async ({ from }) => {
          asked.push(from.toISOString());
          return from.getUTCMonth() === 10
            ? {
                actions: { auto: 12, human_approved: 3, rolled_back: 1, observation_only: 4 },
                cost: { run_rate_before: 400, run_rate_now: 430, currency: "USD" },
              }
            : { cost: { run_rate_before: 430, run_rate_now: 432, currency: "USD" } };
        },
      },
    });
    const november = await digests.flush();
    expect(november).toMatchObject([{ route: "digest_kpi_cost_monthly", outcome: "sent" }]);
    const body = texts()[0] ?? "";
    expect(body).toContain("Actions: 20 — auto 12, human-approved 3, rolled back 1, observation only 4.");
    expect(body).toContain("+7.5% from 400.00 USD/day");
    // Nothing it was not given: no incident tally, no notices.
    expect(body).not.toMatch(/Incidents|Notices/);
    expect(await digests.flush()).toEqual([]);
    // December: only a 0.5% cost swing — noise: suppressed, nothing sent.
    clock = Date.parse("2027-01-01T00:30:00Z");
    expect(await digests.flush()).toMatchObject([{ outcome: "suppressed", period_start: "2026-12-01T00:00:00.000Z" }]);
    expect(slack.requests).toHaveLength(1);
    expect(asked).toEqual(["2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"]);
  });
});

describe("the scheduled digests read the product's stores (spec §6 item 6)", () => {
  const SOURCE_MATRIX = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    slack: { kind: platform_b, categories: [A2, A4] }
    inbox: { kind: local_inbox, categories: [A1, A2, A4] }
  routes:
    operational_alert: { trust_tier: a2_operational_alert, primary: slack }
    digest_shadow_accuracy_daily: { trust_tier: a4_digest, primary: slack }
    digest_override_retro_weekly: { trust_tier: a4_digest, primary: slack }
    digest_enforce_promotion_weekly: { trust_tier: a4_digest, primary: slack }
    digest_governance_pr_aging_weekly: { trust_tier: a4_digest, primary: slack }
    digest_exemption_expiry_weekly: { trust_tier: a4_digest, primary: slack }
    digest_kpi_cost_monthly: { trust_tier: a4_digest, primary: slack }
    digest_break_glass_usage: { trust_tier: a4_digest, period: weekly, audience: role-dm, primary: inbox }
`;
  const matrix = parseNotificationMatrix("m.yaml", SOURCE_MATRIX);
  const today = periodAt("daily", new Date());
  const week = periodAt("weekly", new Date());
  const month = periodAt("monthly", new Date());
  const hours = (h: number) => new Date(today.start.getTime() + h * 3_600_000).toISOString();

  /** Digests over one world's tables with every source, sending to a notifier that records what it is given. */
  function digestWorld() {
    const w = world();
    const sent: Notification[] = [];
    let clock = Date.now();
    const events = createEventLog(w.tables);
    const digests = createDigests({
      tables: w.tables,
      matrix,
      notifier: {
        send: async (m) => {
          sent.push(m);
          return {
            delivery_id: m.idempotency_key,
            confirmed: true,
            channel: "slack",
            at: new Date(clock).toISOString(),
          };
        },
      },
      now: () => new Date(clock),
      directRecipients: ["oid-owner-1", "oid-owner-2"],
      sources: createDigestSources({
        tables: w.tables,
        audit: w.audit,
        events,
        rules,
        incidentWindowMs: 1_800_000,
        modeOf: (type) => (type === "redeploy_job_api" ? "enforce" : "shadow"),
      }),
    });
    const flushAt = async (end: Date) => {
      clock = end.getTime() + 3_600_000;
      return digests.flush();
    };
    /** The bodies sent on `route`, the latest period's first. */
    const bodyOf = (route: string) =>
      sent
        .filter((m) => m.route === route)
        .map((m) => m.body_markdown)
        .reverse();
    return { w, sent, events, flushAt, bodyOf };
  }

  const outcome = (
    key: string,
    action_type: string,
    mode: "shadow" | "enforce",
    state: "done" | "refused",
    at: string,
  ) => ({
    idempotency_key: key,
    action_hash: "h",
    action_type,
    target: `blast_job/${key}`,
    state,
    mode,
    plan: null,
    result: null,
    at,
  });

  it("C-472 C-474 C-477 C-480 C-481 shadow accuracy, promotion candidates and the month's KPIs come from the action outcomes and the event log; a digest states nothing else", async () => {
    const d = digestWorld();
    const store = createActionOutcomeStore(d.w.tables);
    for (let i = 0; i < 5; i++)
      await store.insert(outcome(`retry-${i}`, "retry_job", "shadow", "done", hours(1 + i / 10)));
    await store.insert(outcome("rewarm-1", "rewarm_database", "shadow", "done", hours(2)));
    await store.insert(outcome("rewarm-2", "rewarm_database", "shadow", "refused", hours(3)));
    await store.insert(outcome("redeploy-1", "redeploy_job_api", "enforce", "done", hours(4)));
    await store.insert(outcome("apr_0123456789abcdef01234567", "redeploy_job_api", "enforce", "done", hours(5)));
    // Yesterday's outcome is not today's.
    await store.insert(outcome("retry-old", "retry_job", "shadow", "done", hours(-20)));
    for (const [key, type] of [
      ["s1", "preflight.failed"],
      ["s2", "cluster.unhealthy"],
    ] as const)
      await d.events.record({
        idempotency_key: `${key}-${++counter}`,
        source: "dashboard.submit",
        event_type: type,
        correlation_id: "c",
        resource_ref: type === "cluster.unhealthy" ? "cluster/aks-1" : `blast_job/j-src-${counter}`,
      });

    await d.flushAt(today.end);
    const [shadow] = d.bodyOf("digest_shadow_accuracy_daily");
    expect(shadow).toContain("Shadow outcomes (recorded what the action would do): 6.");
    expect(shadow).toContain("- rewarm_database: 1 recorded, 1 refused");
    expect(shadow).toContain("- retry_job: 5 recorded, 0 refused");
    expect(shadow).toContain("Shadow proposals refused because the target had changed: 1.");
    expect(shadow).not.toMatch(/Incidents|Cost|Actions:/);

    await d.flushAt(week.end);
    const [promotion] = d.bodyOf("digest_enforce_promotion_weekly");
    // retry_job: 5 clean shadow outcomes (the old one is in the week too when the week began before yesterday).
    expect(promotion).toMatch(/- retry_job: [56] shadow outcomes, none refused/);
    // A refusal disqualifies; an action already enforced is no candidate.
    expect(promotion).not.toMatch(/rewarm_database|redeploy_job_api/);

    await d.flushAt(month.end);
    const [kpi] = d.bodyOf("digest_kpi_cost_monthly");
    expect(kpi).toMatch(/Incidents: 2 \(critical 1, low 1\)\./);
    expect(kpi).toMatch(/Actions: \d+ — auto 1, human-approved 1, rolled back 0, observation only [67]\./);
    // No cost store: the wrap-up says nothing about cost rather than a made-up figure.
    expect(kpi).not.toMatch(/Cost|Forecast/);
  });

  it("C-473 C-475 C-476 overrides filed, drafts aging and exemptions about to expire come from the /svc drafts", async () => {
    const d = digestWorld();
    const drafts = d.w.tables("channeldrafts");
    await drafts.createTable().catch(() => undefined);
    const draft = async (id: string, kind: string, created: Date, params: Record<string, string>) =>
      drafts.createEntity({
        partitionKey: kind,
        rowKey: id,
        doc: JSON.stringify({
          draft_id: id,
          kind,
          summary: kind,
          params,
          trailer: "Requested-by: oid-x",
          requested_by: "oid-x",
          created_at: created.toISOString(),
        }),
      });
    const inWeek = new Date(week.start.getTime() + 3_600_000);
    await draft("d-ovr-1", "override", inWeek, { rule: "R-JOB-001", mode: "enforce" });
    await draft("d-ovr-old", "override", new Date(week.start.getTime() - 10 * 86_400_000), {
      rule: "R-DB-001",
      mode: "shadow",
    });
    await draft("d-exm-soon", "exemption", inWeek, {
      rule: "R-JOB-001",
      target: "blast_job/j-9",
      until: new Date(week.end.getTime() + 2 * 86_400_000).toISOString(),
    });
    await draft("d-exm-later", "exemption", inWeek, {
      rule: "R-JOB-001",
      target: "blast_job/j-8",
      until: new Date(week.end.getTime() + 30 * 86_400_000).toISOString(),
    });

    await d.flushAt(week.end);
    const [overrides] = d.bodyOf("digest_override_retro_weekly");
    expect(overrides).toContain("Override drafts filed: 1.");
    expect(overrides).toContain("- d-ovr-1: rule R-JOB-001 → enforce");
    expect(overrides).not.toContain("d-ovr-old");
    const [aging] = d.bodyOf("digest_governance_pr_aging_weekly");
    expect(aging).toContain("Drafts on record: 4.");
    expect(aging).toContain("Drafts older than 7 days: 1.");
    expect(aging).toMatch(/- d-ovr-old \(override\): 1[67] days/);
    const [expiring] = d.bodyOf("digest_exemption_expiry_weekly");
    expect(expiring).toMatch(/Exemptions expiring by \d{4}-\d\d-\d\d: 1\./);
    expect(expiring).toContain("d-exm-soon: rule R-JOB-001 on blast_job/j-9");
    expect(expiring).not.toContain("d-exm-later");
    // Nobody's identity leaves in a digest.
    for (const m of d.sent) expect(m.body_markdown).not.toContain("oid-x");
  });

  it("C-478 C-520 the break-glass usage summary goes as a direct message to each Owner, from the audit of grants and denials; a week without any sends nothing", async () => {
    const d = digestWorld();
    const activate = (confirmed: boolean) =>
      activateBreakGlass(
        {
          config: { owners: ["oid-owner-1"], max_ttl_seconds: 3600 },
          notifier: {
            send: async () => ({ delivery_id: "p", confirmed, channel: "pager", at: new Date().toISOString() }),
          },
          audit: d.w.audit,
        },
        {
          actor: { oid: "oid-op", name: "Operator" },
          reason: "prod outage",
          requestId: `bg-${++counter}`,
          now: new Date(),
        },
      ).catch(() => undefined);
    await activate(true);
    await activate(false);
    await d.flushAt(week.end);
    const dms = d.sent.filter((m) => m.route === "digest_break_glass_usage");
    expect(dms.map((m) => m.recipient)).toEqual(["oid-owner-1", "oid-owner-2"]);
    expect(new Set(dms.map((m) => m.idempotency_key)).size).toBe(2);
    expect(dms[0]?.body_markdown).toContain("Break-glass activations granted: 1.");
    expect(dms[0]?.body_markdown).toContain("Break-glass activations denied (no Owner page confirmed): 1.");
    expect(dms[0]?.body_markdown).not.toMatch(/Operator|oid-op|prod outage/);
    // The next week had no break-glass: suppressed, nothing sent.
    const before = d.sent.length;
    const next = await d.flushAt(new Date(week.end.getTime() + 7 * 86_400_000));
    expect(next.find((r) => r.route === "digest_break_glass_usage")).toMatchObject({ outcome: "suppressed" });
    expect(d.sent.slice(before).filter((m) => m.route === "digest_break_glass_usage")).toEqual([]);
  });
});
