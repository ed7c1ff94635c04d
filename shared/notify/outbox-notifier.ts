import { randomUUID } from "node:crypto";
import { isStatus, packText, unpackText } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";
import type { DeliveryReceipt, Notification, Notifier } from "./types.js";

/** A delivery as the outbox recorded it. */
export interface OutboxEntry extends Notification {
  delivery_id: string;
  at: string;
  /** The router's overall state and per-channel receipts (absent from the confirming test notifier). */
  state?: DeliveryReceipt["state"];
  channels?: DeliveryReceipt["channels"];
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

/**
 * The outbox as the audit of deliveries: the router records each message with its overall receipt
 * here (one row per idempotency key, the latest receipt winning). It confirms nothing itself.
 */
export function createOutboxRecorder(source: TableSource) {
  const table = tableOpener(source, OUTBOX_TABLE);
  const rowKeyOf = (key: string) => Buffer.from(key).toString("base64url").slice(0, 500);
  return {
    async record(message: Notification, receipt: DeliveryReceipt): Promise<void> {
      const entry: OutboxEntry = {
        ...message,
        delivery_id: receipt.delivery_id,
        at: receipt.at,
        ...(receipt.state ? { state: receipt.state } : {}),
        ...(receipt.channels ? { channels: receipt.channels } : {}),
      };
      await (await table()).upsertEntity(
        {
          partitionKey: "o",
          rowKey: rowKeyOf(message.idempotency_key),
          at: entry.at,
          ...packText("doc", JSON.stringify(entry)),
        },
        "Replace",
      );
    },
    async list(): Promise<OutboxEntry[]> {
      const out: OutboxEntry[] = [];
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: "PartitionKey eq 'o'" },
      }))
        out.push(JSON.parse(unpackText(e, "doc")) as OutboxEntry);
      return out.sort((a, b) => a.at.localeCompare(b.at));
    },
  };
}
