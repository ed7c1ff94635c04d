import { randomUUID } from "node:crypto";
import { isStatus, packText, unpackText } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";

/** Notification categories (spec §1 item 6): A1 human approval, A2 operational alert, A3 chat command, A4 digest. */
export type NotificationCategory = "A1" | "A2" | "A3" | "A4";

/** One message to one recipient. A1 bodies carry only the opaque approval id, never a decision. */
export interface Notification {
  category: NotificationCategory;
  /** `approval.request`, `approval.reminder`, `break_glass.page`, … */
  template_key: string;
  /** The recipient's directory object id. */
  recipient: string;
  title: string;
  body_markdown: string;
  correlation_id: string;
  audit_id?: string;
  /** Idempotent send: a second send with the same key records nothing new and returns the first receipt. */
  idempotency_key: string;
}

/** The notifier's acknowledgement: `confirmed` only when the channel confirmed delivery. */
export interface DeliveryReceipt {
  delivery_id: string;
  confirmed: boolean;
  channel: string;
  at: string;
}

/** Where the console's notifications go; channel adapters implement it in the next issue. */
export interface Notifier {
  send(message: Notification): Promise<DeliveryReceipt>;
}

/** A delivery as the outbox recorded it. */
export interface OutboxEntry extends Notification {
  delivery_id: string;
  at: string;
}

export const OUTBOX_TABLE = "outbox";

/**
 * The local notifier: records each delivery in the `outbox` table, where tests and the CLI read
 * it. Recording is the delivery here, so it confirms; sends are idempotent by key.
 */
export function createOutboxNotifier(
  source: TableSource,
  options: { now?: () => Date } = {},
): Notifier & { list(): Promise<OutboxEntry[]> } {
  const table = tableOpener(source, OUTBOX_TABLE);
  const now = options.now ?? (() => new Date());
  const rowKeyOf = (key: string) => Buffer.from(key).toString("base64url").slice(0, 500);
  return {
    async send(message) {
      const entry: OutboxEntry = { ...message, delivery_id: randomUUID(), at: now().toISOString() };
      const client = await table();
      try {
        await client.createEntity({
          partitionKey: "o",
          rowKey: rowKeyOf(message.idempotency_key),
          at: entry.at,
          ...packText("doc", JSON.stringify(entry)),
        });
        return { delivery_id: entry.delivery_id, confirmed: true, channel: "outbox", at: entry.at };
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const first = JSON.parse(
          unpackText(await client.getEntity<Record<string, unknown>>("o", rowKeyOf(message.idempotency_key)), "doc"),
        ) as OutboxEntry;
        return { delivery_id: first.delivery_id, confirmed: true, channel: "outbox", at: first.at };
      }
    },
    async list() {
      const out: OutboxEntry[] = [];
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: "PartitionKey eq 'o'" },
      }))
        out.push(JSON.parse(unpackText(e, "doc")) as OutboxEntry);
      return out.sort((a, b) => a.at.localeCompare(b.at));
    },
  };
}
