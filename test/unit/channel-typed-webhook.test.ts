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
