import { QueueFullError } from "../errors.js";
import type { AuditLog } from "../ops/audit.js";
import { createDurableQueue, type QueueItemState, type QueueProcessor } from "../storage/durable-queue.js";
import type { TableSource } from "../storage/table-source.js";
import type { NotificationMatrix } from "./matrix.js";
import type { NotificationRouter } from "./router.js";
import type { DeliveryReceipt, Notification, Notifier } from "./types.js";

/**
 * Durable delivery (issue 25 router item 3): a message the notifier accepts is first admitted to
 * the notification queue (the durable queue of `shared/storage/durable-queue.ts`, table
 * `notifyqueue`), then delivered by the router at once on the same host. A host that dies after
 * accepting a message leaves it queued; whichever host drains next (the `notificationQueueTimer`,
 * or the next start) takes it over when its lease runs out and runs the router again. The router's
 * per-channel claims make that safe: a channel that already acknowledged is not called again, a
 * channel the dead host was calling is recorded `ambiguous` (never sent twice, spec §3), and a
 * channel it never reached is sent now. So each accepted message reaches each channel by at most
 * one vendor call, and none is lost silently.
 */

export const NOTIFY_QUEUE_TABLE = "notifyqueue";

/** Claims before a message is given up (each attempt is a whole router run; a crash costs one). */
export const NOTIFY_MAX_ATTEMPTS = 10;

interface QueuedNotification {
  message: Notification;
  accepted_at: string;
}

/** A message's identity in the queue: the router's idempotency key plus what makes a delivery distinct. */
export function notificationId(message: Notification): string {
  return JSON.stringify([
    "notify",
    message.idempotency_key,
    message.category,
    message.template_key,
    message.recipient,
    message.correlation_id,
    message.audit_id ?? "",
    message.route ?? "",
  ]);
}

/** Slots of the notification queue: messages accepted and not yet through the router. */
export const NOTIFY_QUEUE_CAPACITY = 1000;

/**
 * The queue's lease: the longest one router run may take on `matrix` (every channel, every
 * attempt timing out, every back-off at its maximum), at least one minute and at most five, so a
 * crashed host's messages go out within minutes. A host still sending past its lease cannot send
 * twice (each channel's claim is one insert); its channel is then recorded `ambiguous` by the host
 * that took over, the conservative state.
 */
export function notifyLeaseMs(matrix: NotificationMatrix): number {
  let total = 0;
  for (const channel of Object.values(matrix.channels))
    total += channel.retry.max_attempts * (channel.timeout_ms + channel.retry.max_backoff_ms);
  return Math.min(300_000, Math.max(60_000, total));
}

export interface DurableNotifierDependencies {
  router: NotificationRouter;
  tables: TableSource;
  matrix: NotificationMatrix;
  /** Slots of the queue (default {@link NOTIFY_QUEUE_CAPACITY}). */
  capacity?: number;
  /** Overrides {@link notifyLeaseMs} (tests). */
  leaseMs?: number;
  audit?: AuditLog;
  now?: () => Date;
  log?: (message: string, fields: Record<string, unknown>) => void;
}

export interface DurableNotifier extends Notifier {
  /** Delivers every message a crashed host left behind; returns how many were closed. */
  drain(): Promise<number>;
  /** Messages waiting or in progress. */
  depth(): Promise<number>;
  /** Where a message stands in the queue (undefined: never accepted). */
  stateOf(message: Notification): Promise<QueueItemState | undefined>;
}

export function createDurableNotifier(deps: DurableNotifierDependencies): DurableNotifier {
  const now = deps.now ?? (() => new Date());
  const queue = createDurableQueue<QueuedNotification>({
    tables: deps.tables,
    table: NOTIFY_QUEUE_TABLE,
    capacity: deps.capacity ?? NOTIFY_QUEUE_CAPACITY,
    leaseMs: deps.leaseMs ?? notifyLeaseMs(deps.matrix),
    maxAttempts: NOTIFY_MAX_ATTEMPTS,
    idOf: (item) => notificationId(item.message),
    name: "notification queue",
    onAbandon: async ({ message }) => {
      deps.log?.("notification_abandoned", {
        template_key: message.template_key,
        correlation_id: message.correlation_id,
        attempts: NOTIFY_MAX_ATTEMPTS,
      });
      await deps.audit
        ?.record({
          actor: { oid: "system", name: "notification router" },
          action: "notify.delivery_abandoned",
          target: `notification:${message.template_key}`.slice(0, 500),
          outcome: "failed",
          request_id: message.correlation_id.slice(0, 200),
          details: {
            category: message.category,
            template_key: message.template_key,
            correlation_id: message.correlation_id,
            attempts: NOTIFY_MAX_ATTEMPTS,
          },
        })
        .catch(() => undefined);
    },
  });
  const processor =
    (results?: Map<string, DeliveryReceipt>): QueueProcessor<QueuedNotification> =>
    async ({ message }, claim) => {
      // A second claim means the first holder's lease ran out (it died) or its run threw: its
      // unfinished channel claims are interrupted sends.
      const receipt = await deps.router.deliver(message, { resumed: claim.attempt > 1 });
      results?.set(notificationId(message), receipt);
    };

  return {
    async send(message) {
      const id = notificationId(message);
      let admitted: "accepted" | "duplicate";
      try {
        admitted = await queue.enqueue({ message, accepted_at: now().toISOString() }, now());
      } catch (error) {
        if (!(error instanceof QueueFullError)) throw error;
        // Not durable, but not dropped either: the router sends it now.
        deps.log?.("notification_queue_full", {
          template_key: message.template_key,
          capacity: deps.capacity ?? NOTIFY_QUEUE_CAPACITY,
        });
        return deps.router.send(message);
      }
      if (admitted === "accepted") {
        const results = new Map<string, DeliveryReceipt>();
        await queue.drain(processor(results), now, id);
        const receipt = results.get(id);
        if (receipt) return receipt;
      }
      // A duplicate (accepted before), or the queue kept it for a later drain (another worker holds
      // it, or this run threw): the router answers from the channels' recorded receipts, sending
      // only to a channel no host has claimed.
      return deps.router.send(message);
    },
    drain: () => queue.drain(processor(), now),
    depth: () => queue.depth(),
    stateOf: (message) => queue.stateOf(notificationId(message)),
  };
}
