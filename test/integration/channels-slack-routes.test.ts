import { readFileSync } from "node:fs";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { createLocalJWKSet, type JWK, jwtVerify } from "jose";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { slackSignature } from "../../shared/channels/platform-b/signature.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { postedArgs, startPlatformBFake } from "../support/notify-vendors.js";
import { getHttpsJson } from "../../shared/channels/platform-a/bot-service-keys.js";
import { startBotConnectorFake } from "../support/teams-fakes.js";

/**
 * The conversation channels' routes on the local stack (the Functions host, real Azurite). Slack:
 * one signed `/svc status` slash command end to end, and the transport's refusals (401, 413, 400,
 * the envelope). Teams (`POST /api/messages`, one stack for both): the route is registered,
 * verifies real Bot Service tokens from a local issuer inside the host, and refuses in the
 * envelope; a message is answered through the Agents SDK to a local Bot Connector, its app token
 * from the stack's own Entra stand-in over HTTPS (`SVC_PLATFORM_A_AUTHORITY_HOST` and its CA file,
 * both set by the stack).
 */

const SECRET = "local-signing-secret-0123456789";
const TOKEN = "xoxb-local-token";
const READER = "44444444-4444-4444-4444-444444444444";

const BOT_APP_ID = "0d1e2f3a-1111-4222-8333-944455566677";
const TENANT = "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
const TEAMS_USER = "aaaaaaaa-1111-4111-8111-111111111111";
// The local issuer mints for loopback connectors only (a real bot token never leaves the machine).
const TEAMS_SERVICE_URL = "http://127.0.0.1:9/amer/";
/** An unbound Teams user (pairing mode) and the existing principal an approver pairs it with. */
const UNBOUND_TEAMS_USER = "dddddddd-4444-4444-8444-444444444444";
const PAIRED = "55555555-5555-4555-8555-555555555555";
const WEBHOOK_SECRET = `whsec_${Buffer.from("route-test-webhook-secret-0123456").toString("base64")}`;

let stack: TestStack;
let slackApi: Awaited<ReturnType<typeof startPlatformBFake>>;
let connector: Awaited<ReturnType<typeof startBotConnectorFake>>;
const TEAMS_CLIENT_SECRET = "local-bot-client-secret";

/**
 * Bot Connector accepts only the bot's app token from the stack's own Entra stand-in: RS256 with
 * the key it publishes for the bot's tenant, Entra's v1 issuer, audience Bot Connector, the bot's app id.
 */
async function stackAppToken(token: string): Promise<void> {
  const base = stack.info.bot_service_url;
  if (!base) throw new Error("the stack runs no Bot Service issuer");
  const ca = readFileSync(path.join(stack.dataDir, "bot-service", "issuer.crt"), "utf8");
  const keys = (await getHttpsJson(`${base}/${TENANT}/discovery/v2.0/keys`, { ca })) as { keys: JWK[] };
  const { payload } = await jwtVerify(token, createLocalJWKSet({ keys: keys.keys }), {
    algorithms: ["RS256"],
    issuer: `https://sts.windows.net/${TENANT}/`,
    audience: "https://api.botframework.com",
  });
  if (payload.appid !== BOT_APP_ID) throw new Error("not the bot's token");
  entraIssued.push(String(payload.aud));
}
const entraIssued: string[] = [];

beforeAll(async () => {
  slackApi = await startPlatformBFake(TOKEN);
  // The Bot Service tokens and the bot's app token for its replies both come from the stack's own
  // Bot Service–shaped issuer (npm start; its Entra stand-in because the client secret is an env: reference).
  connector = await startBotConnectorFake(stackAppToken);
  stack = await startStack({
    env: {
      WEBHOOK_TEST_SECRET: WEBHOOK_SECRET,
      SVC_CHANNEL_WEBHOOKS_JSON: JSON.stringify({
        allow: { event_types: ["monitor.alert_fired"], agents: ["ops"] },
        sources: {
          monitor: {
            secret_ref: "env:WEBHOOK_TEST_SECRET",
            mapping: {
              event_type: "monitor.alert_fired",
              target_agent: "ops",
              fields: { alert: "alert.name", incident: "incident.id" },
              session_field: "incident",
            },
          },
        },
      }),
      SVC_PLATFORM_A_CHANNEL_ENABLED: "true",
      SVC_PLATFORM_A_BOT_APP_ID: BOT_APP_ID,
      SVC_PLATFORM_A_TENANT_ID: TENANT,
      SVC_PLATFORM_A_CLIENT_SECRET_REF: "env:TEAMS_TEST_CLIENT_SECRET",
      TEAMS_TEST_CLIENT_SECRET: TEAMS_CLIENT_SECRET,
      SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: JSON.stringify({ [TEAMS_USER]: READER }),
      // Bound senders as before; an unbound one is challenged (pairing) instead of refused.
      SVC_PLATFORM_A_SENDER_ACCESS: "pairing",
      SLACK_TEST_SIGNING_SECRET: SECRET,
      SLACK_TEST_BOT_TOKEN: TOKEN,
      SVC_PLATFORM_B_CHANNEL_ENABLED: "true",
      SVC_PLATFORM_B_SIGNING_SECRET_REF: "env:SLACK_TEST_SIGNING_SECRET",
      SVC_PLATFORM_B_BOT_TOKEN_REF: "env:SLACK_TEST_BOT_TOKEN",
      SVC_PLATFORM_B_API_URL: `${slackApi.url}/api/`,
      // The bot token is shared with the outbound channel, which then needs its alert channel too.
      SVC_PLATFORM_B_ALERT_CHANNEL: "C0ALERTS",
      SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON: JSON.stringify({ UREADER: READER }),
      SVC_CHANNEL_PRINCIPAL_ROLES_JSON: JSON.stringify({
        [READER]: { name: "Rita", roles: ["Reader"] },
        [PAIRED]: { name: "Pat", roles: ["Reader"] },
      }),
    },
  });
}, 300_000);
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
  await slackApi?.close();
  await connector?.close();
});

function post(path: string, body: string, contentType: string, headers: Record<string, string> = {}) {
  return fetch(`${stack.info.functions_url}/api/${path}`, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body,
  });
}

/**
 * A Bot Service token from the local stack's own Bot Service–shaped issuer (`npm start`: the
 * identity provider's `POST /dev/bot-service-token`; the key set on its HTTPS port, which the app
 * trusts through SVC_PLATFORM_A_OPENID_CA_FILE, both set by the stack).
 */
async function botServiceToken(serviceUrl: string, audience?: string): Promise<string> {
  const res = await fetch(`${stack.info.idp_url}/dev/bot-service-token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ service_url: serviceUrl, ...(audience ? { audience } : {}) }),
  });
  if (res.status !== 200) throw new Error(`bot service token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

function signedHeaders(body: string) {
  const ts = String(Math.floor(Date.now() / 1000));
  return { "x-slack-request-timestamp": ts, "x-slack-signature": slackSignature(SECRET, ts, body) };
}

describe("Slack routes on the local stack", () => {
  it("C-003 C-415 C-416 a signed /svc status slash command is answered in the channel through the Web API", async () => {
    const body = new URLSearchParams({
      team_id: "T0TEAM",
      channel_id: "C0OPS",
      user_id: "UREADER",
      command: "/svc",
      text: "status",
      trigger_id: "1.2.abcdef",
      response_url: "https://hooks.slack.com/commands/x",
    }).toString();
    const from = slackApi.requests.length;
    const res = await post("channels/slack/commands", body, "application/x-www-form-urlencoded", signedHeaders(body));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({});
    // The answer comes once the turn is queued; the reply follows through the Web API.
    await eventually(async () => (slackApi.requests.length > from ? true : undefined), 30_000);
    const posts = slackApi.requests.slice(from).map(postedArgs);
    expect(posts).toHaveLength(1);
    expect(posts[0]?.channel).toBe("C0OPS");
    expect(JSON.stringify(posts[0]?.blocks)).toContain("Kill switch: off");
    // It ran as its own channelTurn orchestration, not in the route's process (the fallback logs a warning).
    expect(stack.output()).not.toContain("channel turn orchestration not started");
  });

  it("C-379 an unsigned or altered request is 401 in the error envelope; a 1 MB body 413; deep nesting 400", async () => {
    const event = JSON.stringify({ type: "url_verification", challenge: "abc" });
    const unsigned = await post("channels/slack/events", event, "application/json");
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    const altered = await post(
      "channels/slack/events",
      event.replace("abc", "abd"),
      "application/json",
      signedHeaders(event),
    );
    expect(altered.status).toBe(401);
    const handshake = await post("channels/slack/events", event, "application/json", signedHeaders(event));
    expect(await handshake.json()).toEqual({ challenge: "abc" });
    const big = JSON.stringify({ type: "event_callback", padding: "x".repeat(1024 * 1024) });
    expect((await post("channels/slack/events", big, "application/json", signedHeaders(big))).status).toBe(413);
    const deep = `{"type":"event_callback","x":${"[".repeat(3000)}${"]".repeat(3000)}}`;
    expect((await post("channels/slack/events", deep, "application/json", signedHeaders(deep))).status).toBe(400);
  });

  it("pairing approval needs an Approver's token", async () => {
    const body = JSON.stringify({ channel: "platform_b", sender_id: "U9", code: "ABCDEFGH", principal_oid: READER });
    expect((await post("channels/pairing", body, "application/json")).status).toBe(401);
    const reader = await mintToken(stack, "Reader");
    expect(
      (await post("channels/pairing", body, "application/json", { authorization: `Bearer ${reader}` })).status,
    ).toBe(403);
  });
});

describe("Teams route on the local stack (POST /api/messages)", () => {
  const activity = (overrides: Record<string, unknown> = {}) => ({
    type: "conversationUpdate",
    id: `f:${Date.now()}`,
    channelId: "msteams",
    serviceUrl: TEAMS_SERVICE_URL,
    from: { id: "29:1abc", aadObjectId: TEAMS_USER },
    recipient: { id: `28:${BOT_APP_ID}` },
    conversation: { id: "a:1personal-stack", conversationType: "personal", tenantId: TENANT },
    channelData: { tenant: { id: TENANT } },
    ...overrides,
  });
  const teams = (body: unknown, authorization?: string) =>
    post("messages", JSON.stringify(body), "application/json", authorization ? { authorization } : {});
  const token = (audience?: string) => botServiceToken(TEAMS_SERVICE_URL, audience);

  it("C-390 C-391 C-388 C-257 no token, a wrong audience and an unknown tenant are refused in the envelope before the queue", async () => {
    const none = await teams(activity());
    expect(none.status).toBe(401);
    expect(await none.json()).toEqual({ detail: expect.any(String), request_id: expect.any(String) });
    expect((await teams(activity(), `Bearer ${await token("11111111-2222-4333-8444-555555555555")}`)).status).toBe(401);
    const other = "12121212-3434-4565-8787-909090909090";
    const foreign = await teams(
      activity({ conversation: { id: "a:1", tenantId: other }, channelData: { tenant: { id: other } } }),
      `Bearer ${await token()}`,
    );
    expect(foreign.status).toBe(403);
    expect(await foreign.json()).toEqual({ detail: expect.any(String), request_id: expect.any(String) });
  });

  it("C-002 a verified activity of a bound sender is accepted by the host, and its personal conversation is kept for notifications", async () => {
    const res = await teams(activity(), `Bearer ${await token()}`);
    expect(res.status).toBe(200);
    const conversations = TableClient.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
      "teamsconversations",
      { allowInsecureConnection: true },
    );
    const rows: Record<string, unknown>[] = [];
    for await (const row of conversations.listEntities()) rows.push(row);
    expect(rows).toEqual([
      expect.objectContaining({
        conversation_id: "a:1personal-stack",
        service_url: TEAMS_SERVICE_URL,
        tenant_id: TENANT,
      }),
    ]);
  });
});

describe("Teams reply on the full local stack (issue 26: SVC_PLATFORM_A_AUTHORITY_HOST)", () => {
  it("C-002 C-392 C-504 a bound sender's message is answered through the Agents SDK: the app token from the configured authority, the reply to Bot Connector as the activity's reply", async () => {
    const serviceUrl = `${connector.url}/`;
    const id = `1700${Date.now()}`;
    const message = {
      type: "message",
      id,
      channelId: "msteams",
      serviceUrl,
      text: "<at>blastplane</at> explore_catalog query=R-JOB-001",
      from: { id: "29:1abc", aadObjectId: TEAMS_USER },
      recipient: { id: `28:${BOT_APP_ID}` },
      conversation: { id: "a:1personal-reply", conversationType: "personal", tenantId: TENANT },
      channelData: { tenant: { id: TENANT } },
    };
    const token = await botServiceToken(serviceUrl);
    const res = await post("messages", JSON.stringify(message), "application/json", {
      authorization: `Bearer ${token}`,
    });
    expect(res.status).toBe(200);
    const reply = await eventually(
      async () => connector.requests.find((r) => r.path === `/v3/conversations/a:1personal-reply/activities/${id}`),
      60_000,
    );
    // Bot Connector accepted the bearer only as the stack's Entra stand-in's app token for Bot Connector
    // (the fake records a request before it has checked its token).
    await eventually(async () => (entraIssued.includes("https://api.botframework.com") ? true : undefined), 30_000);
    const activity = JSON.parse(reply.body) as Record<string, unknown>;
    expect(activity).toMatchObject({ type: "message", replyToId: id, from: { id: `28:${BOT_APP_ID}` } });
    expect(String(activity.text).replace(/\\(.)/g, "$1")).toContain("explore_catalog: ok");
  }, 120_000);
});

describe("Teams pairing on the full local stack (SVC_PLATFORM_A_SENDER_ACCESS=pairing)", () => {
  it("C-396 C-291 C-292 C-393 §5 item 8: an unbound Teams sender's pairing challenge reaches Bot Connector; an approver pairs it with POST /api/channels/pairing; its next message is answered as the mapped principal", async () => {
    const serviceUrl = `${connector.url}/`;
    const conversation = "a:1personal-pairing";
    const send = async (text: string) => {
      const id = `1800${Date.now()}`;
      const message = {
        type: "message",
        id,
        channelId: "msteams",
        serviceUrl,
        text,
        from: { id: "29:1new", aadObjectId: UNBOUND_TEAMS_USER },
        recipient: { id: `28:${BOT_APP_ID}` },
        conversation: { id: conversation, conversationType: "personal", tenantId: TENANT },
        channelData: { tenant: { id: TENANT } },
      };
      const token = await botServiceToken(serviceUrl);
      const res = await post("messages", JSON.stringify(message), "application/json", {
        authorization: `Bearer ${token}`,
      });
      expect(res.status).toBe(200);
      const reply = await eventually(
        async () => connector.requests.find((r) => r.path === `/v3/conversations/${conversation}/activities/${id}`),
        60_000,
      );
      return String((JSON.parse(reply.body) as { text?: unknown }).text).replace(/\\(.)/g, "$1");
    };
    const challenge = await send("explore_catalog query=R-JOB-001");
    const code = /code[^:]*: ([A-Z0-9]{8}) /.exec(challenge)?.[1];
    expect(code).toMatch(/^[A-Z0-9]{8}$/);
    expect(challenge).not.toContain("explore_catalog: ok");

    const approver = await mintToken(stack, "Approver");
    const pairing = (body: Record<string, unknown>) =>
      post("channels/pairing", JSON.stringify(body), "application/json", { authorization: `Bearer ${approver}` });
    const wrong = await pairing({
      channel: "platform_a",
      sender_id: UNBOUND_TEAMS_USER,
      code: code === "AAAAAAAA" ? "BBBBBBBB" : "AAAAAAAA",
      principal_oid: PAIRED,
    });
    expect(wrong.status).toBe(409);
    const res = await pairing({ channel: "platform_a", sender_id: UNBOUND_TEAMS_USER, code, principal_oid: PAIRED });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      channel: "platform_a",
      vendor_user_id: UNBOUND_TEAMS_USER,
      principal_oid: PAIRED,
    });

    expect(await send("explore_catalog query=R-JOB-001")).toContain("explore_catalog: ok");
  }, 180_000);
});

describe("inbound generic webhook route on the local stack (POST /api/channels/webhooks/{source})", () => {
  it("C-362 C-445 a signed delivery is recorded as a shadow event (202); unsigned is 401, an unknown source 404, in the envelope", async () => {
    const body = JSON.stringify({ alert: { name: "disk" }, incident: { id: "INC-9" } });
    const at = new Date();
    const id = `msg_route_${at.getTime()}`;
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": new Webhook(WEBHOOK_SECRET).sign(id, at, body),
    };
    const res = await post("channels/webhooks/monitor", body, "application/json", headers);
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ event_type: "monitor.alert_fired", target_agent: "ops", mode: "shadow" });
    const unsigned = await post("channels/webhooks/monitor", body, "application/json");
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toEqual({ detail: expect.any(String), request_id: expect.any(String) });
    const unknown = await post("channels/webhooks/nosuch", body, "application/json", headers);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ detail: expect.any(String), request_id: expect.any(String) });
  });
});
