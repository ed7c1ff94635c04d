import { normalizeObjectId, sameObjectId } from "../../auth/object-id.js";
import type { HttpResult } from "../../http/envelope.js";
import type { HttpRequestLike } from "../../http/validation.js";
import type { TeamsConversationReference } from "../../notify/channels/platform-a.js";
import type { ReferenceClaim, TeamsConversationStore } from "../../notify/channels/teams-conversations.js";
import type { ChannelQueue, TurnStarter } from "../inbound/channel-queue.js";
import type { BotServiceKeySet } from "./bot-service-keys.js";
import type { TeamsInboundConfig } from "./teams-config.js";
import { createTeamsMessagesHandler } from "./teams-messages.js";
import { teamsInboundTurn } from "./teams-turn.js";
import type { TeamsSsoDecider } from "./teams-sso.js";
import { createTeamsVerifier, type VerifiedTeamsActivity } from "./teams-verifier.js";

/**
 * Chat platform A's inbound endpoint (`POST /api/messages`), transport-agnostic: the verifier
 * (token before body, then activity, tenant, sender; `teams-verifier.ts`), then the conversation
 * reference is kept for proactive notifications (table `teamsconversations`, read by the outbound
 * Teams channel), then a message activity becomes a turn in the channel queue. The request is
 * answered once the turn is durably queued (Bot Service waits at most 15 s); the turn then runs in
 * the background like Slack's (the queue's worker timer picks up whatever a crash leaves behind), and
 * its reply goes out through the Agents SDK (`teams-reply.ts`), registered as the channel's deliver.
 * Only an SSO invoke is answered in the response itself (Teams waits for its result).
 */

/** Where the conversation references of verified senders are kept (`createTeamsConversationStore`). */
export type ConversationReferenceSink = Pick<TeamsConversationStore, "save">;

/** How much a sender's reference counts: a configured binding over a pairing, then the home tenant over a guest. */
const claimRank = (claim: ReferenceClaim) =>
  (claim.source === "binding" ? 2 : 0) + (claim.trust === "same_tenant" ? 1 : 0);

/**
 * Whether `incoming` may replace the principal's stored reference (`stored`): the same sender
 * always (its newest conversation), otherwise only a sender that counts at least as much — a paired
 * sender (a guest's above all) never takes over the conversation of a sender the configuration binds
 * to the principal, while that binding still holds (`bindings`). A row without a claim (kept before
 * claims were) is replaced.
 */
export function replacesReference(
  incoming: ReferenceClaim,
  stored: ReferenceClaim | undefined,
  bindings: ReadonlyMap<string, string>,
  principal: string,
): boolean {
  if (!stored || sameObjectId(stored.sender, incoming.sender)) return true;
  const storedBound =
    stored.source === "binding" && sameObjectId(bindings.get(normalizeObjectId(stored.sender)), principal);
  if (stored.source === "binding" && !storedBound) return true;
  return claimRank(incoming) >= claimRank(stored);
}

/**
 * The reference a verified activity leaves for its principal: only a personal (1:1) conversation,
 * so a notification for one person never lands in a group chat or channel they once wrote in.
 */
export function conversationReferenceOf(verified: VerifiedTeamsActivity): TeamsConversationReference | undefined {
  const { activity } = verified;
  const type = activity.conversation.conversationType;
  if (type !== undefined && type !== "personal") return undefined;
  return {
    serviceUrl: verified.identity.serviceUrl,
    conversationId: activity.conversation.id,
    tenantId: verified.tenantId,
    userId: activity.from.id,
  };
}

export function createTeamsInbound(deps: {
  config: TeamsInboundConfig;
  keys: BotServiceKeySet;
  queue: ChannelQueue;
  /** Starts an admitted turn after the answer, unless the route passes its own. */
  start: TurnStarter;
  conversations: ConversationReferenceSink;
  /**
   * The principal an approver paired an unbound sender with (`SVC_PLATFORM_A_SENDER_ACCESS=pairing`;
   * sender access's `principalOf`), so a paired sender's personal conversation is kept like a bound
   * one's and notifications for that principal reach them in Teams. Without it only bound senders'.
   */
  pairedPrincipal?: (vendorUserId: string) => Promise<string | undefined>;
  /**
   * A1 decisions from the Teams card through SSO (`teams-sso.ts`): its `adaptiveCard/action`
   * invokes are answered in the HTTP response, not queued. Without it they are acknowledged only.
   */
  sso?: TeamsSsoDecider;
  /** The local profile: a Bot Connector on `http://127.0.0.1` may be a service URL. */
  allowLoopbackHttp?: boolean;
  now?: () => Date;
}) {
  const now = deps.now ?? (() => new Date());
  const verifier = createTeamsVerifier(deps.config, {
    keys: deps.keys,
    ...(deps.now ? { now: deps.now } : {}),
    ...(deps.allowLoopbackHttp ? { allowLoopbackHttp: true } : {}),
  });

  /** The canonical principal of a verified sender: its binding, else its approved pairing. */
  const principalOf = async (verified: VerifiedTeamsActivity): Promise<string | undefined> => {
    if (verified.principal) return verified.principal;
    const sender = verified.activity.from.aadObjectId;
    return sender && deps.pairedPrincipal ? deps.pairedPrincipal(normalizeObjectId(sender)) : undefined;
  };

  return {
    /**
     * Handles one request. Throws the domain errors the transport maps: 401 (token, service URL,
     * channel), 403 (tenant, sender), 400/413/422 (body), 429 (queue full: Bot Service retries).
     */
    handle(request: HttpRequestLike, start: TurnStarter = deps.start): Promise<HttpResult> {
      return createTeamsMessagesHandler({
        verifier,
        // Local profile only (start-up refuses the setting elsewhere; checked here again).
        ...(deps.config.localAnonymous && deps.allowLoopbackHttp ? { localAnonymous: true } : {}),
        accept: async (verified) => {
          const at = now();
          const reference = conversationReferenceOf(verified);
          // A bound sender's principal, or the one an approver paired it with; an unpaired sender
          // (pairing mode, waiting for an approver) has no principal to notify yet.
          // A token-less local activity proves nothing about its conversation: never kept.
          const principal = reference && !verified.anonymous ? await principalOf(verified) : undefined;
          const sender = verified.activity.from.aadObjectId;
          if (reference && principal && sender) {
            // A principal's notifications go to its bound sender's conversation before a paired one's.
            const claim: ReferenceClaim = {
              sender: normalizeObjectId(sender),
              source: verified.principal ? "binding" : "pairing",
              trust: verified.trust,
            };
            await deps.conversations.save(principal, reference, claim, (stored) =>
              replacesReference(claim, stored, deps.config.bindings, principal),
            );
          }
          // An invoke is answered in this response (Teams waits for it), so it never goes through the queue.
          if (deps.sso?.handles(verified)) return deps.sso.decide(verified);
          const turn = teamsInboundTurn(verified, at);
          // conversationUpdate, typing, reactions…: acknowledged, nothing to answer.
          if (!turn) return { status: 200, jsonBody: {} };
          const admitted = await deps.queue.enqueue(turn, at);
          // Answered now; the turn runs after the answer and replies through Bot Connector.
          if (admitted === "accepted") await start(turn);
          return { status: 200, jsonBody: {} };
        },
      })(request);
    },
  };
}
