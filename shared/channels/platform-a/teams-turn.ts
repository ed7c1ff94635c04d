import { createHash } from "node:crypto";
import { normalizeObjectId } from "../../auth/object-id.js";
import type { ChannelInboundTurn } from "../inbound/types.js";
import type { VerifiedTeamsActivity } from "./teams-verifier.js";

/** A Teams text message is at most about 28 KB; the core gets at most this many characters. */
export const TEAMS_TEXT_LIMIT = 8_000;
const APPROVAL_ID = /^apr_[0-9a-f]{24}$/;

/**
 * Teams' `<at>Name</at>` mention tags and the HTML Teams wraps channel messages in, as plain text:
 * the tags are dropped (their content stays as data), entities decoded once.
 */
export function plainTeamsText(text: string): string {
  return text
    .replace(/<at>[^<]{0,200}<\/at>/gi, " ")
    .replace(/<[^>]{0,500}>/g, "")
    .replace(/&nbsp;/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();
}

/**
 * A verified Teams activity as the channel-neutral {@link ChannelInboundTurn} the inbound core
 * (`handleInboundTurn`, shared/channels/inbound) takes. Only a message activity is a turn. An
 * adaptive-card submit carrying an approval id becomes `approve_hil approval_id=…` text, so the
 * core routes it by the channel's A1 path: a guest is refused, a same-tenant user is bounced to the
 * console (`browser`) — never a decision taken from a card payload (spec §5 item 5). A decision with
 * the user's SSO token is the card's `Action.Execute` invoke, answered by `teams-sso.ts`. Attachments keep bounded metadata only; their URLs are dropped.
 */
export function teamsInboundTurn(verified: VerifiedTeamsActivity, receivedAt: Date): ChannelInboundTurn | undefined {
  const { activity } = verified;
  if (activity.type !== "message") return undefined;
  const value = activity.value as { approval_id?: unknown; decision?: unknown } | undefined;
  const approvalId =
    value && typeof value === "object" && typeof value.approval_id === "string" && APPROVAL_ID.test(value.approval_id)
      ? value.approval_id
      : undefined;
  const typed = plainTeamsText(activity.text ?? "").slice(0, TEAMS_TEXT_LIMIT);
  const text = approvalId
    ? `approve_hil approval_id=${approvalId} decision=${value?.decision === "reject" ? "reject" : "approve"}`
    : typed;
  const attachments = (activity.attachments ?? [])
    .filter((a) => typeof (a as { contentType?: unknown }).contentType === "string")
    .filter((a) => !String(a.contentType).startsWith("text/html"))
    .slice(0, 10)
    .flatMap((a) => {
      const raw = a as { contentType?: string; name?: unknown; content?: { uniqueId?: unknown; fileType?: unknown } };
      const id = typeof raw.content?.uniqueId === "string" ? raw.content.uniqueId : undefined;
      if (!id) return [];
      return [
        {
          vendor_id: id.slice(0, 200),
          name: typeof raw.name === "string" ? raw.name.slice(0, 255) : "attachment",
          media_type: String(raw.contentType).slice(0, 100),
          size_bytes: 0,
        },
      ];
    });
  return {
    turn_id:
      activity.id?.slice(0, 200) ??
      createHash("sha256")
        .update(`${activity.conversation.id}\u0000${activity.timestamp ?? ""}`)
        .digest("hex"),
    channel: "platform_a",
    sender: {
      // Normalized like the binding keys, so sender access finds the binding the verifier checked.
      vendor_user_id: activity.from.aadObjectId ? normalizeObjectId(activity.from.aadObjectId) : activity.from.id,
      tenant_id: verified.tenantId,
      guest: verified.trust === "guest",
      ...(activity.from.name ? { display_name: activity.from.name.slice(0, 100) } : {}),
    },
    conversation: {
      id: activity.conversation.id,
      ...(activity.replyToId ? { thread_id: activity.replyToId } : {}),
    },
    input: approvalId ? "action" : /^\s*\/svc\b/i.test(typed) ? "command" : "message",
    text,
    attachments,
    a1: verified.trust === "guest" ? "denied" : "browser",
    received_at: receivedAt.toISOString(),
    // Where the reply goes: the verified service URL (the token's claim), never one the payload chose.
    reply_context: {
      service_url: verified.identity.serviceUrl.slice(0, 512),
      conversation_id: activity.conversation.id.slice(0, 512),
      tenant_id: verified.tenantId,
      user_id: activity.from.id.slice(0, 512),
      ...(activity.id ? { activity_id: activity.id.slice(0, 256) } : {}),
      // A token-less local activity (the Agents Playground): its reply goes without an app token.
      ...(verified.anonymous ? { anonymous: "local" } : {}),
    },
  };
}
