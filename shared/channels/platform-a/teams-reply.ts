import type {
  AuthConfiguration,
  AuthProvider,
  CloudAdapter,
  Connections,
  TurnContext,
} from "@microsoft/agents-hosting";
import { loadAgentsHosting, loadClientSecretCredential } from "../../lazy-sdks.js";
import { isLoopbackUrl } from "../../http/loopback-host.js";
import { CHANNEL_TRUNCATED, UPSTREAM_TRUNCATED } from "../../notify/output-markers.js";
import type { ChannelProgressSender } from "../inbound/progress-stream.js";
import type {
  ChannelDeliveryReceipt,
  ChannelInboundTurn,
  ChannelOutboundResponse,
  ChannelProgressUpdate,
} from "../inbound/types.js";
import { TEAMS_CHANNEL_ID } from "./teams-verifier.js";

/**
 * Replies of the inbound Teams channel (chat platform A) through the Microsoft 365 Agents SDK
 * (`@microsoft/agents-hosting`): `CloudAdapter.continueConversation` with the reference the
 * verified activity left in the turn's `reply_context` (the token's service URL, never the
 * payload's), then `sendActivity`. With the inbound activity's id as the reference's `activityId`
 * the SDK answers it as a reply (`POST {serviceUrl}/v3/conversations/{id}/activities/{activityId}`).
 * The SDK acquires the bot's app token from Entra ID (client credentials) itself. The SDK is
 * imported on the first reply, not when the Functions app starts (cold start).
 */

/** A reply's text in Teams: at most this many characters, clipped with `[CHANNEL OUTPUT TRUNCATED]`. */
export const TEAMS_REPLY_TEXT_LIMIT = 4_000;
/** At most this many activity lines are listed under a reply (the rest are counted). */
const ACTIVITY_LINES = 10;

/** Markdown the sender's text could use to fake structure is shown literally (Teams renders markdown). */
function escapeMarkdown(text: string): string {
  return text.replace(/([\\`*_[\]<>#|])/g, "\\$1");
}

/** The reply activity: text (clipped), the activity lines, and at most one card that only opens the console. */
export function teamsReplyActivity(response: ChannelOutboundResponse): {
  activity: Record<string, unknown>;
  degraded: boolean;
} {
  const activities = response.activities ?? [];
  const lines = activities.slice(0, ACTIVITY_LINES).map((a) => `${a.input_kind} ${a.command}: ${a.status}`);
  if (activities.length > ACTIVITY_LINES) lines.push(`${activities.length - ACTIVITY_LINES} more not shown`);
  const marker = response.upstream_truncated ? `\n${UPSTREAM_TRUNCATED}` : "";
  const full = `${escapeMarkdown(response.text)}${marker}${lines.length > 0 ? `\n\n${escapeMarkdown(lines.join("\n"))}` : ""}`;
  const degraded = full.length > TEAMS_REPLY_TEXT_LIMIT;
  const text = degraded
    ? `${full.slice(0, TEAMS_REPLY_TEXT_LIMIT - CHANNEL_TRUNCATED.length - 1)}\n${CHANNEL_TRUNCATED}`
    : full;
  const rich = response.rich;
  // A1 from Teams never carries a decision (spec §5 item 5): the card only opens the console.
  const card =
    rich?.kind === "approval_bounce"
      ? {
          type: "AdaptiveCard",
          $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
          version: "1.5",
          body: [
            { type: "TextBlock", text: "Approval", weight: "Bolder", wrap: true },
            { type: "FactSet", facts: [{ title: "Approval", value: rich.approval_id }] },
          ],
          actions: [{ type: "Action.OpenUrl", title: "Sign in to decide", url: rich.console_url }],
        }
      : undefined;
  return {
    activity: {
      type: "message",
      textFormat: "markdown",
      text,
      ...(card ? { attachments: [{ contentType: "application/vnd.microsoft.card.adaptive", content: card }] } : {}),
    },
    degraded,
  };
}

/** A token source the way the reply needs one: `getToken` of `@azure/identity`'s credentials. */
interface AppTokenCredential {
  getToken(scope: string): Promise<{ token: string } | null>;
}

/**
 * The Agents SDK's connections (its public `Connections` interface) answered by one app-token
 * credential: how replies get their token from a configured authority host. The SDK's own MSAL
 * client cannot be given one: MSAL trusts a host that is not one of Microsoft's only after asking
 * `login.microsoftonline.com`'s instance discovery, and the SDK passes it no `knownAuthorities`.
 * Only the bot's own app token is served; the agentic and on-behalf-of flows this bot does not use
 * refuse.
 */
function credentialConnections(credential: AppTokenCredential, settings: AuthConfiguration): Connections {
  const unsupported = async (): Promise<string> => {
    throw new Error("not supported by this bot's token provider (app tokens only)");
  };
  const provider: AuthProvider = {
    connectionSettings: settings,
    async getAccessToken(authConfigOrScope: AuthConfiguration | string, maybeScope?: string): Promise<string> {
      const scope = typeof authConfigOrScope === "string" ? authConfigOrScope : maybeScope;
      if (!scope) throw new Error("no scope for the app token");
      const token = await credential.getToken(scope.endsWith("/.default") ? scope : `${scope}/.default`);
      if (!token) throw new Error("no app token");
      return token.token;
    },
    getAgenticApplicationToken: unsupported,
    getAgenticInstanceToken: unsupported,
    getAgenticUserToken: unsupported,
    acquireTokenOnBehalfOf: unsupported,
  } as AuthProvider;
  return {
    getConnection: () => provider,
    getDefaultConnection: () => provider,
    getTokenProvider: () => provider,
    getTokenProviderFromActivity: () => provider,
    getDefaultConnectionConfiguration: () => settings,
  };
}

interface HttpErrorLike {
  response?: { status?: number };
}

/**
 * The reply sender of chat platform A: an acknowledgement is the created activity's resource id
 * (spec §7 item 9). A Bot Connector 429/5xx is a retryable rejection, another 4xx definitive, a
 * token Entra refuses definitive; a 2xx without an id or a cut transport is ambiguous (never
 * retried automatically, spec §3 reply delivery).
 */
export function createTeamsReplier(options: {
  botAppId: string;
  tenantId: string;
  clientSecret: () => Promise<string>;
  /**
   * The Entra authority host of the app token (`SVC_PLATFORM_A_AUTHORITY_HOST`, an HTTPS origin):
   * a sovereign cloud, or the local stack's Entra stand-in. Unset: the SDK's own MSAL client and
   * its default authority. Set: `@azure/identity`'s `ClientSecretCredential` (MSAL under it) with
   * that host and no instance discovery, through the SDK's `Connections` interface.
   */
  authorityHost?: string;
  /** A certificate authority (PEM) the authority host is trusted with (the local stack's Entra stand-in). */
  authorityCa?: string;
  /**
   * `SVC_PLATFORM_A_LOCAL_ANONYMOUS` (local profile): a token-less local activity's reply
   * (`reply_context.anonymous`) goes to its loopback Bot Connector — the Agents Playground's, which
   * accepts no app token — without one; no client secret is read for it.
   */
  localAnonymous?: boolean;
  /**
   * With {@link localAnonymous}: the only port that connector may listen on
   * (`SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT`). A token-less turn naming any other place is
   * not answered (and never with the app token).
   */
  localAnonymousConnectorPort?: number;
}) {
  /** Whether a token-less turn's reply may go to `serviceUrl`: the configured loopback connector only. */
  const localConnector = (serviceUrl: string) => {
    if (options.localAnonymous !== true || !URL.canParse(serviceUrl)) return false;
    const u = new URL(serviceUrl);
    const port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
    return isLoopbackUrl(u) && port === options.localAnonymousConnectorPort;
  };
  const operation = "continueConversation.sendActivity";
  let anonymousAdapter: Promise<CloudAdapter> | undefined;
  const anonymousAdapterOf = () => {
    anonymousAdapter ??= loadAgentsHosting().then(
      (sdk) => {
        const settings = { clientId: options.botAppId, tenantId: options.tenantId };
        const a = new sdk.CloudAdapter(settings);
        // An empty token: the SDK's connector client then sends no Authorization header.
        a.connectionManager = credentialConnections({ getToken: async () => ({ token: "" }) }, settings);
        a.onTurnError = async () => undefined;
        return a;
      },
      (error: unknown) => {
        anonymousAdapter = undefined;
        throw error;
      },
    );
    return anonymousAdapter;
  };
  let adapter: Promise<CloudAdapter> | undefined;
  const adapterOf = () => {
    adapter ??= Promise.all([loadAgentsHosting(), options.clientSecret()]).then(
      async ([sdk, clientSecret]) => {
        const settings = {
          clientId: options.botAppId,
          clientSecret,
          tenantId: options.tenantId,
          ...(options.authorityHost ? { authority: options.authorityHost } : {}),
        };
        const a = new sdk.CloudAdapter(settings);
        if (options.authorityHost) {
          const { ClientSecretCredential } = await loadClientSecretCredential();
          const credential = new ClientSecretCredential(options.tenantId, options.botAppId, clientSecret, {
            authorityHost: options.authorityHost,
            // The host is the configured one, not one Entra's instance discovery must vouch for.
            disableInstanceDiscovery: true,
            ...(options.authorityCa ? { tlsOptions: { ca: options.authorityCa } } : {}),
          });
          a.connectionManager = credentialConnections(credential, settings);
        }
        // The SDK's default turn-error handler posts its own message into the conversation.
        a.onTurnError = async () => undefined;
        return a;
      },
      (error: unknown) => {
        adapter = undefined;
        throw error;
      },
    );
    return adapter;
  };

  /**
   * One exchange with Bot Connector inside `continueConversation` (the verified reference of the
   * turn): `act` sends or updates and answers the acknowledged activity id.
   */
  async function exchange(
    turn: ChannelInboundTurn,
    operation: string,
    asReply: boolean,
    degraded: boolean,
    act: (context: TurnContext) => Promise<string | undefined>,
  ): Promise<ChannelDeliveryReceipt> {
    const ctx = turn.reply_context;
    if (!ctx.service_url || !ctx.conversation_id)
      return { outcome: "rejected", operation, retryable: false, reason: "no_reply_context" };
    let posted = false;
    let ack: string | undefined;
    let failure: unknown;
    try {
      // A token-less turn is answered only at the configured local connector, and never with the app token.
      const anonymous = ctx.anonymous === "local";
      if (anonymous && !localConnector(ctx.service_url))
        return { outcome: "rejected", operation, retryable: false, reason: "local_connector_refused" };
      const a = await (anonymous ? anonymousAdapterOf() : adapterOf());
      await a.continueConversation(
        options.botAppId,
        {
          serviceUrl: ctx.service_url,
          channelId: TEAMS_CHANNEL_ID,
          conversation: { id: ctx.conversation_id, ...(ctx.tenant_id ? { tenantId: ctx.tenant_id } : {}) },
          agent: { id: `28:${options.botAppId}` },
          user: { id: ctx.user_id ?? "unknown" },
          ...(asReply && ctx.activity_id ? { activityId: ctx.activity_id } : {}),
        } as Parameters<CloudAdapter["continueConversation"]>[1],
        async (context) => {
          posted = true;
          // Caught here: a throw would reach the adapter's turn-error handler.
          try {
            const id = await act(context);
            if (typeof id === "string" && id.length > 0) ack = id;
          } catch (error) {
            failure = error;
          }
        },
      );
      if (failure !== undefined) throw failure;
      if (ack) return { outcome: "acknowledged", operation, vendor_message_id: ack, text_degraded: degraded };
      return { outcome: "ambiguous", operation, reason: "malformed_acknowledgement" };
    } catch (error) {
      const status = (error as HttpErrorLike).response?.status;
      if (typeof status === "number")
        return {
          outcome: "rejected",
          operation,
          retryable: status === 408 || status === 429 || status >= 500,
          reason: `http_${status}`,
        };
      // Nothing reached Bot Connector (the app token or the SDK could not be had).
      if (!posted) return { outcome: "rejected", operation, retryable: true, reason: "token_unavailable" };
      return { outcome: "ambiguous", operation, reason: "transport_interrupted" };
    }
  }

  type Sendable = Parameters<TurnContext["sendActivity"]>[0];
  type Updatable = Parameters<TurnContext["updateActivity"]>[0];

  const deliver = (turn: ChannelInboundTurn, response: ChannelOutboundResponse): Promise<ChannelDeliveryReceipt> => {
    const { activity, degraded } = teamsReplyActivity(response);
    return exchange(turn, operation, response.thread_intent !== "in_conversation", degraded, async (context) => {
      const sent = await context.sendActivity(activity as unknown as Sendable);
      return sent?.id;
    });
  };

  /**
   * Progress (spec §3 last row): revision 0 is a reply activity; later revisions and the final reply
   * update that activity in place (`TurnContext.updateActivity`, Bot Connector's
   * `PUT /v3/conversations/{id}/activities/{activityId}`). An update's acknowledgement is Bot
   * Connector's 2xx for that activity id.
   */
  const updateTo =
    (activity: Record<string, unknown>) =>
    async (context: TurnContext, activityId: string): Promise<string> => {
      await context.updateActivity({ ...activity, id: activityId } as unknown as Updatable);
      return activityId;
    };
  const progress: ChannelProgressSender = {
    post: (turn, update) => {
      const { activity, degraded } = teamsProgressActivity(update);
      return exchange(turn, "progress.sendActivity", true, degraded, async (context) => {
        const sent = await context.sendActivity(activity as unknown as Sendable);
        return sent?.id;
      });
    },
    update: (turn, activityId, update) => {
      const { activity, degraded } = teamsProgressActivity(update);
      return exchange(turn, "updateActivity", true, degraded, (context) => updateTo(activity)(context, activityId));
    },
    replace: (turn, activityId, response) => {
      const { activity, degraded } = teamsReplyActivity(response);
      return exchange(turn, "updateActivity", true, degraded, (context) => updateTo(activity)(context, activityId));
    },
  };

  return Object.assign(deliver, { progress });
}

/** A progress revision as a Teams message activity (plain text, clipped like a reply). */
export function teamsProgressActivity(update: ChannelProgressUpdate): {
  activity: Record<string, unknown>;
  degraded: boolean;
} {
  const full = escapeMarkdown(update.text);
  const degraded = full.length > TEAMS_REPLY_TEXT_LIMIT;
  const text = degraded
    ? `${full.slice(0, TEAMS_REPLY_TEXT_LIMIT - CHANNEL_TRUNCATED.length - 1)}\n${CHANNEL_TRUNCATED}`
    : full;
  return { activity: { type: "message", textFormat: "markdown", text }, degraded };
}
