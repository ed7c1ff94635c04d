import { app } from "@azure/functions";
import * as df from "durable-functions";
import { z } from "zod";
import { pruneChannelRows } from "../shared/channels/inbound/channel-prune.js";
import { PairingRefusedError } from "../shared/channels/inbound/sender-access.js";
import { CHANNEL_KINDS } from "../shared/channels/inbound/types.js";
import { effectiveRole } from "../shared/console/tools/tool.js";
import { SLACK_BODY_LIMIT_BYTES, type SlackEndpoint } from "../shared/channels/platform-b/slack-inbound.js";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  PayloadTooLargeError,
  QueueFullError,
} from "../shared/errors.js";
import { jsonResult } from "../shared/http/envelope.js";
import {
  errorResponse,
  jsonBodyOf,
  ok,
  parametersOf,
  retryLater,
  unauthorized,
  validationFailed,
} from "../shared/http/openapi.js";
import { readBodyText } from "../shared/http/read-body.js";
import { parseJsonBody, parsePath } from "../shared/http/validation.js";
import { WEBHOOK_BODY_LIMIT_BYTES } from "../shared/channels/webhooks/webhook-inbound.js";
import { appContext } from "./composition/app-context.js";
import { channelConfig, channelTurnStarter, inboundChannels, runChannelTurns } from "./composition/channels-deps.js";
import { callerOf, orchestrationClient, route } from "./composition/http-route.js";

/**
 * The inbound conversation channels' routes (issue 26, docs/channels.md). Chat platform B's three
 * endpoints are public (Slack signs each request; nothing is read before the signature is checked
 * except the bounded body); chat platform A's `POST /api/messages` is public too (Bot Service's
 * token is checked before the body is read); pairing and identity links are an approver's acts.
 */

const slackRoutes: [string, string, SlackEndpoint, string][] = [
  ["slackEvents", "channels/slack/events", "events", "Slack Events API (JSON): url_verification and message events"],
  ["slackCommands", "channels/slack/commands", "commands", "Slack slash command /svc (form-encoded)"],
  [
    "slackInteractions",
    "channels/slack/interactions",
    "interactions",
    "Slack interactivity (form-encoded payload): the approval button",
  ],
];

for (const [name, path, endpoint, summary] of slackRoutes)
  route(
    name,
    {
      methods: ["POST"],
      route: path,
      durable: true,
      openapi: {
        summary,
        description:
          "Chat platform B (Slack). Verified with Slack's v0 signature (X-Slack-Signature, X-Slack-Request-Timestamp; five-minute window; a signature is accepted once) before the body is parsed; the request is answered once the turn is durably in the channel queue (Slack's 3 s), then the turn goes to the coordinator and the reply is posted with chat.postMessage, never in this response. 404 when SVC_PLATFORM_B_CHANNEL_ENABLED is off.",
        security: [],
        responses: {
          ...ok("accepted (empty), or the url_verification challenge", "SlackAck"),
          "400": errorResponse("malformed body"),
          ...unauthorized,
          "404": errorResponse("the channel is not enabled"),
          "413": errorResponse("request body too large"),
          ...validationFailed,
          "429": retryLater("the channel queue is full; Slack retries"),
        },
      },
    },
    async (request, scope) => {
      const slack = (await inboundChannels()).slack;
      if (!slack) throw new NotFoundError("chat platform B is not enabled");
      const declared = Number(request.headers.get("content-length") ?? "0");
      if (declared > SLACK_BODY_LIMIT_BYTES) throw new PayloadTooLargeError(SLACK_BODY_LIMIT_BYTES);
      const body = await readBodyText(request.body, SLACK_BODY_LIMIT_BYTES);
      if (Buffer.byteLength(body) > SLACK_BODY_LIMIT_BYTES) throw new PayloadTooLargeError(SLACK_BODY_LIMIT_BYTES);
      const answer = await slack.handle(endpoint, { headers: request.headers, body }, channelTurnStarter(scope));
      return jsonResult(answer.status, answer.body ?? {}, scope.requestId);
    },
  );

route(
  "teamsMessages",
  {
    methods: ["POST"],
    route: "messages",
    durable: true,
    openapi: {
      summary: "Microsoft Teams bot endpoint (Bot Framework activities)",
      description:
        "Chat platform A (Teams), the Bot Framework convention. The Bot Service token (Authorization: Bearer, RS256 against the cached key set of SVC_PLATFORM_A_OPENID_METADATA_URL, issuer, audience = SVC_PLATFORM_A_BOT_APP_ID, exp/nbf, a service URL claim) is checked before the body is read; then the activity's serviceUrl and channelId (msteams) against the token, the tenant (SVC_PLATFORM_A_TENANT_ID or a guest tenant) and the sender's binding (SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON). A verified message is answered once it is durably in the channel queue (Bot Service waits at most 15 s); then it goes to the coordinator as the bound principal and the reply is posted through the Microsoft 365 Agents SDK to Bot Connector, never in this response (an SSO card invoke is answered in the response). With SVC_PLATFORM_A_SENDER_ACCESS=pairing an unbound sender gets a pairing challenge instead. Local profile only (npm start; start-up refuses it elsewhere): with SVC_PLATFORM_A_LOCAL_ANONYMOUS a request without Authorization (the Microsoft 365 Agents Playground) is accepted when the caller's address and Host are loopback, the activity's serviceUrl is the loopback Bot Connector on SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT and its sender (from.aadObjectId) is SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER, else 401; its reply carries no app token and its conversation is not kept for notifications. 404 when SVC_PLATFORM_A_CHANNEL_ENABLED is off.",
      security: [],
      responses: {
        ...ok("accepted (the reply goes out through Bot Connector)", "TeamsAck"),
        "400": errorResponse("malformed JSON"),
        ...unauthorized,
        "403": errorResponse("the tenant is not accepted or the sender has no principal binding"),
        "404": errorResponse("the channel is not enabled"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
        "429": retryLater("the channel queue is full; Bot Service retries"),
      },
    },
  },
  async (request, scope) => {
    const channels = await inboundChannels();
    if (!channels.teams) throw new NotFoundError("chat platform A is not enabled");
    const answer = await channels.teams.handle(request, channelTurnStarter(scope));
    return jsonResult(answer.status, answer.jsonBody ?? {}, scope.requestId);
  },
);

const webhookPath = z.object({
  source: z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, "must be a configured webhook source name"),
});

route(
  "channelWebhook",
  {
    methods: ["POST"],
    route: "channels/webhooks/{source}",
    openapi: {
      summary: "Inbound generic webhook of a configured source (Standard Webhooks)",
      description:
        "A source configured in SVC_CHANNEL_WEBHOOKS_JSON opts into one TypedWebhookMapping. The delivery is verified before its body is parsed: Standard Webhooks HMAC-SHA256 (webhook-id, webhook-timestamp, webhook-signature; constant-time compare), a five-minute timestamp window, a timestamp not older than the source's newest accepted one, and a single-use webhook-id. The mapping projects bounded scalar fields; the event type, target agent and session come from the mapping, never the payload. The event is recorded in shadow mode for the operations core (ingest, T0, audit); a webhook never executes an action.",
      security: [],
      parameters: parametersOf(webhookPath, "path"),
      responses: {
        "202": {
          description: "recorded as a shadow event",
          content: { "application/json": { schema: { $ref: "#/components/schemas/WebhookAccepted" } } },
        },
        "400": errorResponse("malformed JSON or nested too deeply"),
        "401": errorResponse(
          "invalid signature, a timestamp outside the window or older than one accepted, or a reused webhook-id",
        ),
        "404": errorResponse("no such webhook source is configured"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const { source } = parsePath(request, webhookPath);
    const webhooks = (await inboundChannels()).webhooks;
    if (!webhooks?.has(source)) throw new NotFoundError("no webhook source of that name is configured");
    const declared = Number(request.headers.get("content-length") ?? "0");
    if (declared > WEBHOOK_BODY_LIMIT_BYTES) throw new PayloadTooLargeError(WEBHOOK_BODY_LIMIT_BYTES);
    const body = await readBodyText(request.body, WEBHOOK_BODY_LIMIT_BYTES);
    if (Buffer.byteLength(body) > WEBHOOK_BODY_LIMIT_BYTES) throw new PayloadTooLargeError(WEBHOOK_BODY_LIMIT_BYTES);
    const accepted = await webhooks.handle(source, { headers: request.headers, body, requestId: scope.requestId });
    return jsonResult(202, accepted, scope.requestId);
  },
);

const senderId = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, "must be a vendor user id");
const objectId = z.string().regex(/^\{?[0-9a-fA-F-]{36}\}?$/, "must be a directory object id (GUID)");

const pairingBody = z.strictObject({
  channel: z.enum(CHANNEL_KINDS),
  sender_id: senderId,
  code: z.string().trim().min(1).max(32),
  principal_oid: objectId,
});

const linkBody = z.strictObject({
  endpoints: z.array(z.strictObject({ channel: z.enum(CHANNEL_KINDS), sender_id: senderId })).length(2),
});

/** A refusal of pairing or linking as the transport's error (the audit entry is written already). */
function refusal(error: unknown): never {
  if (error instanceof PairingRefusedError) {
    if (error.reason === "not_authorized" || error.reason === "separate_approver_required")
      throw new ForbiddenError(`${error.reason}: ${error.message}`);
    if (error.reason === "too_many_attempts") throw new QueueFullError(error.message, 900);
    throw new ConflictError(`${error.reason}: ${error.message}`);
  }
  throw error;
}

route(
  "channelPairingApprove",
  {
    methods: ["POST"],
    route: "channels/pairing",
    role: "Approver",
    openapi: {
      summary: "Approve a chat sender's pairing with an existing principal",
      description:
        "The sender's one-time code (from the bot's pairing reply) maps the channel sender to an existing principal: identity resolution only, never a role. The approver must not be that principal; a wrong code counts against the challenge (deleted after five); every act is audited as channel.pairing_approve.",
      requestBody: jsonBodyOf(pairingBody),
      responses: {
        ...ok("the sender's new mapping", "PairingApproved"),
        "400": errorResponse("malformed JSON"),
        "409": errorResponse("no pending pairing matches, the principal is unknown, or the sender is already mapped"),
        ...validationFailed,
        "429": retryLater("too many failed attempts by this approver"),
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, pairingBody, 4096);
    const caller = callerOf(scope);
    const { senders } = await inboundChannels();
    const role = effectiveRole(caller);
    const paired = await senders
      .approvePairing({
        channel: body.channel,
        vendorUserId: body.sender_id,
        code: body.code,
        principalOid: body.principal_oid,
        approver: { oid: caller.oid, name: caller.name, role },
        requestId: scope.requestId,
        now: new Date(),
      })
      .catch(refusal);
    return jsonResult(200, paired, scope.requestId);
  },
);

route(
  "channelIdentityLink",
  {
    methods: ["POST"],
    route: "channels/links",
    role: "Approver",
    openapi: {
      summary: "Link two paired senders of different channel kinds",
      description:
        "Both senders must each be paired to the same principal, of two different channel kinds, and the approver must be a separate actor. Idempotent by a deterministic link id; nothing (principal, role, session, audit history) is merged. Audited as channel.identity_link.",
      requestBody: jsonBodyOf(linkBody),
      responses: {
        ...ok("the link", "IdentityLink"),
        "400": errorResponse("malformed JSON"),
        "409": errorResponse("same channel kind, an unpaired endpoint, or different principals"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, linkBody, 4096);
    const caller = callerOf(scope);
    const { senders } = await inboundChannels();
    const role = effectiveRole(caller);
    const [a, b] = body.endpoints;
    if (!a || !b) throw new Error("two endpoints are validated above");
    const link = await senders
      .approveLink({
        endpoints: [
          { channel: a.channel, vendorUserId: a.sender_id },
          { channel: b.channel, vendorUserId: b.sender_id },
        ],
        approver: { oid: caller.oid, name: caller.name, role },
        requestId: scope.requestId,
        now: new Date(),
      })
      .catch(refusal);
    return jsonResult(200, link, scope.requestId);
  },
);

/**
 * The channel queue's worker: turns a crashed host left behind (a lease that ran out) are answered,
 * or closed as abandoned when the crash came while posting. Its durable client gives such a turn
 * what the routes give theirs: an approval it files starts its orchestration.
 */
app.timer("channelQueueTimer", {
  schedule: "0 * * * * *",
  extraInputs: [df.input.durableClient()],
  handler: async (_timer, context) => {
    const channels = await inboundChannels();
    if (!channels.slack && !channels.teams) return;
    const closed = await runChannelTurns(orchestrationClient(context));
    if (closed > 0) appContext.logger.info("channel queue drained", { closed });
  },
});

/**
 * Prunes the channels' guard rows past their use: used Slack signatures and webhook ids past their
 * window, and the dedupe rows of turns closed more than a day ago (shared/channels/inbound/channel-prune.ts).
 */
app.timer("channelPruneTimer", {
  schedule: "0 */15 * * * *",
  handler: async () => {
    if (!channelConfig.platformA && !channelConfig.platformB && !channelConfig.webhooks) return;
    const counts = await pruneChannelRows({ tables: appContext.config.storage, now: new Date() });
    if (counts.replay + counts.nonces + counts.turns > 0) appContext.logger.info("channel rows pruned", { ...counts });
  },
});
