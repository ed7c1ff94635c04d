import { createHash } from "node:crypto";
import { odata, type TableClient } from "@azure/data-tables";
import { QueueFullError } from "../errors.js";
import { type TableSource, tableOpener } from "./table-source.js";
import { isStatus, packText, unpackText } from "./table-text.js";

/**
 * A bounded, durable work queue in Table storage, shared by every host and kept across restarts:
 * an item accepted by {@link DurableQueue.enqueue} survives a crash of the host that accepted it
 * and is processed by whichever host drains next. The channel queue (inbound turns, issue 26) and
 * the notification queue (outbound messages, issue 25) are two instances.
 *
 * - Admission: the item's id (`idOf`) and the item itself, in one of `capacity` slots, are
 *   inserted in one transaction (so two hosts never share a slot, and a crash never leaves an id
 *   without its item); an id admitted before is a `duplicate` and does nothing. No free slot:
 *   {@link QueueFullError}, and nothing is recorded, so a retry is admitted later.
 * - Processing: a worker claims a slot with an ETag-checked lease; a lease that ran out (the host
 *   died) is claimed again, and the processor is told which attempt it is. An item the processor
 *   marked `delivering` (its guard) and found in that state again is closed `abandoned`, never
 *   processed twice; so is one past `maxAttempts` (then `onAbandon` runs, so nothing is dropped
 *   silently). Closing records the final state and frees the slot in one transaction.
 * - With `renewLease` the lease is renewed while the processor runs and checked (ETag) before the
 *   item is marked `delivering`: a long item is never run by two workers at once, and a worker
 *   that lost its claim does not deliver.
 */

export type QueueItemState = "queued" | "processing" | "delivering" | "done" | "abandoned";

interface SlotRow {
  seen_key: string;
  state: "queued" | "processing";
  lease_until: string;
  attempts: number;
}

/** What a processor learns about the claim it runs under. */
export interface QueueClaim {
  /** 1 on the first claim; more when a previous holder's lease ran out or its attempt threw. */
  attempt: number;
  /**
   * Marks the item `delivering`: a crash after this closes it `abandoned` instead of running it
   * again. With `renewLease`, it first checks that this worker still holds the claim and throws
   * {@link LeaseLostError} when another worker took the item over (then nothing may be delivered).
   */
  beforeDeliver(): Promise<void>;
}

export type QueueProcessor<T> = (item: T, claim: QueueClaim) => Promise<void>;

export interface DurableQueueOptions<T> {
  tables: TableSource;
  /** The table's name (one queue per table). */
  table: string;
  capacity: number;
  /** How long a claim holds before another worker may take the item over (default 60 s). */
  leaseMs?: number;
  /**
   * Renew the claim's lease every `leaseMs / 3` while the processor runs, and check it before the
   * item is marked `delivering` (a fencing check): an item whose processing outlives one lease is
   * not claimed again by another worker, and a worker that lost its lease never delivers.
   */
  renewLease?: boolean;
  /** Claims after which an item is abandoned (default 3). */
  maxAttempts?: number;
  /** The item's identity: a second item with the same id is a duplicate. */
  idOf: (item: T) => string;
  /** Named in the queue-full error (`the channel queue is full; retry later`). */
  name: string;
  /** Runs when an item is abandoned after `maxAttempts` claims (not for one abandoned while delivering). */
  onAbandon?: (item: T) => Promise<void>;
  /** Told when processing an item failed (it stays claimed: a later drain retries it once the lease runs out). */
  onError?: (error: unknown, item: T, attempt: number) => void;
  /** Told when an item is closed `abandoned` because a crash came while it was being delivered. */
  onAbandonedWhileDelivering?: (item: T) => void;
}

/** The claim was taken over by another worker (its lease ran out): this worker must not deliver. */
export class LeaseLostError extends Error {
  constructor() {
    super("the queue item's lease was taken over by another worker");
    this.name = "LeaseLostError";
  }
}

/** One partition holds both kinds of row, so admitting and closing are each one atomic transaction. */
const PARTITION = "q";
const SLOT = "slot_";
const SEEN = "seen_";
/** Rows written before admission became atomic kept the ids in their own partition. */
const LEGACY_SEEN_PARTITION = "seen";
/** Slot numbers have five digits (capacity at most 100,000). */
const MAX_CAPACITY = 100_000;
const SLOTS_FILTER = `PartitionKey eq '${PARTITION}' and RowKey ge '${SLOT}' and RowKey le '${SLOT}99999'`;

export function createDurableQueue<T>(options: DurableQueueOptions<T>) {
  const table = tableOpener(options.tables, options.table);
  const leaseMs = options.leaseMs ?? 60_000;
  const maxAttempts = options.maxAttempts ?? 3;
  if (!Number.isInteger(options.capacity) || options.capacity < 1 || options.capacity > MAX_CAPACITY)
    throw new RangeError(`the ${options.name}'s capacity must be 1..${MAX_CAPACITY}`);
  const seenKeyOf = (id: string) => createHash("sha256").update(id).digest("hex");

  async function seenState(t: TableClient, key: string): Promise<QueueItemState | undefined> {
    for (const [partition, rowKey] of [
      [PARTITION, `${SEEN}${key}`],
      [LEGACY_SEEN_PARTITION, key],
    ] as const) {
      try {
        return (await t.getEntity<{ state: QueueItemState }>(partition, rowKey)).state;
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
      }
    }
    return undefined;
  }
  const setSeen = (t: TableClient, key: string, state: QueueItemState, now: Date) =>
    t.upsertEntity({ partitionKey: PARTITION, rowKey: `${SEEN}${key}`, state, at: now.toISOString() }, "Merge");
  /** Records the final state and frees the slot in one transaction: a crash leaves both or neither. */
  const closeSlot = (t: TableClient, key: string, slotRowKey: string, state: "done" | "abandoned", now: Date) =>
    t.submitTransaction([
      ["upsert", { partitionKey: PARTITION, rowKey: `${SEEN}${key}`, state, at: now.toISOString() }, "Merge"],
      ["delete", { partitionKey: PARTITION, rowKey: slotRowKey }],
    ]);
  // Rows written before the queue was generalised keep the item in one `turn` property.
  const itemOf = (row: Record<string, unknown>): T =>
    JSON.parse(row.item_n !== undefined ? unpackText(row, "item") : String(row.turn)) as T;

  async function listSlots(t: TableClient) {
    const slots: (SlotRow & Record<string, unknown> & { rowKey: string; etag: string })[] = [];
    for await (const slot of t.listEntities<SlotRow>({ queryOptions: { filter: SLOTS_FILTER } }))
      slots.push(slot as SlotRow & Record<string, unknown> & { rowKey: string; etag: string });
    return slots;
  }

  return {
    capacity: options.capacity,

    /**
     * Admits an item durably; `duplicate` when its id was admitted before. The id and the slot are
     * written in one transaction, so a crash never leaves an id admitted without its item.
     */
    async enqueue(item: T, now: Date): Promise<"accepted" | "duplicate"> {
      const t = await table();
      const key = seenKeyOf(options.idOf(item));
      if ((await seenState(t, key)) !== undefined) return "duplicate";
      const packed = packText("item", JSON.stringify(item));
      const taken = new Set<string>();
      for await (const slot of t.listEntities({ queryOptions: { filter: SLOTS_FILTER, select: ["RowKey"] } }))
        taken.add(String(slot.rowKey));
      for (let i = 0; i < options.capacity; i++) {
        const rowKey = `${SLOT}${String(i).padStart(5, "0")}`;
        if (taken.has(rowKey)) continue;
        const slot: SlotRow = { seen_key: key, state: "queued", lease_until: now.toISOString(), attempts: 0 };
        try {
          await t.submitTransaction([
            ["create", { partitionKey: PARTITION, rowKey: `${SEEN}${key}`, state: "queued", at: now.toISOString() }],
            ["create", { partitionKey: PARTITION, rowKey, ...slot, ...packed }],
          ]);
          return "accepted";
        } catch (error) {
          if (!isStatus(error, 409)) throw error;
          // Either the id was admitted meanwhile (a concurrent duplicate) or another item took the slot.
          if ((await seenState(t, key)) !== undefined) return "duplicate";
        }
      }
      // Every slot taken, perhaps by this very id admitted meanwhile by a concurrent duplicate.
      if ((await seenState(t, key)) !== undefined) return "duplicate";
      throw new QueueFullError(`the ${options.name} is full; retry later`, 5);
    },

    /** The item's state by its id (undefined: never admitted). */
    async stateOf(id: string): Promise<QueueItemState | undefined> {
      return seenState(await table(), seenKeyOf(id));
    },

    /** Items waiting or in progress. */
    async depth(): Promise<number> {
      let n = 0;
      for await (const _ of (await table()).listEntities({
        queryOptions: { filter: SLOTS_FILTER, select: ["RowKey"] },
      }))
        n++;
      return n;
    },

    /**
     * Processes every claimable item (queued, or processing with an expired lease), oldest slot
     * first; `onlyId` restricts it to one item (the caller that just admitted it). Returns how
     * many items were closed.
     */
    async drain(process: QueueProcessor<T>, now: () => Date, onlyId?: string) {
      const t = await table();
      const onlyKey = onlyId !== undefined ? seenKeyOf(onlyId) : undefined;
      let closed = 0;
      for (const slot of await listSlots(t)) {
        if (onlyKey && slot.seen_key !== onlyKey) continue;
        const at = now();
        if (slot.state === "processing" && Date.parse(slot.lease_until) > at.getTime()) continue;
        const attempts = Number(slot.attempts) + 1;
        /** The claim's current ETag: every renewal is checked against it (fencing). */
        let etag: string;
        try {
          etag = (
            await t.updateEntity(
              {
                partitionKey: PARTITION,
                rowKey: slot.rowKey,
                state: "processing",
                lease_until: new Date(at.getTime() + leaseMs).toISOString(),
                attempts,
              },
              "Merge",
              { etag: slot.etag },
            )
          ).etag as string;
        } catch (error) {
          // Another worker claimed it first.
          if (isStatus(error, 412) || isStatus(error, 404)) continue;
          throw error;
        }
        /**
         * Extends the claim's lease under its ETag: `held`, or `lost` when another worker claimed the
         * slot since (this one's lease ran out) or it was closed. A 412 can also be this worker's own
         * earlier write whose answer was lost (the ETag moved on without it): every claim bumps
         * `attempts`, so an unchanged count means the claim is still this one's — its fresh ETag is
         * taken and the extension tried once more.
         */
        const extend = async (): Promise<"held" | "lost"> => {
          for (let tries = 0; tries < 2; tries++) {
            try {
              const answer = await t.updateEntity(
                {
                  partitionKey: PARTITION,
                  rowKey: slot.rowKey,
                  lease_until: new Date(now().getTime() + leaseMs).toISOString(),
                },
                "Merge",
                { etag },
              );
              etag = answer.etag as string;
              return "held";
            } catch (error) {
              if (isStatus(error, 404)) return "lost";
              if (!isStatus(error, 412)) throw error;
              const current = await t.getEntity<SlotRow>(PARTITION, slot.rowKey).catch((e: unknown) => {
                if (isStatus(e, 404)) return undefined;
                throw e;
              });
              if (!current || Number(current.attempts) !== attempts || current.state !== "processing") return "lost";
              etag = current.etag as string;
            }
          }
          return "lost";
        };
        const close = async (state: "done" | "abandoned") => {
          // Only the holder closes (a transaction's delete takes no ETag): the claim is confirmed
          // first, with a fresh lease, so no other worker can claim it meanwhile.
          if ((await extend()) === "lost") return;
          await closeSlot(t, slot.seen_key, slot.rowKey, state, now());
          closed++;
        };
        const item = itemOf(slot);
        const seen = await seenState(t, slot.seen_key);
        if (seen === "delivering" || seen === "abandoned") {
          if (seen === "delivering") options.onAbandonedWhileDelivering?.(item);
          await close("abandoned");
          continue;
        }
        if (seen === "done") {
          await close("done");
          continue;
        }
        if (attempts > maxAttempts) {
          await options.onAbandon?.(item);
          await close("abandoned");
          continue;
        }
        await setSeen(t, slot.seen_key, "processing", at);
        /** Extends the lease from now, ETag-checked and one at a time; `lost` once another worker holds the claim. */
        let lost = false;
        /** A delivery the fence refused: the processor may have swallowed the error, the item is not done. */
        let fenced = false;
        let renewing: Promise<boolean> = Promise.resolve(true);
        const renew = () => {
          renewing = renewing.then(async () => {
            if (lost) return false;
            try {
              if ((await extend()) === "held") return true;
              // Another worker claimed the item, or closed it: this claim is over.
              lost = true;
              return false;
            } catch {
              // Anything else (storage unreachable): not renewed; the heartbeat tries again.
              return false;
            }
          });
          return renewing;
        };
        const heartbeat = options.renewLease ? setInterval(() => void renew(), Math.max(1, leaseMs / 3)) : undefined;
        heartbeat?.unref?.();
        try {
          await process(item, {
            attempt: attempts,
            beforeDeliver: async () => {
              // Not renewed: lost, or not known to be held — either way nothing is delivered now.
              if (options.renewLease && !(await renew())) {
                fenced = true;
                throw new LeaseLostError();
              }
              await setSeen(t, slot.seen_key, "delivering", now());
            },
          });
        } catch (error) {
          // Left claimed: the lease runs out and a later drain retries it (or abandons it if it was delivering).
          options.onError?.(error, item, attempts);
          continue;
        } finally {
          clearInterval(heartbeat);
        }
        // A renewal still in flight moves the claim's ETag: the close below must use the newest.
        await renewing;
        // A worker that lost its claim (or could not confirm it) leaves the item to the holder or a later drain.
        if (lost || fenced) continue;
        await close("done");
      }
      return closed;
    },
  };
}

export type DurableQueue<T> = ReturnType<typeof createDurableQueue<T>>;

/**
 * Deletes the id rows of items closed (`done`, `abandoned`) before `cutoff`, at most `limit`: the
 * dedupe of a queue's items is kept as long as a repeat may still arrive, not forever. Ids of
 * items still queued, processing or delivering stay (they guard the crash path).
 */
export async function pruneClosedIds(options: {
  tables: TableSource;
  table: string;
  cutoff: Date;
  limit: number;
}): Promise<number> {
  const t = await tableOpener(options.tables, options.table)();
  const closed = odata`at lt ${options.cutoff.toISOString()} and (state eq ${"done"} or state eq ${"abandoned"})`;
  // Hash keys are lowercase hex: every id row sorts between `seen_` and `seen_g`.
  const filters = [
    `PartitionKey eq '${PARTITION}' and RowKey ge '${SEEN}' and RowKey lt '${SEEN}g' and ${closed}`,
    `PartitionKey eq '${LEGACY_SEEN_PARTITION}' and ${closed}`,
  ];
  const doomed: { partitionKey: string; rowKey: string }[] = [];
  for (const filter of filters)
    for await (const row of t.listEntities({ queryOptions: { filter, select: ["PartitionKey", "RowKey"] } })) {
      if (doomed.length >= options.limit) break;
      doomed.push({ partitionKey: String(row.partitionKey), rowKey: String(row.rowKey) });
    }
  let deleted = 0;
  for (const row of doomed) {
    try {
      await t.deleteEntity(row.partitionKey, row.rowKey);
      deleted++;
    } catch (error) {
      // Another host pruned it first.
      if (!isStatus(error, 404)) throw error;
    }
  }
  return deleted;
}
