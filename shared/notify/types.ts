/**
 * The notification contract (spec operator-console.md §1 item 6, §2.4): what the console and the
 * operations core hand to a {@link Notifier}, and what comes back. Channel adapters live in
 * `channels/`, the router that picks them in `router.ts`.
 */

/** Notification categories (spec §1 item 6): A1 human approval, A2 operational alert, A3 chat command, A4 digest. */
export type NotificationCategory = "A1" | "A2" | "A3" | "A4";

export const NOTIFICATION_CATEGORIES = ["A1", "A2", "A3", "A4"] as const satisfies readonly NotificationCategory[];

/** One message to one recipient (spec §2.4 NotificationMessage). A1 bodies carry only the opaque approval id, never a decision. */
export interface Notification {
  category: NotificationCategory;
  /** `approval.request`, `approval.reminder`, `break_glass.page`, … */
  template_key: string;
  /** The recipient's directory object id (or `operational` for a channel's configured audience). */
  recipient: string;
  title: string;
  body_markdown: string;
  correlation_id: string;
  audit_id?: string;
  /** Idempotent send: a second send with the same key records nothing new and returns the first receipt. */
  idempotency_key: string;
  /** The matrix route (`hil_approval`, `operational_alert`, …); unset, the category's default route. */
  route?: string;
  /** The alert's severity where it has one (paging and SMS carry it). */
  severity?: "critical" | "high" | "medium" | "low" | "info";
  /** The runbook a responder opens; mandatory for paging (spec §8). */
  runbook_url?: string;
  /** A link into the console (HTTPS), e.g. the incident. */
  console_url?: string;
  /**
   * `first` (default): the route's first channel that acknowledges; `all`: every channel of the
   * route (the kill switch's announcement on all operational channels, break-glass pages).
   */
  fan_out?: "first" | "all";
  /**
   * The emitter accepts digest delivery: an A2 message of severity `low` or `info` on a route with
   * `low_severity_digest` is batched into that digest instead of sent on its own (docs/notifications.md).
   */
  batchable?: boolean;
  /** Typed template parameters; scanned for secrets like the body. */
  params?: Readonly<Record<string, string | number | boolean>>;
}

/**
 * The outcome of one channel's delivery (spec §3, §7 item 9): `delivered` only with the vendor's
 * acknowledgement; `definitive_failure` after an HTTP rejection (within the bounded retry);
 * `ambiguous` when the transport was cut or the acknowledgement was missing or malformed — never
 * retried automatically, since the vendor may have shown it.
 */
export type DeliveryState = "delivered" | "definitive_failure" | "ambiguous";

/** One channel's receipt (spec §2.4 ChannelDeliveryReceipt). */
export interface ChannelDeliveryReceipt {
  /** The channel id from the matrix. */
  channel: string;
  /** The channel kind (`email`, `webhook`, `paging`, `platform_b`, …). */
  kind: string;
  /** The requested operation (`chat.postMessage`, `enqueue`, `smtp.send`, …). */
  operation: string;
  state: DeliveryState;
  /** The vendor's acknowledgement (message id, `ts`, `dedup_key`, created activity id). */
  vendor_message_id?: string;
  /** True when the adapter had to shorten or flatten the text to the vendor's limits. */
  text_degraded: boolean;
  attempts: number;
  /** A short reason on failure: never a secret, a URL with credentials or a raw vendor body. */
  reason?: string;
  at: string;
}

/** The notifier's acknowledgement: `confirmed` only when a channel acknowledged delivery. */
export interface DeliveryReceipt {
  delivery_id: string;
  confirmed: boolean;
  /** The channel that confirmed (or the last tried). */
  channel: string;
  at: string;
  /** The message's overall state; absent from notifiers that only confirm. */
  state?: DeliveryState;
  /** Every channel attempted, in order. */
  channels?: ChannelDeliveryReceipt[];
}

/** Where the console's notifications go: the router over the channel adapters, or the outbox alone in tests. */
export interface Notifier {
  send(message: Notification): Promise<DeliveryReceipt>;
}
