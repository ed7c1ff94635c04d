import type { TokenCredential } from "@azure/core-auth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import { buildChannelAdapters } from "../../shared/notify/build-notifier.js";
import { createSmsChannel, SMS_LIMIT } from "../../shared/notify/channels/sms.js";
import { loadNotifyConfig } from "../../shared/notify/notify-config.js";
import type { OutboundMessage } from "../../shared/notify/router.js";
import { type FakeServer, startAcsSmsFake } from "../support/acs-fake.js";
import { testCertificate } from "../support/test-certificate.js";

/**
 * The SMS channel (issue 25, spec operator-console.md §8 row SMS) through the real
 * `@azure/communication-sms` client against a local server that answers as Azure Communication
 * Services does, over HTTPS with the identity's bearer token.
 */

const TOKEN = "managed-identity-token-for-acs";
/** The app's one credential as the SDK sees it: a bearer token for the ACS scope. */
const credential: TokenCredential = {
  getToken: async (scopes) => {
    expect(scopes).toEqual(["https://communication.azure.com//.default"]);
    return { token: TOKEN, expiresOnTimestamp: Date.now() + 3_600_000 };
  },
};
const tls = testCertificate();
let acs: FakeServer;
const refused = new Set(["+15550000002"]);

beforeAll(async () => {
  acs = await startAcsSmsFake({ tls, token: TOKEN, refuse: refused });
});
afterAll(() => acs?.close());

let counter = 0;
const alert = (overrides: Partial<OutboundMessage> = {}): OutboundMessage =>
  ({
    category: "A2",
    template_key: "ops.alert",
    recipient: "operational",
    title: "Queue saturated on cluster aks-prod-eastus for alice@contoso.com",
    body_markdown: "Subscription 00000000-0000-4000-8000-000000000000: the queue has been saturated for 10 minutes.",
    correlation_id: `corr-${++counter}`,
    audit_id: `aud-${counter}`,
    idempotency_key: `ops.alert/${counter}`,
    severity: "high",
    runbook_url: "https://runbooks.example/ops/queue",
    ...overrides,
  }) as OutboundMessage;

const channel = (to: string[], extra: { credential?: TokenCredential } = {}) =>
  createSmsChannel({
    endpoint: acs.url,
    from: "+15551230000",
    to,
    credential: extra.credential ?? credential,
    ca: tls.cert,
  });
const send = (adapter: ReturnType<typeof channel>, message = alert()) =>
  adapter.send(message, { signal: AbortSignal.timeout(10_000), attempt: 1, messageId: message.correlation_id });

describe("SMS through @azure/communication-sms", () => {
  it("C-517 the text carries only the severity, the audit id and the runbook URL; every recipient's messageId is the acknowledgement", async () => {
    acs.requests.length = 0;
    const outcome = await send(channel(["+15550000001", "+15550000003"]), alert({ audit_id: "aud-sms-1" }));
    expect(outcome).toEqual({
      outcome: "acknowledged",
      vendor_message_id: expect.stringMatching(/^Outgoing_\d+_noam,Outgoing_\d+_noam$/),
    });
    expect(acs.requests).toHaveLength(1);
    const body = JSON.parse(acs.requests[0]?.body ?? "{}") as {
      from: string;
      message: string;
      smsRecipients: { to: string }[];
    };
    expect(body.from).toBe("+15551230000");
    expect(body.smsRecipients.map((r) => r.to)).toEqual(["+15550000001", "+15550000003"]);
    expect(body.message).toBe("blastplane HIGH · audit aud-sms-1 · https://runbooks.example/ops/queue");
    // Nothing of the title or the body (names, clusters, subscriptions) reaches a phone.
    expect(body.message).not.toMatch(/alice|aks-prod|Subscription|saturated/);
  });

  it("C-517 a runbook URL that would overflow one segment is left out rather than cut; a plain-HTTP runbook is never sent", async () => {
    acs.requests.length = 0;
    await send(
      channel(["+15550000001"]),
      alert({ audit_id: "aud-2", runbook_url: `https://runbooks.example/${"x".repeat(200)}` }),
    );
    await send(channel(["+15550000001"]), alert({ audit_id: "aud-3", runbook_url: "http://runbooks.example/ops" }));
    const texts = acs.requests.map((r) => (JSON.parse(r.body) as { message: string }).message);
    expect(texts).toEqual(["blastplane HIGH · audit aud-2", "blastplane HIGH · audit aud-3"]);
    for (const text of texts) expect(text.length).toBeLessThanOrEqual(SMS_LIMIT);
  });

  it("C-294 a recipient ACS refuses is a definitive failure; with one refused among accepted ones it is not retried either (a retry would page the others twice)", async () => {
    expect(await send(channel(["+15550000002"]))).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "recipient_http_400",
    });
    expect(await send(channel(["+15550000001", "+15550000002"]))).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "partially_delivered",
    });
  });

  it("C-522 a 429 is retryable after its Retry-After (the SDK's own retries are off: one request per attempt); a 401 is definitive", async () => {
    acs.requests.length = 0;
    acs.script.push({
      status: 429,
      body: JSON.stringify({ error: { code: "TooManyRequests", message: "slow down" } }),
      headers: { "retry-after": "7" },
    });
    expect(await send(channel(["+15550000001"]))).toEqual({
      outcome: "rejected",
      retryable: true,
      retry_after_ms: 7000,
      reason: "http_429",
    });
    expect(acs.requests).toHaveLength(1);
    const wrongToken: TokenCredential = {
      getToken: async () => ({ token: "not-it", expiresOnTimestamp: Date.now() + 60_000 }),
    };
    expect(await send(channel(["+15550000001"], { credential: wrongToken }))).toMatchObject({
      outcome: "rejected",
      retryable: false,
      reason: "http_401",
    });
  });

  it("C-295 C-296 a cut connection, a hang past the time limit and a 202 that is not ACS's answer are ambiguous, never retried", async () => {
    acs.script.push("cut");
    expect(await send(channel(["+15550000001"]))).toEqual({ outcome: "ambiguous", reason: "transport_interrupted" });
    acs.script.push("hang");
    const adapter = channel(["+15550000001"]);
    const message = alert();
    expect(await adapter.send(message, { signal: AbortSignal.timeout(300), attempt: 1, messageId: "m" })).toEqual({
      outcome: "ambiguous",
      reason: "timeout",
    });
    acs.script.push({ status: 202, body: JSON.stringify({ value: [{ to: "+15550000001", successful: true }] }) });
    expect(await send(channel(["+15550000001"]))).toEqual({
      outcome: "ambiguous",
      reason: "malformed_acknowledgement",
    });
  });
});

describe("SMS settings", () => {
  const env = {
    SVC_SMS_ENDPOINT: "https://acs-blastplane.communication.azure.com",
    SVC_SMS_FROM: "+15551230000",
    SVC_SMS_TO: "+15550000001, +15550000003",
    SVC_CONSOLE_BASE_URL: "https://console.example",
  };

  it("C-370 present settings register the matrix's sms channel (A2 only); its adapter signs in with the app's identity", async () => {
    const config = loadNotifyConfig(env, { local: false });
    expect(config.sms).toEqual({
      endpoint: env.SVC_SMS_ENDPOINT,
      from: "+15551230000",
      to: ["+15550000001", "+15550000003"],
    });
    expect(config.registered.has("sms")).toBe(true);
    expect(config.matrix.channels.sms?.categories).toEqual(["A2"]);
    // Without the app's credential the channel fails its sends definitively rather than sending unsigned.
    const adapter = buildChannelAdapters(config, async () => "unused").get("sms");
    expect(await adapter?.send(alert(), { signal: AbortSignal.timeout(1000), attempt: 1, messageId: "m" })).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "credential_unavailable",
    });
  });

  it("a half-configured SMS channel, a plain-HTTP endpoint or a number that is not E.164 refuses to start", () => {
    const problems = (overrides: Record<string, string | undefined>) => {
      try {
        loadNotifyConfig({ ...env, ...overrides }, { local: false });
        return [];
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ SVC_SMS_TO: undefined }).join("\n")).toContain("SVC_SMS_TO: is required for the SMS channel");
    expect(problems({ SVC_SMS_ENDPOINT: "http://acs.example" }).join("\n")).toContain(
      "SVC_SMS_ENDPOINT: must be https://",
    );
    expect(problems({ SVC_SMS_TO: "5550000001" }).join("\n")).toMatch(/SVC_SMS_TO.*E\.164/);
  });
});
