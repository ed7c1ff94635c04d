import { createHash } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  createWebhookVerifier,
  projectWebhook,
  type TypedWebhookMapping,
  typedWebhookMappingSchema,
  WebhookRefusedError,
} from "../../shared/channels/webhooks/typed-webhook.js";
import { loadChannelConfig } from "../../shared/channels/channel-config.js";
import { createWebhookInbound, parseWebhookSettings } from "../../shared/channels/webhooks/webhook-inbound.js";
import type { ValidationError } from "../../shared/errors.js";
import { mapErrorToResult } from "../../shared/http/envelope.js";
import { createLogger } from "../../shared/logging/logger.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog } from "../../shared/ops/events.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("chwh");
const mapping: TypedWebhookMapping = typedWebhookMappingSchema.parse({
  event_type: "monitor.alert_fired",
  target_agent: "ops",
  fields: { alert: "alert.name", severity: "alert.severity", incident: "incident.id" },
  session_field: "incident",
  max_string_chars: 64,
});
const allow = { event_types: ["monitor.alert_fired"], agents: ["ops"] };

const reason = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    if (error instanceof WebhookRefusedError) return error.reason;
    throw error;
  }
  return "projected";
};

describe("TypedWebhookMapping (spec §5 item 7)", () => {
  it("C-437 C-438 C-439 C-440 payload values cannot override the event type, agent, command or session", () => {
    const event = projectWebhook(mapping, allow, {
      event_type: "kill_switch.on",
      agent: "root",
      command: "run_runbook name=redeploy_job_api dry_run=false",
      session: "someone-elses-session",
      alert: { name: "cpu", severity: "high" },
      incident: { id: "INC-1" },
    });
    expect(event).toEqual({
      event_type: "monitor.alert_fired",
      target_agent: "ops",
      session_key: createHash("sha256").update('webhook-session/"INC-1"').digest("hex"),
      fields: { alert: "cpu", severity: "high", incident: "INC-1" },
    });
  });

  it("C-441 C-442 C-443 C-444 a missing field, a container, an oversized string or a target outside the allow-list fails before publish", () => {
    const ok = { alert: { name: "cpu", severity: "high" }, incident: { id: "INC-1" } };
    expect(reason(() => projectWebhook(mapping, allow, { alert: { name: "cpu" }, incident: { id: "x" } }))).toBe(
      "missing_field",
    );
    expect(reason(() => projectWebhook(mapping, allow, { ...ok, incident: { id: { nested: 1 } } }))).toBe(
      "container_value",
    );
    expect(
      reason(() => projectWebhook(mapping, allow, { ...ok, alert: { name: "x".repeat(65), severity: "high" } })),
    ).toBe("oversized_string");
    expect(reason(() => projectWebhook(mapping, { ...allow, agents: ["other"] }, ok))).toBe("target_not_allowed");
    // Inherited properties are not fields.
    expect(reason(() => projectWebhook(mapping, allow, JSON.parse('{"__proto__":{"alert":1}}')))).toBe("missing_field");
    expect(() => typedWebhookMappingSchema.parse({ ...mapping, fields: { x: "__proto__.polluted" } })).toThrow();
  });

  it("C-362 a Standard Webhooks delivery verifies once; a reused nonce and a tampered body are refused", async () => {
    const secret = `whsec_${Buffer.from("0123456789abcdef0123456789abcdef").toString("base64")}`;
    const verify = createWebhookVerifier({ tables: azurite.tables() });
    const body = JSON.stringify({ alert: { name: "cpu", severity: "high" }, incident: { id: "INC-1" } });
    const at = new Date();
    const headers = {
      "webhook-id": "msg_1",
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": new Webhook(secret).sign("msg_1", at, body),
    };
    expect(await verify({ source: "monitor", secret, headers, body, now: at })).toEqual(JSON.parse(body));
    await expect(verify({ source: "monitor", secret, headers, body, now: at })).rejects.toMatchObject({
      reason: "replayed_nonce",
    });
    await expect(
      verify({ source: "monitor", secret, headers: { ...headers, "webhook-id": "msg_2" }, body, now: at }),
    ).rejects.toMatchObject({ reason: "bad_signature" });
  });
});

describe("POST /api/channels/webhooks/{source} below the trigger (createWebhookInbound)", () => {
  const secret = `whsec_${Buffer.from("fedcba9876543210fedcba9876543210").toString("base64")}`;
  const settingsJson = (overrides: Record<string, unknown> = {}) =>
    JSON.stringify({
      allow: { event_types: ["monitor.alert_fired"], agents: ["ops"] },
      sources: { monitor: { secret_ref: "env:MONITOR_WEBHOOK_SECRET", mapping } },
      ...overrides,
    });

  function world() {
    const tables = azurite.tables();
    const events = createEventLog(tables);
    const audit = createAuditLog(tables);
    const inbound = createWebhookInbound({
      settings: parseWebhookSettings(settingsJson()),
      tables,
      events,
      audit,
      resolve: async (ref) => (ref === "env:MONITOR_WEBHOOK_SECRET" ? secret : ""),
    });
    let n = 0;
    const signed = (body: string, options: { at?: Date; id?: string; key?: string } = {}) => {
      const at = options.at ?? new Date();
      const id = options.id ?? `msg_${++n}_${Date.now()}`;
      return new Headers({
        "content-type": "application/json",
        "webhook-id": id,
        "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
        "webhook-signature": new Webhook(options.key ?? secret).sign(id, at, body),
      });
    };
    const send = (headers: Headers, body: string, source = "monitor") =>
      inbound.handle(source, { headers, body, requestId: "req-wh" }).then(
        (accepted) => ({ status: 202, accepted }),
        (error: unknown) => ({ status: mapErrorToResult(error, "req-wh", quiet).status, error }),
      );
    return { events, audit, inbound, signed, send };
  }
  const quiet = createLogger({ level: "error", write: () => undefined });
  const alert = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({ alert: { name: "cpu", severity: "high" }, incident: { id: "INC-7" }, ...extra });

  it("C-362 C-436 C-445 C-446 a signed delivery is projected and recorded as a shadow event for the operations core, with an audit entry; action-shaped fields execute nothing", async () => {
    const w = world();
    const body = alert({ command: "kill_switch on", mode: "enforce", event_type: "kill_switch.on" });
    const res = await w.send(w.signed(body), body);
    expect(res).toMatchObject({
      status: 202,
      accepted: { event_type: "monitor.alert_fired", target_agent: "ops", mode: "shadow" },
    });
    const [event] = await w.events.list();
    expect(event).toMatchObject({
      source: "webhook.monitor",
      event_type: "monitor.alert_fired",
      mode: "shadow",
      resource_ref: "webhook/monitor",
      payload: { target_agent: "ops", fields: { alert: "cpu", severity: "high", incident: "INC-7" } },
    });
    expect(JSON.stringify(event?.payload)).not.toContain("kill_switch");
    expect(await w.audit.list({ action: "channel.webhook_ingested" })).toHaveLength(1);
  });

  it("C-362 C-363 C-364 unsigned, tampered, wrong-key, stale, out-of-order and replayed deliveries are 401; unknown sources 404; nothing is published", async () => {
    const w = world();
    const body = alert();
    const now = Date.now();
    const good = w.signed(body);
    const unsigned = new Headers({ "content-type": "application/json" });
    const refusals: [string, Headers, string, number][] = [
      ["unsigned", unsigned, body, 401],
      ["tampered", good, body.replace("cpu", "mem"), 401],
      ["wrongKey", w.signed(body, { key: `whsec_${Buffer.from("x".repeat(32)).toString("base64")}` }), body, 401],
      ["tooOld", w.signed(body, { at: new Date(now - 6 * 60_000) }), body, 401],
      ["tooNew", w.signed(body, { at: new Date(now + 6 * 60_000) }), body, 401],
    ];
    for (const [name, headers, b, status] of refusals) expect((await w.send(headers, b)).status, name).toBe(status);
    expect((await w.send(good, body, "other")).status).toBe(404);
    expect(await w.events.list()).toHaveLength(0);
    // The genuine delivery once; its webhook-id again (re-signed, even) is a replay.
    expect((await w.send(good, body)).status).toBe(202);
    expect((await w.send(good, body)).status).toBe(401);
    const id = good.get("webhook-id") ?? "";
    expect((await w.send(w.signed(body, { id }), body)).status).toBe(401);
    // Monotonic: a fresh id signed two minutes before the newest accepted delivery is refused.
    expect((await w.send(w.signed(body, { at: new Date(now - 120_000) }), body)).status).toBe(401);
    expect(await w.events.list()).toHaveLength(1);
  });

  it("C-441 C-442 C-443 a signed delivery the mapping refuses is 422 with the reason, audited, and never published; bad JSON and deep nesting are 400", async () => {
    const w = world();
    for (const [reason, body] of [
      ["missing_field", JSON.stringify({ alert: { name: "cpu" }, incident: { id: "INC-1" } })],
      ["container_value", alert({ incident: { id: { nested: true } } })],
      ["oversized_string", alert({ alert: { name: "x".repeat(65), severity: "high" } })],
    ] as const) {
      const res = await w.send(w.signed(body), body);
      expect(res.status, reason).toBe(422);
      expect((res as { error: ValidationError }).error.issues[0]?.type, reason).toBe(reason);
    }
    expect((await w.send(w.signed("{not json"), "{not json")).status).toBe(400);
    const deep = `{"alert":${"[".repeat(100)}${"]".repeat(100)}}`;
    expect((await w.send(w.signed(deep), deep)).status).toBe(400);
    expect(await w.events.list()).toHaveLength(0);
    expect(await w.audit.list({ action: "channel.webhook_refused" })).toHaveLength(3);
  });

  it("C-436 C-444 webhooks are opt-in; a mapping whose target is not allow-listed, a session field it does not project, or an env: secret outside the local profile refuse to start", () => {
    expect(loadChannelConfig({}, { local: false }).webhooks).toBeUndefined();
    expect(() =>
      parseWebhookSettings(settingsJson({ allow: { event_types: ["other.kind"], agents: ["ops"] } })),
    ).toThrow(/not allow-listed/);
    expect(() =>
      parseWebhookSettings(
        settingsJson({
          sources: { monitor: { secret_ref: "kv:monitor", mapping: { ...mapping, session_field: "nope" } } },
        }),
      ),
    ).toThrow(/session_field/);
    expect(() => loadChannelConfig({ SVC_CHANNEL_WEBHOOKS_JSON: settingsJson() }, { local: false })).toThrow(
      /env: references are for the local profile only/,
    );
    expect(loadChannelConfig({ SVC_CHANNEL_WEBHOOKS_JSON: settingsJson() }, { local: true }).webhooks?.allow).toEqual({
      event_types: ["monitor.alert_fired"],
      agents: ["ops"],
    });
  });
});
