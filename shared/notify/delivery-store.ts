import { createHash } from "node:crypto";
import { isStatus, packText, unpackText } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";
import type { ChannelDeliveryReceipt, NotificationCategory } from "./types.js";

/**
 * One channel's delivery of one message, shared by every host and kept across restarts (table
 * `notifydeliveries`). A row is claimed (`sending`) before the first vendor call and finished with
 * the channel's receipt, so a message acknowledged once is never sent again, and a claim a crash
 * left unfinished is recorded `ambiguous` instead of being sent a second time.
 */
export interface DeliveryRecord {
  key: string;
  channel: string;
  kind: string;
  category: NotificationCategory;
  template_key: string;
  correlation_id: string;
  audit_id?: string;
  recipient: string;
  title: string;
  state: "sending" | ChannelDeliveryReceipt["state"];
  claimed_at: string;
  receipt?: ChannelDeliveryReceipt;
}

export const DELIVERY_TABLE = "notifydeliveries";

export interface DeliveryStore {
  /** Claims the row; false when it exists (then {@link get} reads it). */
  claim(record: DeliveryRecord): Promise<boolean>;
  get(key: string): Promise<DeliveryRecord | undefined>;
  /** Records the channel's final receipt (a final state never reverts). */
  finish(key: string, receipt: ChannelDeliveryReceipt): Promise<void>;
  /** The most recent deliveries first (at most `limit`). */
  listRecent(limit?: number): Promise<DeliveryRecord[]>;
}

/** The row key of a delivery: opaque, the same on every host. */
export function deliveryKey(parts: readonly string[]): string {
  return createHash("sha256").update(parts.join("\u0000")).digest("hex");
}

/** The delivery store over Table storage. */
export function createDeliveryStore(source: TableSource): DeliveryStore {
  const table = tableOpener(source, DELIVERY_TABLE);
  const toEntity = (r: DeliveryRecord) => ({
    partitionKey: "d",
    rowKey: r.key,
    state: r.state,
    claimed_at: r.claimed_at,
    ...packText("doc", JSON.stringify(r)),
  });
  const fromEntity = (e: Record<string, unknown>) => JSON.parse(unpackText(e, "doc")) as DeliveryRecord;
  return {
    async claim(record) {
      try {
        await (await table()).createEntity(toEntity(record));
        return true;
      } catch (error) {
        if (isStatus(error, 409)) return false;
        throw error;
      }
    },
    async get(key) {
      try {
        return fromEntity(await (await table()).getEntity<Record<string, unknown>>("d", key));
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
    },
    async finish(key, receipt) {
      const client = await table();
      const entity = await client.getEntity<Record<string, unknown>>("d", key);
      const record = fromEntity(entity);
      if (record.state !== "sending") return;
      // Conditional on the claim's etag: a final state written by another host wins.
      await client
        .updateEntity(toEntity({ ...record, state: receipt.state, receipt }), "Replace", {
          etag: entity.etag as string,
        })
        .catch((error: unknown) => {
          if (!isStatus(error, 412)) throw error;
        });
    },
    async listRecent(limit = 50) {
      const out: DeliveryRecord[] = [];
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: "PartitionKey eq 'd'" },
      }))
        out.push(fromEntity(e));
      return out.sort((a, b) => b.claimed_at.localeCompare(a.claimed_at)).slice(0, limit);
    },
  };
}
