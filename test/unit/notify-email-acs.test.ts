import { randomBytes } from "node:crypto";
import type { TokenCredential } from "@azure/core-auth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import { buildChannelAdapters } from "../../shared/notify/build-notifier.js";
import { acsOperationId, createAcsEmailChannel } from "../../shared/notify/channels/email-acs.js";
import { loadNotifyConfig } from "../../shared/notify/notify-config.js";
import type { OutboundMessage } from "../../shared/notify/router.js";
import { startAcsEmailFake } from "../support/acs-fake.js";
import { testCertificate } from "../support/test-certificate.js";

/**
 * Cloud mail (issue 25 email row, `SVC_EMAIL_ACS_ENDPOINT`) through the real
 * `@azure/communication-email` client against a local HTTPS server that answers as Azure
 * Communication Services Email does: the send, the long-running operation it polls, and the
 * caller's authentication — the identity's bearer token, or the HMAC signature the server
 * recomputes from the access key.
 */

const TOKEN = "managed-identity-token-for-acs-email";
const ACCESS_KEY = randomBytes(32).toString("base64");
const credential: TokenCredential = {
  getToken: async (scopes) => {
    expect(scopes).toEqual(["https://communication.azure.com//.default"]);
    return { token: TOKEN, expiresOnTimestamp: Date.now() + 3_600_000 };
  },
};
const tls = testCertificate();
let acs: Awaited<ReturnType<typeof startAcsEmailFake>>;

beforeAll(async () => {
  acs = await startAcsEmailFake({
    tls,
    token: TOKEN,
    accessKey: ACCESS_KEY,
    refuse: new Set(["bounced@ops.example"]),
    runningPolls: 2,
  });
});
afterAll(() => acs?.close());

let counter = 0;
const incidentOpen = (overrides: Partial<OutboundMessage> = {}): OutboundMessage => ({
  category: "A2",
  template_key: "incident.open",
  recipient: "operational",
  title: "Incident opened",
  body_markdown: "Incident opened.",
  correlation_id: `corr-${++counter}`,
  audit_id: `aud-${counter}`,
  idempotency_key: `incident.open/${counter}`,
  severity: "high",
  params: {
    incident_id: "inc_20261127_0042",
    status: "open",
    severity: "high",
    opened_at: "2026-11-27T10:00:00Z",
    member_count: 7,
    assignment: "unassigned",
    audit_id: "aud_7c1",
  },
  locale: "en",
  ...overrides,
});

const channel = (extra: { to?: string[]; credential?: TokenCredential | { key: string } } = {}) =>
  createAcsEmailChannel({
    endpoint: acs.url,
    from: "DoNotReply@blastplane.example",
    to: extra.to ?? ["oncall@ops.example", "lead@ops.example"],
    credential: extra.credential ?? credential,
    consoleBaseUrl: "https://console.ops.example",
    ca: tls.cert,
    pollIntervalMs: 5,
  });
const send = (adapter: ReturnType<typeof channel>, message = incidentOpen(), messageId = `m-${++counter}`) =>
  adapter.send(message, { signal: AbortSignal.timeout(10_000), attempt: 1, messageId });

describe("cloud mail through @azure/communication-email", () => {
  it("C-218 C-219 C-220 the incident-open email is sent with the identity's token, its operation polled until ACS reports it Succeeded; the operation id is the acknowledgement", async () => {
    acs.requests.length = 0;
    const outcome = await send(channel(), incidentOpen(), "msg-acs-1");
    const operationId = acsOperationId("msg-acs-1");
    expect(outcome).toEqual({ outcome: "acknowledged", vendor_message_id: operationId });
    // One send, then polls of its Operation-Location until the status is final.
    expect(acs.requests.map((r) => `${r.method} ${r.path.split("?")[0]}`)).toEqual([
      "POST /emails:send",
      `GET /emails/operations/${operationId}`,
      `GET /emails/operations/${operationId}`,
      `GET /emails/operations/${operationId}`,
    ]);
    expect(acs.requests[0]?.headers["operation-id"]).toBe(operationId);
    const body = acs.sent.get(operationId) as {
      senderAddress: string;
      recipients: { to: { address: string }[] };
      content: { subject: string; plainText: string; html: string };
      headers: Record<string, string>;
      userEngagementTrackingDisabled: boolean;
    };
    expect(body.senderAddress).toBe("DoNotReply@blastplane.example");
    expect(body.recipients.to.map((t) => t.address)).toEqual(["oncall@ops.example", "lead@ops.example"]);
    expect(body.userEngagementTrackingDisabled).toBe(true);
    expect(body.headers).toMatchObject({ "X-Blastplane-Category": "A2", "X-Blastplane-Template": "incident.open" });
    for (const field of ["inc_20261127_0042", "Status: open", "Severity: high", "Events: 7", "aud_7c1"])
      expect(body.content.plainText).toContain(field);
    expect(body.content.html).toMatch(/href="https:\/\/console\.ops\.example\/console\?incident=inc_20261127_0042"/);
    expect(acs.auth.bearer).toBeGreaterThanOrEqual(4);
  });

  it("with an access key every request is HMAC-signed as ACS checks it (content hash, date, host, path and query); a wrong key is refused 401, definitively", async () => {
    const before = acs.auth.hmac;
    expect(await send(channel({ credential: { key: ACCESS_KEY } }))).toMatchObject({ outcome: "acknowledged" });
    expect(acs.auth.hmac - before).toBe(4);
    expect(await send(channel({ credential: { key: randomBytes(32).toString("base64") } }))).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "http_401",
    });
  });

  it("every attempt of one message carries the same Operation-Id; two messages carry two", async () => {
    acs.requests.length = 0;
    const adapter = channel();
    const message = incidentOpen();
    await send(adapter, message, "msg-same");
    await send(adapter, message, "msg-same");
    await send(adapter, message, "msg-other");
    const ids = acs.requests.filter((r) => r.method === "POST").map((r) => r.headers["operation-id"]);
    expect(ids).toEqual([acsOperationId("msg-same"), acsOperationId("msg-same"), acsOperationId("msg-other")]);
    expect(new Set(ids).size).toBe(2);
  });

  it("C-294 a message ACS accepts and then reports Failed (a suppressed recipient) is a definitive failure, never retried", async () => {
    expect(await send(channel({ to: ["bounced@ops.example"] }))).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "acs_failed",
    });
  });

  it("C-522 a 429 on the send is retryable after its Retry-After (one request: the SDK's retries are off); a 400 is definitive", async () => {
    acs.requests.length = 0;
    acs.script.push({
      status: 429,
      body: JSON.stringify({ error: { code: "TooManyRequests", message: "Rate limit exceeded." } }),
      headers: { "retry-after": "30" },
    });
    expect(await send(channel())).toEqual({
      outcome: "rejected",
      retryable: true,
      retry_after_ms: 30_000,
      reason: "http_429",
    });
    expect(acs.requests).toHaveLength(1);
    expect(await send(channel({ to: ["not-an-address"] }))).toEqual({
      outcome: "rejected",
      retryable: false,
      reason: "http_400",
    });
  });

  it("C-295 C-296 a cut send, a poll cut or failing after ACS accepted, a 202 that is not ACS's answer and a hang past the limit are ambiguous — never 'not sent'", async () => {
    acs.script.push("cut");
    expect(await send(channel())).toEqual({ outcome: "ambiguous", reason: "transport_interrupted" });
    // Accepted, then the first poll is cut: the mail may be on its way.
    acs.script.push("ok", "cut");
    expect(await send(channel())).toEqual({ outcome: "ambiguous", reason: "operation_unknown" });
    acs.script.push("ok", { status: 500, body: JSON.stringify({ error: { code: "InternalError", message: "x" } }) });
    expect(await send(channel())).toEqual({ outcome: "ambiguous", reason: "operation_unknown" });
    // A 202 that is not ACS's answer: no operation to poll, no id, no status.
    acs.script.push({ status: 202, body: "{}" });
    expect(await send(channel())).toEqual({ outcome: "ambiguous", reason: "malformed_acknowledgement" });
    acs.script.push("hang");
    const adapter = channel();
    expect(
      await adapter.send(incidentOpen(), { signal: AbortSignal.timeout(300), attempt: 1, messageId: "m-hang" }),
    ).toEqual({ outcome: "ambiguous", reason: "timeout" });
  });
});

describe("cloud mail settings", () => {
  const env = {
    SVC_EMAIL_ACS_ENDPOINT: "https://acs-blastplane.europe.communication.azure.com",
    SVC_EMAIL_FROM: "DoNotReply@blastplane.example",
    SVC_EMAIL_TO: "oncall@ops.example, lead@ops.example",
    SVC_CONSOLE_BASE_URL: "https://console.example",
  };
  const problems = (overrides: Record<string, string | undefined>, local = false) => {
    try {
      loadNotifyConfig({ ...env, ...overrides }, { local });
      return [];
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as ConfigError).problems;
    }
  };

  it("C-361 SVC_EMAIL_ACS_ENDPOINT registers the matrix's email channel (A2, A4) instead of SMTP; without a key it signs in with the app's identity", async () => {
    const config = loadNotifyConfig(env, { local: false });
    expect(config.emailAcs).toEqual({
      endpoint: env.SVC_EMAIL_ACS_ENDPOINT,
      keyRef: undefined,
      from: "DoNotReply@blastplane.example",
      to: ["oncall@ops.example", "lead@ops.example"],
    });
    expect(config.email).toBeUndefined();
    expect(config.registered.has("email")).toBe(true);
    expect(config.matrix.channels.email?.categories).toEqual(["A2", "A4"]);
    // No identity and no key: the channel's sends fail definitively rather than going out unsigned.
    const adapter = buildChannelAdapters(config, async () => "unused").get("email");
    expect(adapter?.operation).toBe("emails.send");
    expect(
      await adapter?.send(incidentOpen(), { signal: AbortSignal.timeout(1000), attempt: 1, messageId: "m" }),
    ).toEqual({ outcome: "rejected", retryable: false, reason: "credential_unavailable" });
  });

  it("an access key comes only by secret reference and is resolved on the first send", async () => {
    const config = loadNotifyConfig(
      { ...env, SVC_EMAIL_ACS_ENDPOINT: acs.url, SVC_EMAIL_ACS_KEY_REF: "kv:acs-email-key" },
      { local: false },
    );
    const asked: string[] = [];
    const adapter = buildChannelAdapters(
      config,
      async (ref) => {
        asked.push(ref);
        return ACCESS_KEY;
      },
      { ca: tls.cert },
    ).get("email");
    expect(asked).toEqual([]);
    expect(
      await adapter?.send(incidentOpen(), { signal: AbortSignal.timeout(10_000), attempt: 1, messageId: "m-kv" }),
    ).toMatchObject({ outcome: "acknowledged", vendor_message_id: acsOperationId("m-kv") });
    expect(asked).toEqual(["kv:acs-email-key"]);
    expect(problems({ SVC_EMAIL_ACS_KEY_REF: "plain-key-value" }).join("\n")).toMatch(
      /SVC_EMAIL_ACS_KEY_REF: must be a secret reference/,
    );
  });

  it("C-498 C-500 SMTP and ACS together, a plain-HTTP endpoint, a key without an endpoint or an endpoint without recipients refuse to start", () => {
    expect(problems({ SVC_SMTP_URL: "smtps://smtp.example:465" }).join("\n")).toContain(
      "SVC_SMTP_URL, SVC_EMAIL_ACS_ENDPOINT: set one of them",
    );
    expect(problems({ SVC_EMAIL_ACS_ENDPOINT: "http://acs.example" }, true).join("\n")).toContain(
      "SVC_EMAIL_ACS_ENDPOINT: must be https://",
    );
    expect(
      problems({ SVC_EMAIL_ACS_ENDPOINT: undefined, SVC_EMAIL_ACS_KEY_REF: "kv:acs-email-key" }).join("\n"),
    ).toContain("SVC_EMAIL_ACS_KEY_REF: is only used with SVC_EMAIL_ACS_ENDPOINT");
    expect(problems({ SVC_EMAIL_TO: undefined }).join("\n")).toContain(
      "SVC_EMAIL_TO: is required for the email channel",
    );
  });
});
