import { CloudAdapter, type TurnContext } from "@microsoft/agents-hosting";
import type { AttemptOutcome, ChannelAdapter, OutboundMessage } from "../router.js";
import { CHANNEL_TRUNCATED } from "./platform-b.js";

/**
 * The `Action.Execute` verb of an A1 card's decision (Teams Universal Actions): this card sends it,
 * the inbound channel's `teams-sso.ts` answers its invoke.
 */
export const APPROVAL_DECIDE_VERB = "approval.decide";

/** A Teams card's serialized size limit (spec operator-console.md §8). */
export const CARD_BYTE_LIMIT = 24_000;
/** A Teams answer block's character limit (spec §8). */
export const ANSWER_BLOCK_LIMIT = 4_000;
/** Bot Connector's scope for the bot's app token (the Agents SDK asks Entra for `<scope>/.default`). */
export const BOT_CONNECTOR_SCOPE = "https://api.botframework.com";

/**
 * Where a proactive message goes: the Bot Framework conversation reference a verified inbound
 * activity left behind (per recipient), or the configured alert conversation (operational).
 */
export interface TeamsConversationReference {
  serviceUrl: string;
  conversationId: string;
  /** The tenant of the conversation (Teams needs it for proactive messages). */
  tenantId?: string;
  /** The Teams user id (`29:…`) of a personal conversation. */
  userId?: string;
}

/** Looks up the conversation a recipient (directory object id, or `operational`) is reached in. */
export interface ConversationReferenceLookup {
  get(recipient: string): Promise<TeamsConversationReference | undefined>;
}

/** Clips text to `limit` characters with the channel truncation marker (spec §2.4 rule 5). */
export function answerBlock(text: string, limit = ANSWER_BLOCK_LIMIT): { text: string; degraded: boolean } {
  if (text.length <= limit) return { text, degraded: false };
  return { text: `${text.slice(0, limit - CHANNEL_TRUNCATED.length - 1)}\n${CHANNEL_TRUNCATED}`, degraded: true };
}

/** The console link of an approval (the web app re-authenticates; the card never carries a decision). */
export function approvalLink(baseUrl: string | undefined, approvalId: string): string | undefined {
  if (!baseUrl?.startsWith("https://") && !baseUrl?.startsWith("http://127.0.0.1")) return undefined;
  return `${baseUrl.replace(/\/+$/, "")}/console?approval=${encodeURIComponent(approvalId)}`;
}

/**
 * The A1 card's decision inputs: the decision and a justification are what the user enters; the
 * card itself carries no decision (spec §5 item 5).
 */
const decisionForm = [
  {
    type: "Input.ChoiceSet",
    id: "decision",
    label: "Decision",
    isRequired: true,
    style: "expanded",
    choices: [
      { title: "Approve", value: "approve" },
      { title: "Reject", value: "reject" },
    ],
  },
  {
    type: "Input.Text",
    id: "justification",
    label: "Justification",
    isRequired: true,
    maxLength: 500,
    errorMessage: "Give a short justification.",
  },
];

/**
 * The card's one decision action: Universal Actions (`Action.Execute`), whose data is only the
 * opaque approval id; Teams adds the inputs and, through single sign-on, the user's token.
 */
const decisionAction = (approvalId: string, actionHash: string) => ({
  type: "Action.Execute",
  verb: APPROVAL_DECIDE_VERB,
  title: "Decide (signs you in)",
  data: { approval_id: approvalId, action_hash: actionHash },
});

/** The item's `action_hash` from the request's params (not a decision payload: the round trip re-validates it). */
const actionHashOf = (message: OutboundMessage): string | undefined => {
  const hash = message.params?.action_hash;
  return typeof hash === "string" && /^[0-9a-f]{64}$/.test(hash) ? hash : undefined;
};

/**
 * The Adaptive Card (1.5) of a message: a title, the answer block (≤ 4,000 characters), the
 * category, template and audit id, and for A1 only the opaque approval id with a link that opens
 * the approval in the web app — never a decision payload (spec §5 item 5). The serialized card stays
 * within 24,000 bytes: an over-long body is clipped further, with the count of omitted characters
 * shown (spec §8), until it fits.
 */
export function buildAdaptiveCard(
  message: OutboundMessage,
  consoleBaseUrl: string | undefined,
  options: { ssoDecisions?: boolean } = {},
): { card: Record<string, unknown>; bytes: number; degraded: boolean } {
  const approvalId = message.category === "A1" ? message.correlation_id : undefined;
  const link = approvalId
    ? (message.console_url ?? approvalLink(consoleBaseUrl, approvalId))
    : message.console_url?.startsWith("https://")
      ? message.console_url
      : undefined;
  // With Teams SSO, an approver decides on the card itself: the decision is the user's input, sent
  // with the user's SSO token in Teams' `adaptiveCard/action` invoke (channels/platform-a/teams-sso.ts).
  // Without the item's action_hash there is no form: the invoke would be refused anyway.
  const hash = actionHashOf(message);
  const decide = options.ssoDecisions === true && approvalId !== undefined && hash !== undefined;
  const render = (bodyLimit: number) => {
    const block = answerBlock(message.body_markdown, bodyLimit);
    const omitted = message.body_markdown.length - Math.min(message.body_markdown.length, bodyLimit);
    const facts = [
      { title: "Category", value: message.category },
      { title: "Template", value: message.template_key },
      ...(approvalId ? [{ title: "Approval", value: approvalId }] : []),
      ...(message.audit_id ? [{ title: "Audit", value: message.audit_id }] : []),
      ...(message.severity ? [{ title: "Severity", value: message.severity }] : []),
      ...(omitted > 0 ? [{ title: "Omitted", value: `${omitted} characters` }] : []),
    ];
    const card = {
      type: "AdaptiveCard",
      $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
      version: "1.5",
      body: [
        { type: "TextBlock", text: message.title.slice(0, 200), weight: "Bolder", size: "Medium", wrap: true },
        { type: "TextBlock", text: block.text, wrap: true },
        { type: "FactSet", facts },
        ...(decide ? decisionForm : []),
      ],
      ...(link || decide
        ? {
            actions: [
              ...(decide && approvalId && hash ? [decisionAction(approvalId, hash)] : []),
              ...(link
                ? [
                    {
                      type: "Action.OpenUrl",
                      title: approvalId ? "Open the approval in the console" : "Open in the console",
                      url: link,
                    },
                  ]
                : []),
            ],
          }
        : {}),
    };
    return { card, bytes: Buffer.byteLength(JSON.stringify(card)), degraded: block.degraded };
  };
  let limit = ANSWER_BLOCK_LIMIT;
  let rendered = render(limit);
  // Multi-byte text can make 4,000 characters outgrow the byte budget: halve until it fits.
  while (rendered.bytes > CARD_BYTE_LIMIT && limit > 100) {
    limit = Math.floor(limit / 2);
    rendered = render(limit);
  }
  return { ...rendered, degraded: rendered.degraded || limit < ANSWER_BLOCK_LIMIT };
}

interface HttpErrorLike {
  response?: { status?: number; headers?: Headers };
}

function errorCode(error: unknown): string | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && e && typeof e === "object"; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The token request failed before any message went out: the send is safe to try again. */
function isTokenFailure(error: unknown): boolean {
  const name = (error as { name?: string } | undefined)?.name ?? "";
  const code = (error as { errorCode?: string } | undefined)?.errorCode;
  return /^(ClientAuthError|ServerError|ClientConfigurationError|AuthError)$/.test(name) || typeof code === "string";
}

/**
 * Chat platform A (Microsoft Teams) through the Microsoft 365 Agents SDK (`@microsoft/agents-hosting`):
 * a proactive message (`CloudAdapter.continueConversation`) to the recipient's stored conversation
 * reference, carrying an Adaptive Card. The SDK acquires the bot's app token from Entra (MSAL client
 * credentials for `https://api.botframework.com`) and posts to Bot Connector's
 * `/v3/conversations/{id}/activities/{continuation id}` (the SDK's proactive path replies to the
 * continuation activity it creates). Acknowledgement: the created activity's resource id (spec §7
 * item 9). A 429 or 5xx is a retryable rejection (with its Retry-After); another 4xx definitive; a
 * 2xx without an id, a cut transport or a time-out is ambiguous.
 */
export function createPlatformAChannel(options: {
  botAppId: string;
  tenantId: string;
  clientSecret: string;
  conversations: ConversationReferenceLookup;
  consoleBaseUrl?: string;
  /** The Entra authority (default `https://login.microsoftonline.com`); sovereign clouds differ. */
  authority?: string;
  /** Teams SSO is configured: A1 cards carry the decision form and its `Action.Execute`. */
  ssoDecisions?: boolean;
}): ChannelAdapter {
  const adapter = new CloudAdapter({
    clientId: options.botAppId,
    clientSecret: options.clientSecret,
    tenantId: options.tenantId,
    ...(options.authority ? { authorityEndpoint: options.authority } : {}),
  });
  // The SDK's default turn-error handler posts "The agent encountered an error" into the
  // conversation: a failed notification must never send anything else.
  adapter.onTurnError = async () => undefined;
  return {
    kind: "platform_a",
    operation: "continueConversation.sendActivity",
    async send(message, { signal }): Promise<AttemptOutcome> {
      const reference = await options.conversations.get(message.recipient);
      if (!reference) return { outcome: "rejected", retryable: false, reason: "no_conversation_reference" };
      const { card, bytes, degraded } = buildAdaptiveCard(message, options.consoleBaseUrl, {
        ...(options.ssoDecisions ? { ssoDecisions: true } : {}),
      });
      if (bytes > CARD_BYTE_LIMIT) return { outcome: "rejected", retryable: false, reason: "card_too_large" };
      const activity = {
        type: "message",
        summary: message.title.slice(0, 200),
        attachments: [{ contentType: "application/vnd.microsoft.card.adaptive", content: card }],
      } as unknown as Parameters<TurnContext["sendActivity"]>[0];
      let posted = false;
      let ack: string | undefined;
      let failure: unknown;
      const call = adapter.continueConversation(
        options.botAppId,
        {
          serviceUrl: reference.serviceUrl,
          channelId: "msteams",
          conversation: {
            id: reference.conversationId,
            ...(reference.tenantId ? { tenantId: reference.tenantId } : {}),
          },
          agent: { id: `28:${options.botAppId}` },
          user: { id: reference.userId ?? "operational" },
        } as Parameters<CloudAdapter["continueConversation"]>[1],
        async (context) => {
          posted = true;
          // Caught here, not thrown: the adapter's turn-error handler would post its own messages.
          try {
            const response = await context.sendActivity(activity);
            if (typeof response?.id === "string" && response.id.length > 0) ack = response.id;
            else failure = new MissingAcknowledgement();
          } catch (error) {
            failure = error;
          }
        },
      );
      const aborted = new Promise<never>((_, reject) =>
        signal.addEventListener("abort", () => reject(new Error("timeout")), { once: true }),
      );
      try {
        await Promise.race([call, aborted]);
        if (failure !== undefined) throw failure;
        if (ack) return { outcome: "acknowledged", vendor_message_id: ack, text_degraded: degraded };
        return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
      } catch (error) {
        call.catch(() => undefined);
        if (error instanceof MissingAcknowledgement)
          return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
        if (signal.aborted) return { outcome: "ambiguous", reason: "timeout" };
        const status = (error as HttpErrorLike).response?.status;
        if (typeof status === "number") {
          const retryAfter = (error as HttpErrorLike).response?.headers?.get?.("retry-after") ?? undefined;
          const after = retryAfter && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter.trim()) * 1000 : undefined;
          return {
            outcome: "rejected",
            retryable: status === 408 || status === 429 || status >= 500,
            ...(after !== undefined ? { retry_after_ms: after } : {}),
            reason: `http_${status}`,
          };
        }
        // The app token could not be acquired: nothing reached Bot Connector. A refused credential
        // stays refused; an unreachable or failing token endpoint may recover.
        if (!posted || isTokenFailure(error)) {
          const code = String((error as { errorCode?: unknown }).errorCode ?? "");
          return {
            outcome: "rejected",
            retryable: !/invalid_client|unauthorized_client|invalid_request/.test(code),
            reason: code && /^[a-z_]{1,60}$/.test(code) ? `token_unavailable: ${code}` : "token_unavailable",
          };
        }
        if (errorCode(error) === "ECONNREFUSED")
          return { outcome: "rejected", retryable: true, reason: "not sent: ECONNREFUSED" };
        return { outcome: "ambiguous", reason: "transport_interrupted" };
      }
    },
  };
}

class MissingAcknowledgement extends Error {
  constructor() {
    super("Bot Connector answered without a resource id");
    this.name = "MissingAcknowledgement";
  }
}
