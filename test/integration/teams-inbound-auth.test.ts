import { generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HttpResult } from "../../shared/http/envelope.js";
import { mapErrorToResult } from "../../shared/http/envelope.js";
import type { HttpRequestLike } from "../../shared/http/validation.js";
import { createLogger } from "../../shared/logging/logger.js";
import { createBotServiceKeySet } from "../../shared/channels/platform-a/bot-service-keys.js";
import type { TeamsInboundConfig } from "../../shared/channels/platform-a/teams-config.js";
import { createTeamsMessagesHandler } from "../../shared/channels/platform-a/teams-messages.js";
import { createTeamsVerifier, type VerifiedTeamsActivity } from "../../shared/channels/platform-a/teams-verifier.js";
import { buildInboundChannels } from "../../shared/channels/build-channels.js";
import { loadChannelConfig } from "../../shared/channels/channel-config.js";
import {
  BOT_CONNECTOR_SCOPE,
  buildAdaptiveCard,
  createPlatformAChannel,
} from "../../shared/notify/channels/platform-a.js";
import { createTeamsConversationStore } from "../../shared/notify/channels/teams-conversations.js";
import { createJwtValidator } from "../../shared/auth/jwt-validator.js";
import type { TurnCoordinator } from "../../shared/channels/inbound/pipeline.js";
import { consoleHarness, turnGate } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";
import { routeEntraTo, startBotConnectorFake, startBotServiceIssuer, startEntraFake } from "../support/teams-fakes.js";
import { testCertificate } from "../support/test-certificate.js";

const BOT_APP_ID = "0d1e2f3a-1111-4222-8333-944455566677";
const TENANT = "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
const GUEST_TENANT = "99999999-aaaa-4bbb-8ccc-dddddddddddd";
const TEAMS_USER = "aaaaaaaa-1111-4111-8111-111111111111";
const PRINCIPAL = "5a6b7c8d-0000-4000-8000-0000000000a1";
const SERVICE_URL = "https://smba.trafficmanager.net/amer/";
/** The API's Application ID URI: the resource of the Teams SSO token. */
const API_AUDIENCE = "api://4b5c6d7e-2222-4333-8444-555566667777";
const REQUESTER = "6b7c8d9e-0000-4000-8000-0000000000b2";
const GUEST_USER = "bbbbbbbb-2222-4222-8222-222222222222";
const GUEST_PRINCIPAL = "7c8d9e0f-0000-4000-8000-0000000000c3";
/** A principal an unbound Teams sender is paired with (pairing mode), and the approver who pairs it. */
const PAIRED_PRINCIPAL = "8d9e0f1a-0000-4000-8000-0000000000d4";
const PAIRING_APPROVER = {
  oid: "9e0f1a2b-0000-4000-8000-0000000000e5",
  name: "Ann Approver",
  role: "Approver" as const,
};
/** A Teams user whose binding names its own identity: the one that decides A1 through SSO. */
const SSO_USER = "cccccccc-3333-4333-8333-333333333333";
/** A Teams user bound to an Owner: a token-less (Playground) activity must never act as it. */
const OWNER_USER = "edededed-8888-4888-8888-888888888888";
const OWNER_PRINCIPAL = "0a1b2c3d-0000-4000-8000-0000000000f6";

let issuer: Awaited<ReturnType<typeof startBotServiceIssuer>>;
let tls: { key: string; cert: string };

beforeAll(async () => {
  tls = testCertificate();
  issuer = await startBotServiceIssuer(tls);
});
afterAll(async () => {
  await issuer?.close();
});

function world(overrides: Partial<TeamsInboundConfig> = {}) {
  const config: TeamsInboundConfig = {
    botAppId: BOT_APP_ID,
    tenantId: TENANT,
    guestTenantIds: [GUEST_TENANT],
    metadataUrl: issuer.metadataUrl,
    issuer: issuer.issuer,
    // Bound in upper case with braces: compared like every object id (sameObjectId).
    bindings: new Map([[TEAMS_USER, PRINCIPAL]]),
    senderAccess: "allowlist",
    ...overrides,
  };
  const keys = createBotServiceKeySet({ metadataUrl: config.metadataUrl, ca: tls.cert });
  const verifier = createTeamsVerifier(config, { keys });
  const accepted: VerifiedTeamsActivity[] = [];
  const handle = createTeamsMessagesHandler({
    verifier,
    accept: async (verified) => {
      accepted.push(verified);
      return undefined;
    },
  });
  const logger = createLogger({ level: "error", write: () => undefined });
  const post = async (body: string, authorization?: string): Promise<HttpResult> => {
    const request: HttpRequestLike = {
      method: "POST",
      url: "http://127.0.0.1/api/messages",
      headers: new Headers({
        "content-type": "application/json",
        ...(authorization ? { authorization } : {}),
      }),
      query: new URLSearchParams(),
      params: {},
      text: async () => body,
    };
    try {
      return await handle(request);
    } catch (error) {
      return mapErrorToResult(error, "req-1", logger);
    }
  };
  return { keys, verifier, accepted, post };
}

const activity = (overrides: Record<string, unknown> = {}) => ({
  type: "message",
  id: "1700000000000",
  channelId: "msteams",
  serviceUrl: SERVICE_URL,
  from: { id: "29:1abc", name: "Ops Person", aadObjectId: TEAMS_USER.toUpperCase() },
  recipient: { id: `28:${BOT_APP_ID}`, name: "blastplane" },
  conversation: { id: "a:1personal", conversationType: "personal", tenantId: TENANT },
  channelData: { tenant: { id: TENANT } },
  text: "what is the queue depth?",
  ...overrides,
});

const token = (
  options: Parameters<typeof issuer.token>[1] & { claims?: Record<string, unknown> } = { audience: BOT_APP_ID },
) => issuer.token(options.claims ?? {}, { serviceUrl: SERVICE_URL, ...options });

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");

describe("chat platform A inbound: the Bot Service token (spec §5 item 7, §7 item 2)", () => {
  it("C-002 C-392 a valid RS256 token and a bound sender of the home tenant are accepted as the canonical principal", async () => {
    const w = world();
    const res = await w.post(JSON.stringify(activity()), `Bearer ${await token()}`);
    expect(res.status).toBe(202);
    expect(w.accepted).toHaveLength(1);
    expect(w.accepted[0]).toMatchObject({
      principal: PRINCIPAL,
      trust: "same_tenant",
      categories: ["A1", "A2", "A3", "A4"],
      tenantId: TENANT,
      identity: { serviceUrl: SERVICE_URL, audience: BOT_APP_ID },
    });
  });

  it("C-381 C-390 C-391 forged, HS256, alg:none and unknown-kid tokens are 401 and never accepted; the key set is fetched once", async () => {
    const w = world();
    const { privateKey: otherKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ serviceurl: SERVICE_URL })
      .setProtectedHeader({ alg: "RS256", kid: "bs-key-1" })
      .setIssuer(issuer.issuer)
      .setAudience(BOT_APP_ID)
      .setExpirationTime("1h")
      .sign(otherKey);
    // HS256 keyed with the issuer's public key (the classic algorithm-confusion forgery).
    const publicJwk = JSON.stringify({ kty: "RSA", n: issuer.jwk.n, e: issuer.jwk.e });
    const hs256 = await new SignJWT({ serviceurl: SERVICE_URL })
      .setProtectedHeader({ alg: "HS256", kid: "bs-key-1" })
      .setIssuer(issuer.issuer)
      .setAudience(BOT_APP_ID)
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode(publicJwk));
    const none = `${b64({ alg: "none", kid: "bs-key-1" })}.${b64({
      iss: issuer.issuer,
      aud: BOT_APP_ID,
      serviceurl: SERVICE_URL,
      exp: Math.floor(Date.now() / 1000) + 3600,
    })}.`;
    const unknownKid = await token({ audience: BOT_APP_ID, kid: "not-in-the-set" });
    const valid = await token();
    const tampered = `${valid.split(".")[0]}.${b64({ iss: issuer.issuer, aud: BOT_APP_ID, serviceurl: SERVICE_URL, exp: 4102444800 })}.${valid.split(".")[2]}`;
    for (const [name, t] of Object.entries({ forged, hs256, none, unknownKid, tampered })) {
      const res = await w.post(JSON.stringify(activity()), `Bearer ${t}`);
      expect(res.status, name).toBe(401);
      expect(res.jsonBody, name).toMatchObject({ request_id: "req-1" });
    }
    for (const auth of [undefined, "Basic abc", "Bearer", `Bearer ${valid} extra`]) {
      expect((await w.post(JSON.stringify(activity()), auth)).status, String(auth)).toBe(401);
    }
    expect(w.accepted).toHaveLength(0);
    // Twenty more valid requests: the cached key set is not fetched again, and the unknown kid
    // above triggered at most one early refresh.
    for (let i = 0; i < 20; i++) await w.post(JSON.stringify(activity()), `Bearer ${await token()}`);
    expect(w.accepted).toHaveLength(20);
    expect(w.keys.fetches()).toBe(1);
  });

  it("C-382 C-257 C-383 C-384 C-385 wrong audience (also Bot Framework's own, which the Agents SDK accepts), wrong issuer, expired, not yet valid, no service URL: 401", async () => {
    const w = world();
    const cases = {
      otherAudience: await token({ audience: "11111111-2222-4333-8444-555555555555" }),
      botFrameworkAudience: await token({ audience: "https://api.botframework.com" }),
      otherIssuer: await token({
        audience: BOT_APP_ID,
        issuer: "https://sts.windows.net/d6d49420-f39b-4df7-a1dc-d59a935871db/",
      }),
      expired: await token({ audience: BOT_APP_ID, expiresIn: "-10m" }),
      notYetValid: await token({ audience: BOT_APP_ID, notBefore: "10m" }),
      noServiceUrl: await issuer.token({}, { audience: BOT_APP_ID }),
      plainHttpServiceUrl: await issuer.token({}, { audience: BOT_APP_ID, serviceUrl: "http://smba.example/amer/" }),
    };
    for (const [name, t] of Object.entries(cases)) {
      const res = await w.post(JSON.stringify(activity()), `Bearer ${t}`);
      expect(res.status, name).toBe(401);
    }
    expect(w.accepted).toHaveLength(0);
  });

  it("C-380 the token is checked before the body is parsed: a bad token with malformed JSON is 401, not a parse error", async () => {
    const w = world();
    const res = await w.post("{not json", "Bearer a.b.c");
    expect(res.status).toBe(401);
    expect((await w.post("{not json", `Bearer ${await token()}`)).status).toBe(400);
  });
});

describe("chat platform A inbound: the activity against the verified identity", () => {
  it("C-386 C-387 an activity whose serviceUrl differs from the token's claim, or whose channel is not msteams, is 401", async () => {
    const w = world();
    const t = await token();
    const wrongUrl = await w.post(
      JSON.stringify(activity({ serviceUrl: "https://evil.example/amer/" })),
      `Bearer ${t}`,
    );
    expect(wrongUrl.status).toBe(401);
    const wrongChannel = await w.post(JSON.stringify(activity({ channelId: "slack" })), `Bearer ${t}`);
    expect(wrongChannel.status).toBe(401);
    // A trailing slash or the host's case is the same service URL.
    const same = await w.post(
      JSON.stringify(activity({ serviceUrl: "https://SMBA.trafficmanager.net/amer" })),
      `Bearer ${t}`,
    );
    expect(same.status).toBe(202);
  });

  it("C-258 C-388 C-389 C-391 another tenant, a missing tenant, an unbound sender and a sender without aadObjectId are 403 and never accepted", async () => {
    const w = world();
    const t = await token();
    const other = "12121212-3434-4565-8787-909090909090";
    for (const [name, a] of Object.entries({
      otherTenant: activity({ conversation: { id: "a:1", tenantId: other }, channelData: { tenant: { id: other } } }),
      conflictingTenants: activity({ channelData: { tenant: { id: other } } }),
      noTenant: activity({ conversation: { id: "a:1" }, channelData: {} }),
      unbound: activity({ from: { id: "29:2", aadObjectId: "bbbbbbbb-2222-4222-8222-222222222222" } }),
      noAadObjectId: activity({ from: { id: "29:2" } }),
    })) {
      const res = await w.post(JSON.stringify(a), `Bearer ${t}`);
      expect(res.status, name).toBe(403);
    }
    expect(w.accepted).toHaveLength(0);
  });

  it("C-394 C-395 C-396 SVC_PLATFORM_A_SENDER_ACCESS: disabled refuses even a bound sender (403); pairing lets an unbound sender of an accepted tenant on without a principal (sender access challenges it), still refusing other tenants and senders without an object id", async () => {
    const t = await token();
    const unboundSender = { from: { id: "29:2", aadObjectId: "bbbbbbbb-2222-4222-8222-222222222222" } };
    const disabled = world({ senderAccess: "disabled" });
    expect((await disabled.post(JSON.stringify(activity()), `Bearer ${t}`)).status).toBe(403);
    expect(disabled.accepted).toHaveLength(0);

    const pairing = world({ senderAccess: "pairing", bindings: new Map() });
    expect((await pairing.post(JSON.stringify(activity(unboundSender)), `Bearer ${t}`)).status).toBe(202);
    expect(pairing.accepted).toHaveLength(1);
    expect(pairing.accepted[0]).toMatchObject({ principal: undefined, trust: "same_tenant" });
    const other = "12121212-3434-4565-8787-909090909090";
    for (const a of [
      activity({
        ...unboundSender,
        conversation: { id: "a:1", tenantId: other },
        channelData: { tenant: { id: other } },
      }),
      activity({ from: { id: "29:2" } }),
    ])
      expect((await pairing.post(JSON.stringify(a), `Bearer ${t}`)).status).toBe(403);
    expect(pairing.accepted).toHaveLength(1);
    // With pairing, a bound sender still resolves to its binding.
    const bound = world({ senderAccess: "pairing" });
    expect((await bound.post(JSON.stringify(activity()), `Bearer ${t}`)).status).toBe(202);
    expect(bound.accepted[0]?.principal).toBe(PRINCIPAL);
  });

  it("C-353 C-354 C-355 a bound sender of a configured guest tenant is accepted for A2–A4 only", async () => {
    const w = world();
    const res = await w.post(
      JSON.stringify(
        activity({
          conversation: { id: "a:1", tenantId: GUEST_TENANT },
          channelData: { tenant: { id: GUEST_TENANT } },
        }),
      ),
      `Bearer ${await token()}`,
    );
    expect(res.status).toBe(202);
    expect(w.accepted[0]).toMatchObject({ trust: "guest", categories: ["A2", "A3", "A4"], principal: PRINCIPAL });
  });

  it("oversized (1 MB) and deeply nested bodies, and fields past their bounds, are refused before acceptance (413, 422)", async () => {
    const w = world();
    const t = await token();
    const big = await w.post(JSON.stringify(activity({ text: "x".repeat(1024 * 1024) })), `Bearer ${t}`);
    expect(big.status).toBe(413);
    const nested = `${"[".repeat(10_000)}1${"]".repeat(10_000)}`;
    const deep = await w.post(JSON.stringify(activity()).replace(/}$/, `,"value":${nested}}`), `Bearer ${t}`);
    expect(deep.status).toBe(422);
    const longText = await w.post(JSON.stringify(activity({ text: "x".repeat(30_000) })), `Bearer ${t}`);
    expect(longText.status).toBe(422);
    const noConversation = await w.post(JSON.stringify(activity({ conversation: undefined })), `Bearer ${t}`);
    expect(noConversation.status).toBe(422);
    expect(w.accepted).toHaveLength(0);
  });
});

/**
 * `POST /api/messages` end to end below the Functions trigger: a Bot Service token from the local
 * issuer → the verifier → the channel queue (real Azurite) → sender access → the real coordinator →
 * the reply through the Microsoft 365 Agents SDK (its app token from a local Entra, routed like a
 * hosts-file entry) to a local Bot Connector.
 */
describe("chat platform A inbound end to end (POST /api/messages below the trigger)", () => {
  const azurite = azuriteTables("tmsin");
  const CLIENT_SECRET = "local-bot-client-secret";
  let entra: Awaited<ReturnType<typeof startEntraFake>>;
  let connector: Awaited<ReturnType<typeof startBotConnectorFake>>;
  let restoreFetch: () => void;

  beforeAll(async () => {
    entra = await startEntraFake({ tenantId: TENANT, clientId: BOT_APP_ID, clientSecret: CLIENT_SECRET });
    connector = await startBotConnectorFake((t) => entra.verify(t, BOT_CONNECTOR_SCOPE));
    restoreFetch = routeEntraTo(entra.url);
  });
  afterAll(async () => {
    restoreFetch?.();
    await connector?.close();
    await entra?.close();
  });

  function e2e(
    options: {
      sso?: boolean;
      discoveryUrl?: string;
      pairing?: boolean;
      pendingLimit?: number;
      /** `SVC_PLATFORM_A_LOCAL_ANONYMOUS` with the Playground's connector port (and its one local user, TEAMS_USER). */
      anonymous?: { port: number };
      progressStartAfterMs?: number;
      /** Wraps the harness's coordinator (e.g. `turnGate().wrap`). */
      coordinator?: (inner: ReturnType<typeof consoleHarness>["coordinator"]) => TurnCoordinator;
    } = {},
  ) {
    const tables = azurite.tables();
    const h = consoleHarness(tables, { approvers: [PRINCIPAL, REQUESTER, SSO_USER] });
    const config = loadChannelConfig(
      {
        SVC_PLATFORM_A_CHANNEL_ENABLED: "true",
        SVC_PLATFORM_A_BOT_APP_ID: BOT_APP_ID,
        SVC_PLATFORM_A_TENANT_ID: TENANT,
        SVC_PLATFORM_A_CLIENT_SECRET_REF: "env:TEAMS_SECRET",
        SVC_PLATFORM_A_OPENID_METADATA_URL: issuer.metadataUrl,
        SVC_PLATFORM_A_GUEST_TENANT_IDS: GUEST_TENANT,
        SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: JSON.stringify({
          [TEAMS_USER.toUpperCase()]: PRINCIPAL,
          [GUEST_USER]: GUEST_PRINCIPAL,
          [SSO_USER]: SSO_USER,
          [OWNER_USER]: OWNER_PRINCIPAL,
        }),
        SVC_CHANNEL_PRINCIPAL_ROLES_JSON: JSON.stringify({
          [PRINCIPAL]: { name: "Tess Teams", roles: ["Reader"] },
          [PAIRED_PRINCIPAL]: { name: "Pat Paired", roles: ["Reader"] },
          [OWNER_PRINCIPAL]: { name: "Olga Owner", roles: ["Owner"] },
        }),
        ...(options.sso ? { SVC_PLATFORM_A_SSO_CONNECTION_NAME: "blastplane-sso" } : {}),
        ...(options.pairing ? { SVC_PLATFORM_A_SENDER_ACCESS: "pairing" } : {}),
        ...(options.anonymous
          ? {
              SVC_PLATFORM_A_LOCAL_ANONYMOUS: "true",
              SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: TEAMS_USER,
              SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: String(options.anonymous.port),
            }
          : {}),
        ...(options.pendingLimit ? { SVC_CHANNEL_PAIRING_PENDING_LIMIT: String(options.pendingLimit) } : {}),
      },
      { local: true },
    );
    const channels = buildInboundChannels(config, {
      tables,
      audit: h.audit,
      coordinator: options.coordinator ? options.coordinator(h.coordinator) : h.coordinator,
      resolve: async (ref) => (ref === "env:TEAMS_SECRET" ? CLIENT_SECRET : ""),
      local: true,
      botServiceCa: tls.cert,
      ...(options.progressStartAfterMs !== undefined ? { progressStartAfterMs: options.progressStartAfterMs } : {}),
      teamsSso: {
        // The dashboard's validator, as the Functions app builds it: the tenant's discovery, the API audience.
        validator: createJwtValidator({
          discoveryUrl: options.discoveryUrl ?? entra.discoveryUrl,
          audience: API_AUDIENCE,
        }),
        approvals: h.approvals,
        apiResource: API_AUDIENCE,
      },
    });
    if (!channels.teams) throw new Error("teams not configured");
    const teams = channels.teams;
    const logger = createLogger({ level: "error", write: () => undefined });
    /** The route's answer, by default once the turn it admitted has run too (`{ turn: false }`: the answer alone). */
    const post = async (
      body: unknown,
      authorization?: string,
      headers: Record<string, string> = {},
      { turn = true }: { turn?: boolean } = {},
    ): Promise<HttpResult> => {
      const text = typeof body === "string" ? body : JSON.stringify(body);
      const request: HttpRequestLike = {
        method: "POST",
        url: "http://127.0.0.1/api/messages",
        headers: new Headers({
          "content-type": "application/json",
          ...(authorization ? { authorization } : {}),
          ...headers,
        }),
        query: new URLSearchParams(),
        params: {},
        text: async () => text,
      };
      try {
        const answer = await teams.handle(request);
        // The turn the request admitted runs after the answer (as on the host): its reply, then the assertions.
        if (turn) await channels.background.idle();
        return answer;
      } catch (error) {
        return mapErrorToResult(error, "req-e2e", logger);
      }
    };
    return { h, channels, tables, post, conversations: createTeamsConversationStore(tables) };
  }

  let counter = 0;
  const message = (overrides: Record<string, unknown> = {}) =>
    activity({ id: `17000000${++counter}`, serviceUrl: `${connector.url}/`, ...overrides });
  const connectorToken = (options: Partial<Parameters<typeof issuer.token>[1]> = {}) =>
    issuer.token({}, { audience: BOT_APP_ID, serviceUrl: `${connector.url}/`, ...options });

  it("C-002 C-392 C-504 a signed activity reaches the coordinator as the bound principal, the reply goes through the Agents SDK to Bot Connector, and the conversation reference is kept for notifications", async () => {
    const w = e2e();
    const from = connector.requests.length;
    const a = message({ text: "<at>blastplane</at> explore_catalog query=job.failed" });
    const res = await w.post(a, `Bearer ${await connectorToken()}`);
    expect(res.status).toBe(200);
    const posted = connector.requests.slice(from);
    expect(posted).toHaveLength(1);
    // A reply to the inbound activity, in its conversation, as the bot, with Entra's app token.
    expect(posted[0]?.path).toBe(`/v3/conversations/a:1personal/activities/${a.id}`);
    const reply = JSON.parse(posted[0]?.body ?? "{}") as Record<string, unknown>;
    expect(reply).toMatchObject({ type: "message", replyToId: a.id, from: { id: `28:${BOT_APP_ID}` } });
    // Markdown in the reply is escaped (Teams renders markdown); unescaped, it names the tool that ran.
    expect(String(reply.text).replace(/\\(.)/g, "$1")).toContain("explore_catalog: ok");
    expect(entra.issued).toContain(`${BOT_CONNECTOR_SCOPE}/.default`);
    // The coordinator saw the canonical principal, not the Teams user id.
    const calls = await w.h.audit.list({ action: "console.tool_call" });
    expect(calls[0]?.actor).toMatchObject({ oid: PRINCIPAL, name: "Tess Teams" });
    expect(await w.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) })).toBe("done");
    // The outbound Teams notifier finds this principal's personal conversation.
    expect(await w.conversations.get(PRINCIPAL.toUpperCase())).toEqual({
      serviceUrl: `${connector.url}/`,
      conversationId: "a:1personal",
      tenantId: TENANT,
      userId: "29:1abc",
    });
  });

  it("C-504 an activity is answered as soon as its turn is queued (Bot Service waits at most 15 s): the turn runs after the answer and its reply reaches Bot Connector", async () => {
    const held = turnGate();
    const w = e2e({ coordinator: held.wrap });
    const from = connector.requests.length;
    const a = message({ text: "explore_catalog query=job.failed" });
    const turn = { channel: "platform_a" as const, turn_id: String(a.id) };
    const res = await w.post(a, `Bearer ${await connectorToken()}`, {}, { turn: false });
    expect(res).toMatchObject({ status: 200 });
    expect(["queued", "processing"]).toContain(await w.channels.queue.stateOf(turn));
    await held.started;
    expect(w.channels.background.running).toBe(1);
    expect(connector.requests.length).toBe(from);
    held.release();
    await w.channels.background.idle();
    const posted = connector.requests.slice(from);
    expect(posted).toHaveLength(1);
    expect(posted[0]?.path).toBe(`/v3/conversations/a:1personal/activities/${a.id}`);
    expect(String((JSON.parse(posted[0]?.body ?? "{}") as { text?: string }).text).replace(/\\(.)/g, "$1")).toContain(
      "explore_catalog: ok",
    );
    expect(await w.channels.queue.stateOf(turn)).toBe("done");
  });

  it("C-205 C-206 C-297 a long turn's progress is a reply activity that the Agents SDK's updateActivity edits in place, and the final reply replaces it", async () => {
    // Progress from the first activity on (the default waits 5 s before a turn counts as long).
    const w = e2e({ progressStartAfterMs: 0 });
    const from = connector.requests.length;
    const a = message({ text: "explore_catalog query=job.failed" });
    expect((await w.post(a, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const exchanged = connector.requests.slice(from);
    expect(exchanged.map((r) => r.method)).toEqual(["POST", "PUT"]);
    // Revision 0: a reply to the inbound activity, a cumulative snapshot of the activities so far.
    expect(exchanged[0]?.path).toBe(`/v3/conversations/a:1personal/activities/${a.id}`);
    const progress = JSON.parse(exchanged[0]?.body ?? "{}") as Record<string, unknown>;
    expect(String(progress.text).replace(/\\(.)/g, "$1")).toMatch(
      /Working on it… 1 step\(s\) so far\.\nquery explore_catalog: ok/,
    );
    // The final reply updates that activity (its id from Bot Connector's 201), with Entra's app token.
    const [update] = connector.updates().slice(-1);
    expect(update?.conversation).toBe("a:1personal");
    expect(update?.activityId).toMatch(/^1:a:1personal-\d+$/);
    expect(update?.activity).toMatchObject({ type: "message", id: update?.activityId });
    expect(String(update?.activity.text).replace(/\\(.)/g, "$1")).toContain("explore_catalog: ok");
    expect(String(update?.activity.text)).not.toContain("Working on it");
    expect(exchanged[1]?.headers.authorization).toMatch(/^Bearer /);
    expect(await w.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) })).toBe("done");
  });

  it("a failed progress update never loses the final reply: Bot Connector refuses the update and the reply is posted as a new activity", async () => {
    const w = e2e({ progressStartAfterMs: 0 });
    const from = connector.requests.length;
    // Revision 0 is created; the final update is refused (the activity was deleted meanwhile).
    connector.script.push("ok", {
      status: 404,
      body: JSON.stringify({ error: { code: "ActivityNotFoundInConversation", message: "Activity not found" } }),
    });
    const a = message({ text: "explore_catalog query=job.failed" });
    expect((await w.post(a, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const exchanged = connector.requests.slice(from);
    expect(exchanged.map((r) => r.method)).toEqual(["POST", "PUT", "POST"]);
    const final = JSON.parse(exchanged[2]?.body ?? "{}") as Record<string, unknown>;
    expect(final).toMatchObject({ type: "message", replyToId: a.id });
    expect(String(final.text).replace(/\\(.)/g, "$1")).toContain("explore_catalog: ok");
    expect(await w.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) })).toBe("done");
  });

  it("a Bot Service retry of the same activity is answered once; a channel conversation leaves no notification reference", async () => {
    const w = e2e();
    const from = connector.requests.length;
    const a = message({
      text: "explore_catalog query=job.failed",
      conversation: { id: "19:ops@thread.tacv2", conversationType: "channel", tenantId: TENANT },
    });
    expect((await w.post(a, `Bearer ${await connectorToken()}`)).status).toBe(200);
    expect((await w.post(a, `Bearer ${await connectorToken()}`)).status).toBe(200);
    expect(connector.requests.slice(from)).toHaveLength(1);
    expect(await w.conversations.get(PRINCIPAL)).toBeUndefined();
  });

  it("C-390 C-391 C-386 C-387 C-388 forged, expired and wrong-audience tokens, a foreign serviceUrl or channelId and an unknown tenant are refused in the error envelope; nothing is queued, answered or remembered", async () => {
    const w = e2e();
    const from = connector.requests.length;
    const { privateKey: otherKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ serviceurl: `${connector.url}/` })
      .setProtectedHeader({ alg: "RS256", kid: "bs-key-1" })
      .setIssuer(issuer.issuer)
      .setAudience(BOT_APP_ID)
      .setExpirationTime("1h")
      .sign(otherKey);
    const other = "12121212-3434-4565-8787-909090909090";
    const cases: [string, Record<string, unknown>, string, number][] = [
      ["forged", message(), forged, 401],
      ["expired", message(), await connectorToken({ expiresIn: "-10m" }), 401],
      ["wrongAudience", message(), await connectorToken({ audience: "11111111-2222-4333-8444-555555555555" }), 401],
      ["wrongServiceUrl", message({ serviceUrl: "https://evil.example/" }), await connectorToken(), 401],
      ["wrongChannel", message({ channelId: "webchat" }), await connectorToken(), 401],
      [
        "unknownTenant",
        message({ conversation: { id: "a:1", tenantId: other }, channelData: { tenant: { id: other } } }),
        await connectorToken(),
        403,
      ],
    ];
    for (const [name, a, t, status] of cases) {
      const res = await w.post(a, `Bearer ${t}`);
      expect(res.status, name).toBe(status);
      expect(res.jsonBody, name).toEqual({ detail: expect.any(String), request_id: "req-e2e" });
      expect(await w.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) }), name).toBeUndefined();
    }
    expect(await w.channels.queue.depth()).toBe(0);
    expect(connector.requests.slice(from)).toHaveLength(0);
    expect(await w.conversations.get(PRINCIPAL)).toBeUndefined();
    expect(await w.h.audit.list({ action: "console.tool_call" })).toHaveLength(0);
  });
  /** The pairing reply's one-time code (Teams markdown escaping undone). */
  const codeIn = (text: unknown) => /code[^:]*: ([A-Z0-9]{8}) /.exec(String(text).replace(/\\(.)/g, "$1"))?.[1];
  const pendingChallenges = async (w: ReturnType<typeof e2e>) => {
    const rows: Record<string, unknown>[] = [];
    for await (const row of w.tables("channelsenders").listEntities({
      queryOptions: { filter: "PartitionKey eq 'pend_platform_a'" },
    }))
      rows.push(row);
    return rows;
  };
  const unboundMessage = (user: string, conversation: string, overrides: Record<string, unknown> = {}) =>
    message({
      from: { id: `29:${conversation}`, name: "New Person", aadObjectId: user },
      conversation: { id: conversation, conversationType: "personal", tenantId: TENANT },
      ...overrides,
    });

  it("C-396 C-397 C-291 C-292 C-393 §5 item 8 pairing over Teams: an unbound sender's challenge goes back through the Agents SDK to Bot Connector; once an approver pairs it, its next message reaches the coordinator as the mapped principal; C-002 its personal conversation is kept and a notification for that principal reaches it in Teams", async () => {
    const w = e2e({ pairing: true });
    const user = "dddddddd-4444-4444-8444-444444444444";
    const from = connector.requests.length;
    const first = unboundMessage(user, "a:1personal-pair", { text: "explore_catalog query=job.failed" });
    expect((await w.post(first, `Bearer ${await connectorToken()}`)).status).toBe(200);
    // The challenge: a reply to the sender's activity, through Bot Connector, with the one-time code.
    const challenge = connector.requests.slice(from);
    expect(challenge.map((r) => r.path)).toEqual([`/v3/conversations/a:1personal-pair/activities/${first.id}`]);
    const code = codeIn((JSON.parse(challenge[0]?.body ?? "{}") as { text?: unknown }).text);
    expect(code).toMatch(/^[A-Z0-9]{8}$/);
    // C-398: only its digest is kept; C-396: the unbound sender reached no tool and left no notification address.
    expect(JSON.stringify(await pendingChallenges(w))).not.toContain(String(code));
    expect(await w.h.audit.list({ action: "console.tool_call" })).toHaveLength(0);
    expect(await w.conversations.get(PAIRED_PRINCIPAL)).toBeUndefined();

    // The approver pairs the sender (what POST /api/channels/pairing calls) with an existing principal.
    const paired = await w.channels.senders.approvePairing({
      channel: "platform_a",
      vendorUserId: user,
      code: String(code),
      principalOid: PAIRED_PRINCIPAL,
      approver: PAIRING_APPROVER,
      requestId: "req-pair",
      now: new Date(),
    });
    expect(paired).toEqual({ channel: "platform_a", vendor_user_id: user, principal_oid: PAIRED_PRINCIPAL });
    expect(await pendingChallenges(w)).toHaveLength(0);

    const next = unboundMessage(user, "a:1personal-pair", { text: "explore_catalog query=job.failed" });
    expect((await w.post(next, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const answer = connector.requests.find(
      (r) => r.path === `/v3/conversations/a:1personal-pair/activities/${next.id}`,
    );
    expect(String((JSON.parse(answer?.body ?? "{}") as { text?: unknown }).text).replace(/\\(.)/g, "$1")).toContain(
      "explore_catalog: ok",
    );
    // The coordinator saw the mapped principal (its roles from the directory, none from the pairing).
    const calls = await w.h.audit.list({ action: "console.tool_call" });
    expect(calls.map((c) => c.actor)).toEqual([expect.objectContaining({ oid: PAIRED_PRINCIPAL, name: "Pat Paired" })]);

    // §5 items 8–9 and the outbound channel: the paired sender's personal conversation is kept for its principal...
    const reference = {
      serviceUrl: `${connector.url}/`,
      conversationId: "a:1personal-pair",
      tenantId: TENANT,
      userId: "29:a:1personal-pair",
    };
    expect(await w.conversations.get(PAIRED_PRINCIPAL.toUpperCase())).toEqual(reference);
    // ...so a notification addressed to that principal reaches them in Teams (the outbound Teams channel).
    const teams = createPlatformAChannel({
      botAppId: BOT_APP_ID,
      tenantId: TENANT,
      clientSecret: CLIENT_SECRET,
      conversations: w.conversations,
    });
    const before = connector.requests.length;
    const outcome = await teams.send(
      {
        category: "A2",
        template_key: "ops.alert",
        recipient: PAIRED_PRINCIPAL,
        title: "Queue saturated",
        body_markdown: "The BLAST queue has been saturated for 10 minutes.",
        correlation_id: "corr-paired",
        idempotency_key: "ops.alert/paired",
        locale: "en",
      },
      { signal: new AbortController().signal, attempt: 1, messageId: "m-paired" },
    );
    expect(outcome).toMatchObject({ outcome: "acknowledged" });
    const notified = connector.requests.slice(before);
    expect(notified).toHaveLength(1);
    expect(notified[0]?.path).toMatch(/^\/v3\/conversations\/a:1personal-pair\/activities/);
    expect(notified[0]?.body).toContain("Queue saturated");
  });

  it("C-002 C-355 a paired sender never takes over the notification conversation of the principal's bound sender: a guest-tenant sender paired to the same principal writes after it, and the principal's notifications still go to the bound sender's conversation", async () => {
    const w = e2e({ pairing: true });
    const bound = message({ text: "explore_catalog query=job.failed" });
    expect((await w.post(bound, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const boundReference = {
      serviceUrl: `${connector.url}/`,
      conversationId: "a:1personal",
      tenantId: TENANT,
      userId: "29:1abc",
    };
    expect(await w.conversations.get(PRINCIPAL)).toEqual(boundReference);

    // A guest-tenant sender, unbound: its challenge, then an approver pairs it with the same principal.
    const guest = "12121212-9999-4999-8999-999999999999";
    const guestMessage = (text: string) =>
      unboundMessage(guest, "a:1personal-guest", {
        text,
        conversation: { id: "a:1personal-guest", conversationType: "personal", tenantId: GUEST_TENANT },
        channelData: { tenant: { id: GUEST_TENANT } },
      });
    const first = guestMessage("hello");
    expect((await w.post(first, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const challenge = connector.requests.find(
      (r) => r.path === `/v3/conversations/a:1personal-guest/activities/${first.id}`,
    );
    const code = codeIn((JSON.parse(challenge?.body ?? "{}") as { text?: unknown }).text);
    await w.channels.senders.approvePairing({
      channel: "platform_a",
      vendorUserId: guest,
      code: String(code),
      principalOid: PRINCIPAL,
      approver: PAIRING_APPROVER,
      requestId: "req-pair-guest",
      now: new Date(),
    });
    // The paired guest now writes (and is answered as the principal)...
    const next = guestMessage("explore_catalog query=job.failed");
    expect((await w.post(next, `Bearer ${await connectorToken()}`)).status).toBe(200);
    expect(connector.requests.some((r) => r.path === `/v3/conversations/a:1personal-guest/activities/${next.id}`)).toBe(
      true,
    );
    // ...but the principal's conversation for notifications stays the bound sender's.
    expect(await w.conversations.get(PRINCIPAL)).toEqual(boundReference);
    // The bound sender moving to a new personal conversation still moves it.
    const moved = message({ conversation: { id: "a:1personal-new", conversationType: "personal", tenantId: TENANT } });
    expect((await w.post(moved, `Bearer ${await connectorToken()}`)).status).toBe(200);
    expect(await w.conversations.get(PRINCIPAL)).toEqual({ ...boundReference, conversationId: "a:1personal-new" });
  });

  it("C-293 C-399 §3 pairing delivery failure: a challenge whose reply Bot Connector refuses is deleted with its digest, so the channel's one slot takes the next sender's challenge", async () => {
    const w = e2e({ pairing: true, pendingLimit: 1 });
    const from = connector.requests.length;
    connector.script.push({
      status: 403,
      body: JSON.stringify({
        error: { code: "BotNotInConversationRoster", message: "The bot is not part of the conversation roster." },
      }),
    });
    const lost = unboundMessage("eeeeeeee-5555-4555-8555-555555555555", "a:1personal-lost");
    expect((await w.post(lost, `Bearer ${await connectorToken()}`)).status).toBe(200);
    // The one attempt was refused: the sender never saw the code, so nothing of the challenge is left.
    expect(connector.requests.slice(from)).toHaveLength(1);
    expect(await pendingChallenges(w)).toHaveLength(0);
    // The slot is free: another sender gets a challenge, not "too many pairing requests".
    const other = unboundMessage("ffffffff-6666-4666-8666-666666666666", "a:1personal-other");
    expect((await w.post(other, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const reply = connector.requests.find(
      (r) => r.path === `/v3/conversations/a:1personal-other/activities/${other.id}`,
    );
    expect(codeIn((JSON.parse(reply?.body ?? "{}") as { text?: unknown }).text)).toMatch(/^[A-Z0-9]{8}$/);
    expect(await pendingChallenges(w)).toHaveLength(1);
    // With the slot taken, a third sender is told to wait (the bound, C-399).
    const third = unboundMessage("abababab-7777-4777-8777-777777777777", "a:1personal-third");
    expect((await w.post(third, `Bearer ${await connectorToken()}`)).status).toBe(200);
    const wait = connector.requests.find(
      (r) => r.path === `/v3/conversations/a:1personal-third/activities/${third.id}`,
    );
    expect(String((JSON.parse(wait?.body ?? "{}") as { text?: unknown }).text)).toContain("Too many pairing requests");
  });

  describe("SVC_PLATFORM_A_LOCAL_ANONYMOUS: the Microsoft 365 Agents Playground (no Bot Service token), local and loopback only", () => {
    let playground: Awaited<ReturnType<typeof startBotConnectorFake>>;
    beforeAll(async () => {
      // The Playground's own Bot Connector (`/_connector`) accepts replies without a token.
      playground = await startBotConnectorFake(async () => undefined, { anonymous: true });
    });
    afterAll(async () => {
      await playground?.close();
    });
    // What the local Functions host hands the app: the peer appended to X-Forwarded-For, the Host.
    const local = { "x-forwarded-for": "127.0.0.1", host: "127.0.0.1:7071" };
    const fromPlayground = (overrides: Record<string, unknown> = {}) =>
      message({ serviceUrl: `${playground.url}/_connector`, text: "explore_catalog query=job.failed", ...overrides });

    const port = () => ({ port: Number(new URL(playground.url).port) });

    it("C-390 §5 item 7 a token-less activity of the one local user (SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER) from this machine to the Playground's connector reaches the coordinator as that user's bound principal; its reply goes without an app token and its conversation is not kept", async () => {
      const w = e2e({ anonymous: port() });
      const a = fromPlayground();
      const res = await w.post(a, undefined, local);
      expect(res.status).toBe(200);
      const reply = playground.requests.find(
        (r) => r.path === `/_connector/v3/conversations/a:1personal/activities/${a.id}`,
      );
      expect(reply?.headers.authorization).toBeUndefined();
      expect(String((JSON.parse(reply?.body ?? "{}") as { text?: unknown }).text).replace(/\\(.)/g, "$1")).toContain(
        "explore_catalog: ok",
      );
      const calls = await w.h.audit.list({ action: "console.tool_call" });
      expect(calls.map((c) => c.actor.oid)).toEqual([PRINCIPAL]);
      expect(await w.conversations.get(PRINCIPAL)).toBeUndefined();
      // The tenant check stays: the local user in another tenant is refused.
      const foreign = await w.post(
        fromPlayground({
          conversation: {
            id: "a:1personal",
            conversationType: "personal",
            tenantId: "12345678-1234-4234-8234-123456789012",
          },
          channelData: { tenant: { id: "12345678-1234-4234-8234-123456789012" } },
        }),
        undefined,
        local,
      );
      expect(foreign.status).toBe(403);
    });

    it("C-390 C-391 C-395 a token-less activity cannot act as another principal: naming an Owner's bound Teams user, another bound user or an unbound user (also with pairing on, where it would get a challenge) is 401; nothing is queued, answered or run", async () => {
      const w = e2e({ anonymous: port() });
      const pairing = e2e({ anonymous: port(), pairing: true });
      const before = playground.requests.length + connector.requests.length;
      const cases: [string, ReturnType<typeof e2e>, Record<string, unknown>][] = [
        ["an Owner's bound user", w, { id: "29:owner", aadObjectId: OWNER_USER }],
        ["the Owner's user in another spelling", w, { id: "29:owner", aadObjectId: `{${OWNER_USER.toUpperCase()}}` }],
        ["another bound user", w, { id: "29:sso", aadObjectId: SSO_USER }],
        ["no object id", w, { id: "29:local-user" }],
        ["an unbound user, pairing on", pairing, { id: "29:new", aadObjectId: "12345678-1234-4234-8234-123456789012" }],
      ];
      for (const [name, world, from] of cases) {
        const a = fromPlayground({ from, text: "/svc kill-switch status" });
        const res = await world.post(a, undefined, local);
        expect(res.status, name).toBe(401);
        expect(res.jsonBody, name).toEqual({ detail: expect.any(String), request_id: "req-e2e" });
        expect(
          await world.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) }),
          name,
        ).toBeUndefined();
      }
      expect(playground.requests.length + connector.requests.length).toBe(before);
      expect(await w.h.audit.list({ action: "console.tool_call" })).toHaveLength(0);
      // The same Owner-bound user with a real Bot Service token is accepted: only the token-less door is narrowed.
      const signed = message({
        from: { id: "29:owner", aadObjectId: OWNER_USER },
        text: "explore_catalog query=job.failed",
      });
      expect((await w.post(signed, `Bearer ${await connectorToken()}`)).status).toBe(200);
      expect((await w.h.audit.list({ action: "console.tool_call" })).map((c) => c.actor.oid)).toEqual([
        OWNER_PRINCIPAL,
      ]);
    });

    it("C-390 C-391 the route refuses a token-less activity from another machine, with a non-loopback Host, or naming a Bot Connector elsewhere — another host, or another loopback port than SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT (401, nothing queued or answered); without the setting a token is always required", async () => {
      const w = e2e({ anonymous: port() });
      const before = playground.requests.length + connector.requests.length;
      const cases: [string, Record<string, unknown>, Record<string, string>][] = [
        ["remote caller", fromPlayground(), { ...local, "x-forwarded-for": "203.0.113.7" }],
        ["forged hop before the peer", fromPlayground(), { ...local, "x-forwarded-for": "127.0.0.1, 203.0.113.7" }],
        ["no caller address", fromPlayground(), { host: "127.0.0.1:7071" }],
        ["DNS rebinding Host", fromPlayground(), { ...local, host: "evil.example:7071" }],
        ["foreign connector", fromPlayground({ serviceUrl: "https://smba.trafficmanager.net/amer/" }), local],
        ["another loopback port", fromPlayground({ serviceUrl: `${connector.url}/` }), local],
        ["the port's default", fromPlayground({ serviceUrl: "http://localhost/_connector" }), local],
      ];
      for (const [name, a, headers] of cases) {
        const res = await w.post(a, undefined, headers);
        expect(res.status, name).toBe(401);
        expect(res.jsonBody, name).toEqual({ detail: expect.any(String), request_id: "req-e2e" });
        expect(await w.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) }), name).toBeUndefined();
      }
      const off = e2e();
      const a = fromPlayground();
      expect((await off.post(a, undefined, local)).status).toBe(401);
      expect(await off.channels.queue.stateOf({ channel: "platform_a", turn_id: String(a.id) })).toBeUndefined();
      expect(playground.requests.length + connector.requests.length).toBe(before);
      expect(await w.h.audit.list({ action: "console.tool_call" })).toHaveLength(0);
    });
  });

  /** An approval requested in the console (by REQUESTER, or by `requester`), pending for the Teams approver. */
  async function requested(w: ReturnType<typeof e2e>, requester = REQUESTER) {
    return w.h.approvals.request({
      action: { action_type: "retry_job", target: "blast_job/j-failed", params: { n: ++counter } },
      requester: { oid: requester, name: "Console requester" },
      reason: "verifier_abstained",
      severity: "medium",
      idempotencyKey: `sso-${counter}`,
      requestId: `req-sso-${counter}`,
      now: new Date(),
    });
  }

  /** The `adaptiveCard/action` invoke Teams posts for the A1 card's Action.Execute, with the SSO token when given. */
  const decideInvoke = (
    item: { approval_id: string; action_hash: string },
    options: {
      sso?: string;
      from?: Record<string, unknown>;
      /** The card action's data (Teams merges the inputs into it). */
      data?: Record<string, unknown> | undefined;
      guest?: boolean;
    } = {},
  ) =>
    message({
      type: "invoke",
      name: "adaptiveCard/action",
      text: undefined,
      from: options.from ?? { id: "29:1sso", name: "Sam Sso", aadObjectId: SSO_USER },
      ...(options.guest
        ? {
            conversation: { id: "a:1guest", conversationType: "personal", tenantId: GUEST_TENANT },
            channelData: { tenant: { id: GUEST_TENANT } },
          }
        : {}),
      value: {
        action: {
          type: "Action.Execute",
          verb: "approval.decide",
          data: {
            approval_id: item.approval_id,
            action_hash: item.action_hash,
            decision: "approve",
            justification: "checked in Teams",
            ...options.data,
          },
        },
        ...(options.sso
          ? { authentication: { id: "sso-1", connectionName: "blastplane-sso", token: options.sso } }
          : {}),
        trigger: "manual",
      },
    });
  const ssoToken = (claims: Record<string, unknown> = {}, options: { audience?: string; expiresIn?: string } = {}) =>
    entra.userToken(
      { oid: SSO_USER, name: "Sam Sso", roles: ["Approver"], ...claims },
      { audience: options.audience ?? API_AUDIENCE, ...(options.expiresIn ? { expiresIn: options.expiresIn } : {}) },
    );
  type InvokeAnswer = { statusCode: number; type: string; value: Record<string, unknown> };
  const refusals = async (w: ReturnType<typeof e2e>) =>
    (await w.h.audit.list({ action: "channel.a1_sso_refused" })).map((e) => e.details?.reason).reverse();

  it("C-351 C-352 C-372 C-373 an approval requested in the console is decided from the Teams card by the same-tenant approver through SSO: the first invoke gets the SSO challenge, the one with the token decides once, a replay decides nothing more", async () => {
    const w = e2e({ sso: true });
    const item = await requested(w);
    const bot = `Bearer ${await connectorToken()}`;
    // The A1 card the approver got in Teams: a decision form whose one Action.Execute carries only
    // the opaque approval id (C-375); the decision and justification are the approver's inputs.
    // The request notification the approval service sent this approver (its params carry the action_hash).
    expect(await w.h.approvals.deliverRequest(item.approval_id, "req-deliver", new Date())).toBe("sent");
    const sent = (await w.h.notifier.list()).find(
      (m) => m.correlation_id === item.approval_id && m.recipient === SSO_USER,
    );
    expect(sent?.params).toMatchObject({ approval_id: item.approval_id, action_hash: item.action_hash });
    if (!sent) throw new Error("no request notification");
    const { card } = buildAdaptiveCard({ ...sent, locale: "en" }, undefined, { ssoDecisions: true });
    const actions = card.actions as { type: string; verb?: string; data?: Record<string, unknown> }[];
    const execute = actions.find((a) => a.type === "Action.Execute");
    expect(execute).toEqual({
      type: "Action.Execute",
      verb: "approval.decide",
      title: expect.any(String),
      data: { approval_id: item.approval_id, action_hash: item.action_hash },
    });
    expect(JSON.stringify(card)).not.toMatch(/Action\.Submit|Action\.OpenUrl/);
    // Teams' first invoke has no token: the Universal Actions SSO challenge for the API's resource.
    const challenge = await w.post(decideInvoke(item, { data: execute?.data }), bot);
    expect(challenge.status).toBe(200);
    expect(challenge.jsonBody).toMatchObject({
      statusCode: 401,
      type: "application/vnd.microsoft.activity.loginRequest",
      value: { connectionName: "blastplane-sso", tokenExchangeResource: { id: BOT_APP_ID, uri: API_AUDIENCE } },
    });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    // Teams repeats it with the user's SSO token for the API.
    const invoke = decideInvoke(item, { sso: await ssoToken() });
    const decided = await w.post(invoke, bot);
    expect(decided.status).toBe(200);
    const answer = decided.jsonBody as InvokeAnswer;
    expect(answer).toMatchObject({ statusCode: 200, type: "application/vnd.microsoft.card.adaptive" });
    expect(JSON.stringify(answer.value)).toContain("approved");
    const stored = await w.h.approvalStore.get(item.approval_id);
    expect(stored?.state).toBe("approved");
    // Decided as the bound principal through the approvals domain (its audit entry).
    expect(stored?.decision?.actor.oid).toBe(SSO_USER);
    expect(w.h.executed).toHaveLength(1);
    // A replayed invoke (Bot Service retry, or a second click) decides nothing more.
    const replay = await w.post(invoke, bot);
    expect((replay.jsonBody as InvokeAnswer).statusCode).toBe(200);
    expect(JSON.stringify((replay.jsonBody as InvokeAnswer).value)).toContain("existing");
    expect(w.h.executed).toHaveLength(1);
    const decisions = await w.h.audit.list({ action: "console.approve_hil" });
    expect(decisions.filter((e) => e.outcome === "succeeded")).toHaveLength(1);
    expect(await refusals(w)).toEqual(["sso_token_required"]);
    // Answered in the HTTP response: nothing queued, nothing posted to Bot Connector.
    expect(await w.channels.queue.depth()).toBe(0);
  });

  it("C-348 C-350 the requester cannot decide its own approval from Teams through SSO (self-approval, audited with the invariant)", async () => {
    const w = e2e({ sso: true });
    const item = await requested(w, SSO_USER);
    const res = await w.post(decideInvoke(item, { sso: await ssoToken() }), `Bearer ${await connectorToken()}`);
    expect(res.jsonBody).toMatchObject({
      statusCode: 403,
      type: "application/vnd.microsoft.error",
      value: { code: "self_approval" },
    });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    const denied = await w.h.audit.list({ action: "console.approve_hil" });
    expect(denied[0]).toMatchObject({ outcome: "denied", details: { invariant: "no_self_approval" } });
    expect(w.h.executed).toHaveLength(0);
  });

  it("C-348 C-350 a Teams user bound to another principal cannot decide from Teams: who requested as the Teams identity in the console cannot approve as the bound principal", async () => {
    const w = e2e({ sso: true });
    // TEAMS_USER filed the request in the web console under its own identity; its binding maps it to PRINCIPAL.
    const item = await requested(w, TEAMS_USER);
    const res = await w.post(
      decideInvoke(item, {
        from: { id: "29:1abc", name: "Ops Person", aadObjectId: TEAMS_USER.toUpperCase() },
        sso: await ssoToken({ oid: TEAMS_USER }),
      }),
      `Bearer ${await connectorToken()}`,
    );
    expect(res.jsonBody).toMatchObject({ statusCode: 403, type: "application/vnd.microsoft.error" });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    expect(await refusals(w)).toEqual(["identity_mismatch"]);
    expect(w.h.executed).toHaveLength(0);
  });

  it("C-351 spec §5 item 5: the invoke must carry the item's action_hash; a missing or different one decides nothing (a different one is the decision route's 409)", async () => {
    const w = e2e({ sso: true });
    const item = await requested(w);
    const bot = `Bearer ${await connectorToken()}`;
    const sso = await ssoToken();
    const missing = await w.post(decideInvoke(item, { sso, data: { action_hash: undefined } }), bot);
    expect(missing.jsonBody).toMatchObject({ statusCode: 400, type: "application/vnd.microsoft.error" });
    const other = await w.post(decideInvoke(item, { sso, data: { action_hash: "0".repeat(64) } }), bot);
    expect(other.jsonBody).toMatchObject({
      statusCode: 409,
      type: "application/vnd.microsoft.error",
      value: { code: "conflict" },
    });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    expect(await refusals(w)).toEqual(["invalid_decision_data"]);
    const domain = await w.h.audit.list({ action: "console.approve_hil" });
    expect(domain.map((e) => e.details?.reason)).toEqual(["action_hash_mismatch"]);
    expect(w.h.executed).toHaveLength(0);
  });

  it("C-355 a guest cannot decide from Teams: a guest-tenant activity, and a home-tenant activity with a guest tenant's SSO token, are refused and audited", async () => {
    const w = e2e({ sso: true });
    const item = await requested(w);
    const bot = `Bearer ${await connectorToken()}`;
    const guestFrom = { id: "29:1guest", name: "Guest", aadObjectId: GUEST_USER };
    const guest = await w.post(
      decideInvoke(item, {
        guest: true,
        from: guestFrom,
        sso: await ssoToken({ oid: GUEST_USER, tid: GUEST_TENANT }),
      }),
      bot,
    );
    expect(guest.jsonBody).toMatchObject({ statusCode: 403, type: "application/vnd.microsoft.error" });
    const foreignToken = await w.post(decideInvoke(item, { sso: await ssoToken({ tid: GUEST_TENANT }) }), bot);
    expect(foreignToken.jsonBody).toMatchObject({ statusCode: 403 });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    expect(await refusals(w)).toEqual(["guest_tenant", "guest_tenant"]);
  });

  it("C-372 expired, wrong-audience, stale-sign-in and another user's SSO tokens, and a decision without a token, decide nothing; each refusal is audited", async () => {
    const w = e2e({ sso: true });
    const item = await requested(w);
    const bot = `Bearer ${await connectorToken()}`;
    const { privateKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ oid: TEAMS_USER, tid: TENANT, scp: "user_impersonation", roles: ["Approver"] })
      .setProtectedHeader({ alg: "RS256", kid: "entra-1" })
      .setIssuer(`${entra.url}/${TENANT}/v2.0`)
      .setAudience(API_AUDIENCE)
      .setExpirationTime("1h")
      .sign(privateKey);
    const cases: [string, string | undefined, number][] = [
      ["no token", undefined, 401],
      ["expired", await ssoToken({}, { expiresIn: "-10m" }), 401],
      ["wrong audience (the bot's own)", await ssoToken({}, { audience: `api://${BOT_APP_ID}` }), 401],
      ["forged", forged, 401],
      ["another user", await ssoToken({ oid: REQUESTER }), 403],
      // The sign-in is older than SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS (default 300 s): the domain refuses.
      ["stale sign-in", await ssoToken({ auth_time: Math.floor(Date.now() / 1000) - 3600 }), 401],
      ["no auth_time", await ssoToken({ auth_time: undefined }), 401],
    ];
    const answers: Record<string, InvokeAnswer> = {};
    for (const [name, sso, status] of cases) {
      const res = await w.post(decideInvoke(item, sso ? { sso } : {}), bot);
      expect(res.status, name).toBe(200);
      expect((res.jsonBody as InvokeAnswer).statusCode, name).toBe(status);
      answers[name] = res.jsonBody as InvokeAnswer;
    }
    // A sign-in hours old is not answered with another SSO challenge (Teams' silent SSO would bring
    // back the same auth_time, a loop): the answer says a fresh sign-in is needed and points to the console.
    for (const name of ["stale sign-in", "no auth_time"]) {
      expect(answers[name], name).toMatchObject({
        type: "application/vnd.microsoft.error",
        value: { code: "reauthentication_required" },
      });
      expect(String(answers[name]?.value.message), name).toMatch(/fresh sign-in.*console/);
    }
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    expect(await refusals(w)).toEqual([
      "sso_token_required",
      "sso_token_invalid",
      "sso_token_invalid",
      "sso_token_invalid",
      "sso_user_mismatch",
    ]);
    const domain = await w.h.audit.list({ action: "console.approve_hil" });
    expect(domain.map((e) => e.details?.reason)).toEqual(["reauthentication_required", "reauthentication_required"]);
    expect(w.h.executed).toHaveLength(0);
  });

  it("an unreachable identity provider (discovery or keys) is a retryable 503, not a sign-in prompt, audited as identity_provider_unavailable", async () => {
    // Nothing listens on port 9 of the loopback: the discovery document cannot be fetched.
    const w = e2e({ sso: true, discoveryUrl: "http://127.0.0.1:9/tenant/v2.0/.well-known/openid-configuration" });
    const item = await requested(w);
    const res = await w.post(decideInvoke(item, { sso: await ssoToken() }), `Bearer ${await connectorToken()}`);
    expect(res.jsonBody).toMatchObject({ statusCode: 503, type: "application/vnd.microsoft.error" });
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
    expect(await refusals(w)).toEqual(["identity_provider_unavailable"]);
  });

  it("without SVC_PLATFORM_A_SSO_CONNECTION_NAME a card invoke decides nothing (the console stays the way to decide)", async () => {
    const w = e2e();
    const item = await requested(w);
    const res = await w.post(decideInvoke(item, { sso: await ssoToken() }), `Bearer ${await connectorToken()}`);
    expect(res.status).toBe(200);
    expect((await w.h.approvalStore.get(item.approval_id))?.state).toBe("pending");
  });
});
