import { createHash } from "node:crypto";
import type { TableClient } from "@azure/data-tables";
import { QueueFullError } from "../../errors.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { ChannelInboundTurn } from "./types.js";

/**
 * The channel queue (issue 26; spec §2.6 `SVC_CHANNEL_QUEUE_CAPACITY`): a bounded, durable queue
 * of accepted turns in table storage, so an accepted turn survives a crash of the host and is
 * answered at most once.
 *
 * - Admission: a turn's vendor id is recorded first (a repeat — Slack retries an event it did not
 *   see acknowledged — is a `duplicate` and does nothing), then it takes one of `capacity` slots
 *   (an insert, so two hosts never share one). No free slot: {@link QueueFullError}, the vendor
 *   gets a retryable answer, and the id is released so the retry is admitted later.
 * - Processing: a worker claims a slot with an ETag-checked lease; a lease that ran out (the host
 *   died) is claimed again. Before the reply is posted the turn is marked `delivering`: a turn
 *   found in that state after a crash is not posted again (the post may exist: ambiguous, never
 *   retried automatically — spec §3 reply delivery) but closed as `abandoned`.
 * - Attempts that fail before delivery are retried up to {@link MAX_ATTEMPTS} times.
 */

export const CHANNEL_TURNS_TABLE = "channelturns";
export const MAX_ATTEMPTS = 3;
const QUEUE = "q";
const SEEN = "seen";

export type TurnState = "queued" | "processing" | "delivering" | "done" | "abandoned";

interface SlotRow {
  turn: string;
  seen_key: string;
  state: "queued" | "processing";
  lease_until: string;
  attempts: number;
}

/** Runs one turn; calls `beforeDeliver` right before posting the reply. */
export type TurnProcessor = (turn: ChannelInboundTurn, guard: { beforeDeliver(): Promise<void> }) => Promise<void>;

const seenKeyOf = (turn: Pick<ChannelInboundTurn, "channel" | "turn_id">) =>
  createHash("sha256").update(`turn/${turn.channel}/${turn.turn_id}`).digest("hex");

export function createChannelQueue(options: { tables: TableSource; capacity: number; leaseMs?: number }) {
  const table = tableOpener(options.tables, CHANNEL_TURNS_TABLE);
  const leaseMs = options.leaseMs ?? 60_000;

  async function setSeen(t: TableClient, key: string, state: TurnState, now: Date) {
    await t.upsertEntity({ partitionKey: SEEN, rowKey: key, state, at: now.toISOString() }, "Merge");
  }
  async function seenState(t: TableClient, key: string): Promise<TurnState | undefined> {
    try {
      return (await t.getEntity<{ state: TurnState }>(SEEN, key)).state;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }
  const ignoreGone = (error: unknown) => {
    if (!isStatus(error, 404) && !isStatus(error, 412)) throw error;
  };

  return {
    capacity: options.capacity,

    /** Admits a turn durably; `duplicate` when its vendor id was admitted before. */
    async enqueue(turn: ChannelInboundTurn, now: Date): Promise<"accepted" | "duplicate"> {
      const t = await table();
      const key = seenKeyOf(turn);
      try {
        await t.createEntity({ partitionKey: SEEN, rowKey: key, state: "queued", at: now.toISOString() });
      } catch (error) {
        if (isStatus(error, 409)) return "duplicate";
        throw error;
      }
      const row: SlotRow = {
        turn: JSON.stringify(turn),
        seen_key: key,
        state: "queued",
        lease_until: now.toISOString(),
        attempts: 0,
      };
      const taken = new Set<string>();
      for await (const slot of t.listEntities({ queryOptions: { filter: `PartitionKey eq '${QUEUE}'` } }))
        taken.add(String(slot.rowKey));
      for (let i = 0; i < options.capacity; i++) {
        const rowKey = `slot_${String(i).padStart(5, "0")}`;
        if (taken.has(rowKey)) continue;
        try {
          await t.createEntity({ partitionKey: QUEUE, rowKey, ...row });
          return "accepted";
        } catch (error) {
          if (isStatus(error, 409)) continue;
          throw error;
        }
      }
      // Nothing half-processed: the id is released, so the vendor's retry is admitted later.
      await t.deleteEntity(SEEN, key).catch(ignoreGone);
      throw new QueueFullError("the channel queue is full; retry later", 5);
    },

    /** The turn's state by its vendor id (undefined: never admitted). */
    async stateOf(turn: Pick<ChannelInboundTurn, "channel" | "turn_id">): Promise<TurnState | undefined> {
      return seenState(await table(), seenKeyOf(turn));
    },

    /** Turns waiting or in progress. */
    async depth(): Promise<number> {
      let n = 0;
      for await (const _ of (await table()).listEntities({ queryOptions: { filter: `PartitionKey eq '${QUEUE}'` } }))
        n++;
      return n;
    },

    /**
     * Processes every claimable turn (queued, or processing with an expired lease), oldest slot
     * first; `only` restricts it to one turn (the route that just admitted it). Returns how many
     * turns were closed.
     */
    async drain(process: TurnProcessor, now: () => Date, only?: Pick<ChannelInboundTurn, "channel" | "turn_id">) {
      const t = await table();
      const onlyKey = only ? seenKeyOf(only) : undefined;
      let closed = 0;
      const slots: (SlotRow & { rowKey: string; etag: string })[] = [];
      for await (const slot of t.listEntities<SlotRow>({ queryOptions: { filter: `PartitionKey eq '${QUEUE}'` } }))
        slots.push(slot as SlotRow & { rowKey: string; etag: string });
      for (const slot of slots) {
        if (onlyKey && slot.seen_key !== onlyKey) continue;
        const at = now();
        if (slot.state === "processing" && Date.parse(slot.lease_until) > at.getTime()) continue;
        const attempts = Number(slot.attempts) + 1;
        try {
          await t.updateEntity(
            {
              partitionKey: QUEUE,
              rowKey: slot.rowKey,
              state: "processing",
              lease_until: new Date(at.getTime() + leaseMs).toISOString(),
              attempts,
            },
            "Merge",
            { etag: slot.etag },
          );
        } catch (error) {
          // Another worker claimed it first.
          if (isStatus(error, 412) || isStatus(error, 404)) continue;
          throw error;
        }
        const close = async (state: "done" | "abandoned") => {
          await setSeen(t, slot.seen_key, state, now());
          await t.deleteEntity(QUEUE, slot.rowKey).catch(ignoreGone);
          closed++;
        };
        if ((await seenState(t, slot.seen_key)) === "delivering" || attempts > MAX_ATTEMPTS) {
          await close("abandoned");
          continue;
        }
        await setSeen(t, slot.seen_key, "processing", at);
        try {
          await process(JSON.parse(slot.turn) as ChannelInboundTurn, {
            beforeDeliver: () => setSeen(t, slot.seen_key, "delivering", now()),
          });
        } catch {
          // Left claimed: the lease runs out and a later drain retries it (or abandons it if it was delivering).
          continue;
        }
        await close("done");
      }
      return closed;
    },
  };
}

export type ChannelQueue = ReturnType<typeof createChannelQueue>;
