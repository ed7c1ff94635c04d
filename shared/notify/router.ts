import { randomUUID } from "node:crypto";
import type { AuditActor, AuditLog } from "../ops/audit.js";
import { type DeliveryRecord, type DeliveryStore, deliveryKey } from "./delivery-store.js";
import {
  CHANNEL_KINDS,
  type ChannelConfig,
  type ChannelKind,
  defaultRouteFor,
  type NotificationMatrix,
  type RouteConfig,
  TRUST_TIERS,
} from "./matrix.js";
import { scanOutbound } from "./outbound-scan.js";
import { translator } from "./localize.js";
import type { ChannelDeliveryReceipt, DeliveryReceipt, DeliveryState, Notification, Notifier } from "./types.js";

/** A message as a channel receives it: scanned, with the channel's locale. */
export interface OutboundMessage extends Notification {
  locale: "en" | "ko";
}

/** What one vendor call came to. */
export type AttemptOutcome =
  /** The vendor acknowledged (its message id, `ts`, `dedup_key`, …). */
  | { outcome: "acknowledged"; vendor_message_id: string; text_degraded?: boolean }
  /** The vendor answered with a rejection; `retryable` for 429/5xx (with its Retry-After), not for other 4xx. */
  | { outcome: "rejected"; retryable: boolean; retry_after_ms?: number; reason: string }
  /** The request may have reached the vendor: cut transport, time-out, missing or malformed acknowledgement. */
  | { outcome: "ambiguous"; reason: string };

/** One channel kind's adapter over its vendor's client library (`channels/*`). */
export interface ChannelAdapter {
  readonly kind: ChannelKind;
  /** The vendor operation a receipt names (`chat.postMessage`, `enqueue`, `smtp.send`, …). */
  readonly operation: string;
  send(
    message: OutboundMessage,
    context: { signal: AbortSignal; attempt: number; messageId: string },
  ): Promise<AttemptOutcome>;
}

export interface RouterDependencies {
  matrix: NotificationMatrix;
  /** Registered adapters by channel id (a channel whose settings are present). */
  channels: ReadonlyMap<string, ChannelAdapter>;
  deliveries: DeliveryStore;
  audit: AuditLog;
  /** True while the kill switch holds A1 delivery (spec §8). */
  a1Held?: () => Promise<boolean>;
  /** Records each message's overall receipt (the outbox, as the audit of deliveries). */
  record?: (message: Notification, receipt: DeliveryReceipt) => Promise<void>;
  now?: () => Date;
  /** Waits between attempts (tests pass one that only records). */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  log?: (message: string, fields: Record<string, unknown>) => void;
}

/** How one run of the router treats a delivery a previous run left claimed and unfinished. */
export interface DeliverOptions {
  /**
   * True when this run took the message over from a holder known to be gone (the durable queue's
   * lease ran out): its unfinished claims are recorded `ambiguous` (`interrupted_send`) at once.
   * Otherwise only a claim older than the channel's whole retry budget is; a younger one is
   * in flight on another host.
   */
  resumed?: boolean;
}

/** The router: {@link Notifier.send}, and {@link NotificationRouter.deliver} for the durable queue's worker. */
export interface NotificationRouter extends Notifier {
  deliver(message: Notification, options: DeliverOptions): Promise<DeliveryReceipt>;
}

/** How the router sends one message: to the first channel that acknowledges, or to every channel of the route. */
export type FanOut = NonNullable<Notification["fan_out"]>;

const system: AuditActor = { oid: "system", name: "notification router" };

const defaultSleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

/** The overall state of several channel receipts: delivered if any acknowledged, else ambiguous if any may have been shown. */
function overall(receipts: readonly ChannelDeliveryReceipt[]): DeliveryState {
  if (receipts.some((r) => r.state === "delivered")) return "delivered";
  if (receipts.some((r) => r.state === "ambiguous")) return "ambiguous";
  return "definitive_failure";
}

/**
 * The notification router (spec operator-console.md §5 item 6, §7 item 9, §8): a route's primary,
 * then its fallbacks in order, each within the channel's bounded retry budget, then its
 * `on_all_fail` route. A1 goes only to A1-capable channels. Each channel's send is idempotent by
 * (channel, correlation_id, audit_id, category, template) — per recipient for channels that address
 * one person — across hosts and restarts; a vendor acknowledgement is required for `delivered`; an
 * ambiguous attempt is never retried automatically; every attempt is audited. Bodies are re-scanned
 * for secrets before they leave.
 */
export function createNotificationRouter(deps: RouterDependencies): NotificationRouter {
  const now = deps.now ?? (() => new Date());
  const sleep = deps.sleep ?? defaultSleep;

  async function audit(
    message: Notification,
    channelId: string,
    kind: string,
    details: Record<string, unknown>,
    ok: boolean,
  ) {
    await deps.audit
      .record({
        actor: system,
        action: "notify.delivery_attempt",
        target: `${kind}:${channelId}`.slice(0, 500),
        outcome: ok ? "succeeded" : "failed",
        request_id: message.correlation_id.slice(0, 200),
        details: {
          category: message.category,
          template_key: message.template_key,
          correlation_id: message.correlation_id,
          ...(message.audit_id ? { message_audit_id: message.audit_id } : {}),
          ...details,
        },
      })
      .catch((error: unknown) =>
        deps.log?.("a delivery attempt could not be audited", {
          channel: channelId,
          error: error instanceof Error ? error.message : String(error),
        }),
      );
  }

  async function deliverOn(
    channelId: string,
    channel: ChannelConfig,
    adapter: ChannelAdapter,
    message: OutboundMessage,
    options: DeliverOptions,
  ): Promise<ChannelDeliveryReceipt> {
    const perRecipient = CHANNEL_KINDS[channel.kind].per_recipient;
    const key = deliveryKey([
      channelId,
      message.correlation_id,
      message.audit_id ?? "",
      message.category,
      message.template_key,
      ...(perRecipient ? [message.recipient, message.idempotency_key] : []),
    ]);
    const receipt = (state: DeliveryState, attempts: number, extra: Partial<ChannelDeliveryReceipt> = {}) => ({
      channel: channelId,
      kind: channel.kind,
      operation: adapter.operation,
      state,
      text_degraded: false,
      attempts,
      at: now().toISOString(),
      ...extra,
    });
    const record: DeliveryRecord = {
      key,
      channel: channelId,
      kind: channel.kind,
      category: message.category,
      template_key: message.template_key,
      correlation_id: message.correlation_id,
      ...(message.audit_id ? { audit_id: message.audit_id } : {}),
      recipient: perRecipient ? message.recipient : "operational",
      title: message.title.slice(0, 200),
      state: "sending",
      claimed_at: now().toISOString(),
    };
    if (!(await deps.deliveries.claim(record))) {
      const existing = await deps.deliveries.get(key);
      if (existing?.receipt) return existing.receipt;
      // Claimed and never finished: a host died mid-send or another is sending now. The vendor may
      // have shown it, so it is ambiguous, and not sent again (spec §3).
      const stale =
        existing &&
        (options.resumed === true ||
          now().getTime() - Date.parse(existing.claimed_at) >
            channel.timeout_ms * channel.retry.max_attempts + channel.retry.max_backoff_ms);
      const r = receipt("ambiguous", 0, { reason: stale ? "interrupted_send" : "in_flight_elsewhere" });
      if (stale) {
        await deps.deliveries.finish(key, r);
        await audit(message, channelId, channel.kind, { attempt: 0, state: "ambiguous", reason: r.reason }, false);
      }
      return r;
    }
    let last: ChannelDeliveryReceipt = receipt("definitive_failure", 0, { reason: "no_attempt" });
    for (let attempt = 1; attempt <= channel.retry.max_attempts; attempt++) {
      const signal = AbortSignal.timeout(channel.timeout_ms);
      let outcome: AttemptOutcome;
      try {
        outcome = await adapter.send(message, { signal, attempt, messageId: key });
      } catch (error) {
        // An adapter that threw may have reached the vendor (it is a bug or a cut transport).
        outcome = {
          outcome: "ambiguous",
          reason: signal.aborted ? "timeout" : `adapter_error: ${error instanceof Error ? error.name : "unknown"}`,
        };
      }
      if (outcome.outcome === "acknowledged") {
        last = receipt("delivered", attempt, {
          vendor_message_id: outcome.vendor_message_id,
          text_degraded: outcome.text_degraded ?? false,
        });
        await audit(
          message,
          channelId,
          channel.kind,
          { attempt, state: "delivered", vendor_message_id: outcome.vendor_message_id },
          true,
        );
        break;
      }
      if (outcome.outcome === "ambiguous") {
        last = receipt("ambiguous", attempt, { reason: outcome.reason.slice(0, 200) });
        await audit(message, channelId, channel.kind, { attempt, state: "ambiguous", reason: last.reason }, false);
        break;
      }
      const final = !outcome.retryable || attempt === channel.retry.max_attempts;
      const backoff = Math.min(
        outcome.retry_after_ms ?? channel.retry.initial_backoff_ms * 2 ** (attempt - 1),
        channel.retry.max_backoff_ms,
      );
      // A vendor asking to wait longer than the budget allows: give up here and let the fallback try.
      const tooLong = outcome.retry_after_ms !== undefined && outcome.retry_after_ms > channel.retry.max_backoff_ms;
      last = receipt("definitive_failure", attempt, { reason: outcome.reason.slice(0, 200) });
      await audit(
        message,
        channelId,
        channel.kind,
        { attempt, state: final || tooLong ? "definitive_failure" : "retrying", reason: last.reason },
        false,
      );
      if (final || tooLong) break;
      await sleep(backoff);
    }
    await deps.deliveries.finish(key, last);
    return last;
  }

  async function deliver(input: Notification, options: DeliverOptions): Promise<DeliveryReceipt> {
    const fanOut: FanOut = input.fan_out ?? "first";
    const { fan_out: _, ...message } = input;
    const receipts: ChannelDeliveryReceipt[] = [];
    const refuse = async (reason: string): Promise<DeliveryReceipt> => {
      const r: DeliveryReceipt = {
        delivery_id: randomUUID(),
        confirmed: false,
        channel: "none",
        at: now().toISOString(),
        state: "definitive_failure",
        channels: [],
      };
      await audit(message, "router", "router", { attempt: 0, state: "definitive_failure", reason }, false);
      await deps.record?.(message, r);
      return r;
    };
    if (message.category === "A1" && (await deps.a1Held?.())) return refuse("kill_switch_on");
    // Scanned once, before any channel sees it: the title, the body and every template parameter.
    let redactions = 0;
    const scan = (text: string) => {
      const s = scanOutbound(text);
      redactions += s.redacted;
      return s.text;
    };
    const scanned: Notification = {
      ...message,
      title: scan(message.title),
      body_markdown: scan(message.body_markdown),
      ...(message.params
        ? {
            params: Object.fromEntries(
              Object.entries(message.params).map(([k, v]) => [k, typeof v === "string" ? scan(v) : v]),
            ),
          }
        : {}),
    };
    if (redactions > 0)
      deps.log?.("secrets redacted from an outbound message", {
        template_key: message.template_key,
        correlation_id: message.correlation_id,
        redactions,
      });
    const visited = new Set<string>();
    /** Another sender has this very message on a channel right now: it, not this duplicate, falls back if that fails. */
    let inFlightElsewhere = false;
    let routeName: string | undefined = message.route ?? defaultRouteFor(deps.matrix, message.category);
    while (routeName !== undefined && !visited.has(routeName)) {
      visited.add(routeName);
      const route: RouteConfig | undefined = deps.matrix.routes[routeName];
      if (!route) return refuse(`unknown_route: ${routeName}`);
      if (TRUST_TIERS[route.trust_tier] !== message.category)
        return refuse(`category ${message.category} does not match route ${routeName} (${route.trust_tier})`);
      for (const id of [route.primary, ...route.fallback]) {
        const channel = deps.matrix.channels[id];
        const adapter = deps.channels.get(id);
        // Not registered (its settings are absent), or not allowed this category (A1 never falls to email).
        if (!channel || !adapter || !channel.categories.includes(message.category)) continue;
        if (!(CHANNEL_KINDS[channel.kind].categories as readonly string[]).includes(message.category)) continue;
        const r = await deliverOn(
          id,
          channel,
          adapter,
          { ...translator().localize(scanned, channel.locale), locale: channel.locale },
          options,
        );
        receipts.push(r);
        if (r.state === "delivered" && fanOut === "first") break;
        if (r.reason === "in_flight_elsewhere" && fanOut === "first") {
          inFlightElsewhere = true;
          break;
        }
      }
      if (inFlightElsewhere || receipts.some((r) => r.state === "delivered")) break;
      routeName = route.on_all_fail;
    }
    const state = overall(receipts);
    const confirmedBy = receipts.find((r) => r.state === "delivered");
    const result: DeliveryReceipt = {
      delivery_id: confirmedBy?.vendor_message_id ?? randomUUID(),
      confirmed: state === "delivered",
      channel: confirmedBy?.channel ?? receipts.at(-1)?.channel ?? "none",
      at: now().toISOString(),
      state,
      channels: receipts,
    };
    await deps.record?.(message, result);
    return result;
  }

  return { send: (message) => deliver(message, {}), deliver };
}
