import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import {
  ANSWER_BLOCK_LIMIT,
  BOT_CONNECTOR_SCOPE,
  buildAdaptiveCard,
  CARD_BYTE_LIMIT,
  createPlatformAChannel,
} from "../../shared/notify/channels/platform-a.js";
import {
  createTeamsConversationStore,
  type TeamsConversationStore,
} from "../../shared/notify/channels/teams-conversations.js";
import { createDeliveryStore } from "../../shared/notify/delivery-store.js";
import { parseNotificationMatrix } from "../../shared/notify/matrix.js";
import { type ChannelAdapter, createNotificationRouter } from "../../shared/notify/router.js";
import type { Notification } from "../../shared/notify/types.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";
import { routeEntraTo, startBotConnectorFake, startEntraFake } from "../support/teams-fakes.js";

const TENANT = "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
const BOT_APP_ID = "0d1e2f3a-1111-4222-8333-944455566677";
const SECRET = "bot-client-secret-value";
const APPROVER = "5a6b7c8d-0000-4000-8000-0000000000a1";
const ALERTS = "19:alerts@thread.tacv2";

const MATRIX = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    teams:
      kind: platform_a
      categories: [A1, A2]
      timeout_ms: 1000
      retry: { max_attempts: 3, initial_backoff_ms: 100, max_backoff_ms: 5000 }
    inbox:
      kind: local_inbox
      categories: [A1, A2]
  routes:
    hil_approval:
      trust_tier: a1_hil_approval
      primary: teams
    operational_alert:
      trust_tier: a2_operational_alert
      primary: teams
`;

let azurite: RunningAzurite;
let entra: Awaited<ReturnType<typeof startEntraFake>>;
let connector: Awaited<ReturnType<typeof startBotConnectorFake>>;
let restoreFetch: () => void;
let counter = 0;

beforeAll(async () => {
  entra = await startEntraFake({ tenantId: TENANT, clientId: BOT_APP_ID, clientSecret: SECRET });
  connector = await startBotConnectorFake((token) => entra.verify(token, BOT_CONNECTOR_SCOPE));
  restoreFetch = routeEntraTo(entra.url);
  azurite = await testAzurite();
}, 60_000);
afterAll(async () => {
  restoreFetch?.();
  await Promise.all([azurite?.stop(), entra?.close(), connector?.close()]);
});

function world(options: { secret?: string } = {}) {
  const tables = prefixedTables(azurite.connectionString, `tms${++counter}x${Date.now().toString(36)}`);
  const conversations: TeamsConversationStore = createTeamsConversationStore(tables, {
    operational: { serviceUrl: `${connector.url}/`, conversationId: ALERTS, tenantId: TENANT },
  });
  const teams = createPlatformAChannel({
    botAppId: BOT_APP_ID,
    tenantId: TENANT,
    clientSecret: options.secret ?? SECRET,
    conversations,
    consoleBaseUrl: "https://console.example",
  });
  const waits: number[] = [];
  const audit = createAuditLog(tables);
  const router = createNotificationRouter({
    matrix: parseNotificationMatrix("matrix.yaml", MATRIX),
    channels: new Map<string, ChannelAdapter>([["teams", teams]]),
    deliveries: createDeliveryStore(tables),
    audit,
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
  return { send: router.send, conversations, waits, teams, audit };
}

/** The approval item's action_hash, as the approval service puts it in the request's params. */
const ACTION_HASH = "ab".repeat(32);

const approval = (overrides: Partial<Notification> = {}): Notification => {
  const id = `apr-${++counter}`;
  return {
    category: "A1",
    template_key: "approval.request",
    recipient: APPROVER,
    title: "Approval requested",
    body_markdown: `Approval ${id} is waiting for a decision before 2026-11-27T18:00:00Z.`,
    params: { approval_id: id, expires_at: "2026-11-27T18:00:00Z", action_hash: ACTION_HASH },
    correlation_id: id,
    idempotency_key: `${id}/request/${APPROVER}`,
    ...overrides,
  };
};

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
  connector.requests.length = 0;
  connector.script.length = 0;
  entra.requests.length = 0;
  entra.script.length = 0;
};

const cardOf = (activity: Record<string, unknown>) =>
  (activity.attachments as { contentType: string; content: Record<string, unknown> }[])[0];

describe("chat platform A outbound (Microsoft 365 Agents SDK → Bot Connector)", () => {
  it("C-352 C-504 an approval request is a proactive Adaptive Card to the approver's stored conversation; the app token comes from Entra; the created activity's id is the acknowledgement", async () => {
    clear();
    const w = world();
    await w.conversations.save(APPROVER.toUpperCase(), {
      serviceUrl: `${connector.url}/`,
      conversationId: "a:1personal-chat",
      tenantId: TENANT,
      userId: "29:1approver",
    });
    const message = approval();
    const receipt = await w.send(message);
    expect(receipt.channels?.[0]).toMatchObject({
      channel: "teams",
      kind: "platform_a",
      operation: "continueConversation.sendActivity",
      state: "delivered",
      attempts: 1,
      text_degraded: false,
    });
    expect(receipt.channels?.[0]?.vendor_message_id).toMatch(/^1:a:1personal-chat-\d+$/);
    expect(receipt.confirmed).toBe(true);
    // MSAL's client-credentials call for Bot Connector's scope, with the bot's own app id.
    expect(entra.issued).toContain(`${BOT_CONNECTOR_SCOPE}/.default`);
    const [posted] = connector.activities();
    expect(posted?.conversation).toBe("a:1personal-chat");
    const attachment = cardOf(posted?.activity ?? {});
    expect(attachment?.contentType).toBe("application/vnd.microsoft.card.adaptive");
    const card = JSON.stringify(attachment?.content);
    expect(card).toContain(message.correlation_id);
    expect(card).toContain(`https://console.example/console?approval=${message.correlation_id}`);
    // Only a link that opens the approval in the web app: no decision payload, no submit action (spec §5 item 5).
    expect(card).not.toMatch(/Action\.Submit|Action\.Execute|"decision"|approve=/i);
  });

  it("C-510 C-511 C-513 the answer block is clipped to 4,000 characters with the marker; the card stays within 24,000 bytes and shows what was omitted, even for multi-byte text", async () => {
    const base = { ...approval(), locale: "en" as const };
    const long = buildAdaptiveCard({ ...base, body_markdown: "queue saturated ".repeat(1000) }, undefined);
    const block = (long.card.body as { text?: string }[])[1]?.text ?? "";
    expect(block.length).toBeLessThanOrEqual(ANSWER_BLOCK_LIMIT);
    expect(block.endsWith("[CHANNEL OUTPUT TRUNCATED]")).toBe(true);
    expect(long.degraded).toBe(true);
    expect(JSON.stringify(long.card)).toMatch(/"Omitted","value":"\d+ characters"/);

    const wide = buildAdaptiveCard({ ...base, body_markdown: "\u{1F9EC}\u{AC00}".repeat(20_000) }, undefined);
    expect(Buffer.byteLength(JSON.stringify(wide.card))).toBeLessThanOrEqual(CARD_BYTE_LIMIT);
    expect(wide.bytes).toBeLessThanOrEqual(CARD_BYTE_LIMIT);
    expect(wide.degraded).toBe(true);

    const short = buildAdaptiveCard(base, undefined);
    expect(short.degraded).toBe(false);
    expect(JSON.stringify(short.card)).not.toContain("Omitted");
  });

  it("C-375 with Teams SSO the A1 card is a decision form: one Action.Execute carrying only the opaque approval id, the decision and justification as the approver's inputs; other categories get no form", () => {
    const a1 = { ...approval(), locale: "en" as const };
    const { card } = buildAdaptiveCard(a1, "https://console.example", { ssoDecisions: true });
    const actions = card.actions as Record<string, unknown>[];
    expect(actions[0]).toEqual({
      type: "Action.Execute",
      verb: "approval.decide",
      title: expect.any(String),
      data: { approval_id: a1.correlation_id, action_hash: ACTION_HASH },
    });
    expect(actions[1]).toMatchObject({ type: "Action.OpenUrl" });
    const inputs = (card.body as { type: string; id?: string; isRequired?: boolean }[]).filter((b) =>
      b.type.startsWith("Input."),
    );
    expect(inputs.map((i) => [i.id, i.isRequired])).toEqual([
      ["decision", true],
      ["justification", true],
    ]);
    expect(JSON.stringify(card)).not.toMatch(/Action\.Submit|approve=/);
    const a2 = buildAdaptiveCard({ ...alert(), locale: "en" as const }, "https://console.example", {
      ssoDecisions: true,
    });
    expect(JSON.stringify(a2.card)).not.toMatch(/Action\.Execute|Input\./);
    // Without the item's action_hash there is no form (the invoke would be refused): the console link stays.
    const unhashed = buildAdaptiveCard(
      { ...a1, params: { approval_id: a1.correlation_id } },
      "https://console.example",
      {
        ssoDecisions: true,
      },
    );
    expect(JSON.stringify(unhashed.card)).not.toMatch(/Action\.Execute|Input\./);
  });

  it("an operational alert goes to the configured alert conversation; a recipient without a stored conversation is a definitive failure before any call", async () => {
    clear();
    const w = world();
    const receipt = await w.send(alert());
    expect(receipt.channels?.[0]).toMatchObject({ state: "delivered" });
    expect(connector.activities().map((a) => a.conversation)).toEqual([ALERTS]);

    clear();
    const none = await w.send(approval({ recipient: "5a6b7c8d-0000-4000-8000-0000000000ff" }));
    expect(none.channels?.[0]).toMatchObject({
      state: "definitive_failure",
      attempts: 1,
      reason: "no_conversation_reference",
    });
    expect(connector.requests).toHaveLength(0);
  });

  it("C-522 C-523 a 429 is retried after its Retry-After within the channel's budget; a 429 storm spends the budget and fails definitively", async () => {
    clear();
    const w = world();
    const throttled = {
      status: 429,
      headers: { "retry-after": "2" },
      body: JSON.stringify({ error: { code: "TooManyRequests", message: "Too many requests" } }),
    };
    connector.script.push(throttled);
    const once = await w.send(alert());
    expect(once.channels?.[0]).toMatchObject({ state: "delivered", attempts: 2 });
    expect(w.waits).toEqual([2000]);

    clear();
    connector.script.push(throttled, throttled, throttled);
    const storm = await w.send(alert());
    expect(storm.channels?.[0]).toMatchObject({ state: "definitive_failure", attempts: 3, reason: "http_429" });
    expect(connector.requests).toHaveLength(3);
  });

  it("C-294 Bot Connector's 403 (the bot is not in the conversation) is definitive without a retry; a 502 is retried", async () => {
    clear();
    const w = world();
    connector.script.push({
      status: 403,
      body: JSON.stringify({
        error: { code: "BotNotInConversationRoster", message: "The bot is not part of the conversation roster." },
      }),
    });
    const refused = await w.send(alert());
    expect(refused.channels?.[0]).toMatchObject({ state: "definitive_failure", attempts: 1, reason: "http_403" });
    expect(connector.requests).toHaveLength(1);

    clear();
    connector.script.push({ status: 502, body: "Bad Gateway" });
    const recovered = await w.send(alert());
    expect(recovered.channels?.[0]).toMatchObject({ state: "delivered", attempts: 2 });
  });

  it("C-504 C-295 a 201 without a resource id, a cut connection and a hang past the time limit are ambiguous and never retried", async () => {
    const w = world();
    for (const behaviour of [{ status: 201, body: "{}" }, "cut", "hang"] as const) {
      clear();
      connector.script.push(behaviour);
      const receipt = await w.send(alert());
      expect(receipt.channels?.[0]?.state, JSON.stringify(behaviour)).toBe("ambiguous");
      expect(receipt.channels?.[0]?.attempts).toBe(1);
      expect(connector.requests).toHaveLength(1);
    }
  });

  it("a refused client secret (Entra's invalid_client) fails definitively without reaching Bot Connector", async () => {
    clear();
    const w = world({ secret: "a-wrong-secret" });
    const receipt = await w.send(alert());
    expect(receipt.channels?.[0]).toMatchObject({ state: "definitive_failure", attempts: 1 });
    expect(receipt.channels?.[0]?.reason).toMatch(/^token_unavailable/);
    expect(JSON.stringify(receipt)).not.toContain("a-wrong-secret");
    expect(connector.requests).toHaveLength(0);
  });

  it("C-527 idempotent by correlation id, audit id and category: a repeated send makes one Bot Connector call", async () => {
    clear();
    const w = world();
    const message = alert();
    const [a, b] = await Promise.all([w.send(message), w.send(message)]);
    const again = await w.send(message);
    expect(connector.requests).toHaveLength(1);
    expect(again.channels?.[0]?.vendor_message_id).toBe(
      [a, b].find((r) => r.channels?.[0]?.state === "delivered")?.channels?.[0]?.vendor_message_id,
    );
  });
});
