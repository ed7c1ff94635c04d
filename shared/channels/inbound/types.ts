/**
 * The channel-neutral records of the inbound conversation path (spec operator-console.md §2.4):
 * what a chat platform's adapter hands the pipeline (a {@link ChannelInboundTurn}), what the
 * pipeline hands back for the adapter to post (a {@link ChannelOutboundResponse}), the adapter's
 * acknowledgement ({@link ChannelDeliveryReceipt}) and a progress snapshot
 * ({@link ChannelProgressUpdate}). Adapters translate wire format into these and back; they never
 * judge (spec §1 item 5, layer 3).
 *
 * The coordinator's own `InboundTurn` / `OutboundResponse` (`shared/console/coordinator`) are the
 * turn and reply *after* the sender is resolved to a principal; the records here are the same turn
 * and reply as a channel carries them, before resolution and after rendering.
 */

export { CHANNEL_TRUNCATED, UPSTREAM_TRUNCATED } from "../../notify/output-markers.js";

/** The conversation channel kinds (chat platform A = Teams, chat platform B = Slack). */
export const CHANNEL_KINDS = ["platform_a", "platform_b"] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

/** Sender access per channel (spec §5 item 8). */
export const SENDER_ACCESS_MODES = ["disabled", "allowlist", "pairing"] as const;
export type SenderAccessMode = (typeof SENDER_ACCESS_MODES)[number];

/**
 * How the channel may take an A1 (approval) decision (spec §5 items 4–6):
 * - `sso`: an authenticated round trip through the API (chat platform A, same tenant);
 * - `browser`: the decision bounces to the console in a browser for re-authentication (chat platform B);
 * - `denied`: no approvals from this sender at all (chat platform A guest tenant).
 */
export type A1Path = "sso" | "browser" | "denied";

/**
 * An attachment as evidence, never an instruction (spec §5 item 6): bounded metadata and the
 * vendor's opaque id only. Download URLs are dropped by the adapter; a server-owned fetcher resolves
 * the id and checks byte count and SHA-256 before any use.
 */
export interface AttachmentRef {
  /** The vendor's opaque file id (Slack `F…`, a Teams attachment id). */
  vendor_id: string;
  /** File name as given, bounded; shown as data, never followed. */
  name: string;
  media_type: string;
  size_bytes: number;
  /** SHA-256 (hex) when the vendor states one; the fetcher checks it. */
  sha256?: string;
}

/** The vendor-neutral turn a channel adapter produces (spec §2.4 InboundTurn as carried by a channel). */
export interface ChannelInboundTurn {
  /**
   * The vendor's unique id of this delivery (Slack `event_id` or `trigger_id`, a Teams activity
   * id): the channel queue accepts it once and answers it once.
   */
  turn_id: string;
  channel: ChannelKind;
  sender: {
    /** The vendor's user id (Slack `U…`, Teams `from.aadObjectId`), never shown to the coordinator. */
    vendor_user_id: string;
    /** The sender's verified tenant (Teams) or workspace (Slack team id). */
    tenant_id: string;
    /** A guest of another tenant (A2–A4 only). */
    guest: boolean;
    display_name?: string;
  };
  /** Where the reply goes: the conversation (channel) and optional thread. */
  conversation: { id: string; thread_id?: string };
  /** A typed message, a slash command (`/svc …`) or an interactive action (a button). */
  input: "message" | "command" | "action";
  /** The text as typed (untrusted; bounded by the adapter). A slash command's text starts with `/svc`. */
  text: string;
  attachments: AttachmentRef[];
  a1: A1Path;
  /** RFC 3339: when the adapter accepted the delivery. */
  received_at: string;
  /**
   * Adapter-owned reply addressing (for example a Teams service URL), opaque to the core and
   * bounded: at most 8 entries of at most 512 characters; no URL the vendor's payload chose is
   * followed by the core.
   */
  reply_context: Record<string, string>;
}

/** An entry of the activity sequence of a reply (spec §2.4 Activity entry and rules 1–5). */
export interface ChannelActivity {
  kind: "handoff" | "observed_execution";
  /** Canonical server queries are `query`; only recorded process calls are `command` (rule 1). */
  input_kind: "query" | "command";
  /** The sanitized command: the tool name and placeholder-only arguments, never real argv. */
  command: string;
  /** A safe result summary (secret-scanned, bounded). */
  result_summary: string;
  status: string;
  authority: string;
  started_at: string;
  finished_at?: string;
}

/** The one rich operation a reply may carry (a card in A, blocks in B). */
export type RichOperation =
  | { kind: "approval_request"; approval_id: string }
  | { kind: "approval_bounce"; approval_id: string; console_url: string }
  | { kind: "pairing_challenge"; expires_at: string };

/** The vendor-neutral reply (spec §2.4 OutboundResponse as carried by a channel). */
export interface ChannelOutboundResponse {
  /** Plain text (the adapter escapes for its markup and clips to its limits). */
  text: string;
  /** Reply in the sender's thread, or in the conversation itself. */
  thread_intent?: "in_thread" | "in_conversation";
  rich?: RichOperation;
  /** Vendor user ids to mention, bounded ({@link MENTION_LIMIT}). */
  mentions: string[];
  /** The ordered activity sequence (48,000-character budget, rule 4). */
  activities?: ChannelActivity[];
  /** Set when the evidence producer supplied partial output (rule 5). */
  upstream_truncated?: boolean;
  /** How the turn was answered (the coordinator's reply kinds plus the channel's own). */
  kind: string;
  request_id: string;
  audit_ids: string[];
}

/** What the adapter reports after posting (spec §2.4 ChannelDeliveryReceipt, §7 item 9). */
export type ChannelDeliveryReceipt =
  | {
      outcome: "acknowledged";
      operation: string;
      /** Slack `ts`, a Teams activity resource id. */
      vendor_message_id: string;
      text_degraded: boolean;
    }
  | { outcome: "rejected"; operation: string; retryable: boolean; reason: string }
  | { outcome: "ambiguous"; operation: string; reason: string };

/**
 * A cumulative progress snapshot (spec §2.4, §3 last row): revisions are consecutive from 0,
 * the activity count never decreases, and only the last revision may be confirmed — when its text
 * and activity count equal the persisted reply.
 */
export interface ChannelProgressUpdate {
  revision: number;
  activity_count: number;
  text: string;
  confirmed: boolean;
}

/** At most this many mentions in one reply. */
export const MENTION_LIMIT = 10;
/** The whole activity sequence's budget in characters (spec §2.4 rule 4, §8). */
export const ACTIVITY_SEQUENCE_BUDGET = 48_000;
/** Bounds of an inbound turn's text. */
export const TURN_TEXT_LIMIT = 8000;
export const ATTACHMENT_LIMIT = 10;
