import { z } from "zod";
import { ATTACHMENT_LIMIT, type AttachmentRef, type ChannelInboundTurn, TURN_TEXT_LIMIT } from "../inbound/types.js";

/**
 * Slack's inbound wire formats → a {@link ChannelInboundTurn} (layer 3: translation only). Three
 * payloads, each already signature-checked by the caller:
 *
 * - Events API (`POST /api/channels/slack/events`, JSON): the `url_verification` handshake, and
 *   `event_callback` with a `message` (direct message) or `app_mention` event. Messages from bots
 *   (including this app's own replies) and edits are ignored, so the bot never answers itself.
 * - Slash commands (`POST /api/channels/slack/commands`, form): `/svc <args>`.
 * - Interactivity (`POST /api/channels/slack/interactions`, form with a JSON `payload`): the
 *   approval button, which becomes an `approve_hil` turn that the pipeline bounces to the browser.
 *
 * Attachments keep bounded metadata and Slack's opaque file id; `url_private`, `permalink` and
 * every other URL are dropped (spec §5 item 6). `response_url` of commands and actions is dropped
 * too: replies go through the Web API with the bot token, never to a URL the payload chose.
 */

/** Slack's own ids (users, teams, channels, files): upper-case letters and digits. */
const slackId = z.string().regex(/^[A-Z0-9]{2,32}$/);
const ts = z.string().regex(/^\d{1,12}\.\d{1,9}$/);

const fileSchema = z.object({
  id: slackId,
  name: z.string().max(1000).optional(),
  mimetype: z.string().max(200).optional(),
  size: z.number().int().nonnegative().optional(),
});

const messageEvent = z.object({
  type: z.enum(["message", "app_mention"]),
  subtype: z.string().max(64).optional(),
  bot_id: z.string().max(64).optional(),
  user: slackId.optional(),
  text: z.string().max(40_000).optional(),
  channel: slackId,
  channel_type: z.string().max(32).optional(),
  ts,
  thread_ts: ts.optional(),
  files: z.array(fileSchema).max(100).optional(),
});

export const slackEventEnvelope = z.discriminatedUnion("type", [
  z.object({ type: z.literal("url_verification"), challenge: z.string().min(1).max(200) }),
  z.object({
    type: z.literal("event_callback"),
    team_id: slackId,
    event_id: z.string().regex(/^Ev[A-Z0-9]{4,40}$/),
    event: z.object({ type: z.string().max(64) }).loose(),
  }),
]);

export const slackCommandForm = z.object({
  command: z.string().max(64),
  text: z.string().max(TURN_TEXT_LIMIT).default(""),
  user_id: slackId,
  team_id: slackId,
  channel_id: slackId,
  trigger_id: z.string().regex(/^[0-9a-zA-Z.]{4,100}$/),
  user_name: z.string().max(200).optional(),
});

export const slackInteractionPayload = z.object({
  type: z.literal("block_actions"),
  user: z.object({ id: slackId, name: z.string().max(200).optional() }),
  team: z.object({ id: slackId }),
  channel: z.object({ id: slackId }),
  container: z.object({ message_ts: ts.optional(), thread_ts: ts.optional() }).optional(),
  trigger_id: z.string().regex(/^[0-9a-zA-Z.]{4,100}$/),
  actions: z
    .array(z.object({ action_id: z.string().max(255), value: z.string().max(2000).optional() }))
    .min(1)
    .max(5),
});

/** The action id of the approval button this app posts. */
export const APPROVAL_ACTION_ID = "approval_open";

/** A parse that did not yield a turn: the handshake, or a payload the channel does not answer. */
export type SlackInbound =
  | { kind: "url_verification"; challenge: string }
  | { kind: "ignored"; reason: string }
  | { kind: "turn"; turn: ChannelInboundTurn };

const bound = (text: string) => (text.length > TURN_TEXT_LIMIT ? text.slice(0, TURN_TEXT_LIMIT) : text);

/** Attachment metadata only: Slack's file id, a bounded name and type; every URL dropped. */
export function attachmentsOf(files: z.output<typeof fileSchema>[] | undefined): AttachmentRef[] {
  return (files ?? []).slice(0, ATTACHMENT_LIMIT).map((f) => ({
    vendor_id: f.id,
    name: (f.name ?? "").slice(0, 255),
    media_type: (f.mimetype ?? "application/octet-stream").slice(0, 100),
    size_bytes: f.size ?? 0,
  }));
}

/** An Events API body (JSON text, already verified). Throws a ZodError on a malformed envelope. */
export function parseSlackEvent(body: unknown, receivedAt: Date): SlackInbound {
  const envelope = slackEventEnvelope.parse(body);
  if (envelope.type === "url_verification") return { kind: "url_verification", challenge: envelope.challenge };
  const parsed = messageEvent.safeParse(envelope.event);
  if (!parsed.success) return { kind: "ignored", reason: `event ${envelope.event.type}` };
  const event = parsed.data;
  if (event.bot_id || !event.user) return { kind: "ignored", reason: "bot message" };
  if (event.subtype && event.subtype !== "file_share") return { kind: "ignored", reason: `subtype ${event.subtype}` };
  // A plain message is answered only in a direct conversation; in channels the app answers mentions.
  if (event.type === "message" && event.channel_type !== "im")
    return { kind: "ignored", reason: "not a direct message" };
  const text = (event.text ?? "").replace(/^\s*<@[A-Z0-9]+>\s*/, "");
  return {
    kind: "turn",
    turn: {
      turn_id: envelope.event_id,
      channel: "platform_b",
      sender: { vendor_user_id: event.user, tenant_id: envelope.team_id, guest: false },
      conversation: { id: event.channel, thread_id: event.thread_ts ?? event.ts },
      input: "message",
      text: bound(text),
      attachments: attachmentsOf(event.files),
      a1: "browser",
      received_at: receivedAt.toISOString(),
      reply_context: {},
    },
  };
}

/** A slash command form (already verified). Only `/svc` is this app's command. */
export function parseSlackCommand(form: URLSearchParams, receivedAt: Date): SlackInbound {
  const command = slackCommandForm.parse(Object.fromEntries(form));
  if (command.command !== "/svc") return { kind: "ignored", reason: "unknown command" };
  return {
    kind: "turn",
    turn: {
      turn_id: `cmd_${command.trigger_id}`,
      channel: "platform_b",
      sender: { vendor_user_id: command.user_id, tenant_id: command.team_id, guest: false },
      conversation: { id: command.channel_id },
      input: "command",
      text: bound(`/svc ${command.text}`.trim()),
      attachments: [],
      a1: "browser",
      received_at: receivedAt.toISOString(),
      reply_context: {},
    },
  };
}

/** An interactivity form (`payload=<json>`, already verified): only the approval button is a turn. */
export function parseSlackInteraction(form: URLSearchParams, receivedAt: Date): SlackInbound {
  const payload = slackInteractionPayload.parse(JSON.parse(form.get("payload") ?? "null"));
  const action = payload.actions.find((a) => a.action_id === APPROVAL_ACTION_ID);
  const approvalId = action?.value && /^apr_[0-9a-f]{24}$/.test(action.value) ? action.value : undefined;
  if (!approvalId) return { kind: "ignored", reason: "unknown action" };
  return {
    kind: "turn",
    turn: {
      turn_id: `act_${payload.trigger_id}`,
      channel: "platform_b",
      sender: { vendor_user_id: payload.user.id, tenant_id: payload.team.id, guest: false },
      conversation: {
        id: payload.channel.id,
        ...(payload.container?.thread_ts || payload.container?.message_ts
          ? { thread_id: payload.container.thread_ts ?? payload.container.message_ts }
          : {}),
      },
      input: "action",
      text: `approve_hil approval_id=${approvalId}`,
      attachments: [],
      a1: "browser",
      received_at: receivedAt.toISOString(),
      reply_context: {},
    },
  };
}
