import { createDurableQueue, type QueueItemState, type QueueProcessor } from "../../storage/durable-queue.js";
import type { TableSource } from "../../storage/table-source.js";
import type { ChannelInboundTurn } from "./types.js";

/**
 * The channel queue (issue 26; spec §2.6 `SVC_CHANNEL_QUEUE_CAPACITY`): the durable queue
 * (`shared/storage/durable-queue.ts`) of accepted turns, so an accepted turn survives a crash of
 * the host and is answered at most once.
 *
 * - Admission: a turn's vendor id is recorded first (a repeat — Slack retries an event it did not
 *   see acknowledged — is a `duplicate` and does nothing), then it takes one of `capacity` slots.
 *   No free slot: `QueueFullError`, the vendor gets a retryable answer, and the id is released so
 *   the retry is admitted later.
 * - Processing: a worker claims a slot with a lease; a lease that ran out (the host died) is
 *   claimed again. Before the reply is posted the turn is marked `delivering`: a turn found in that
 *   state after a crash is not posted again (the post may exist: ambiguous, never retried
 *   automatically — spec §3 reply delivery) but closed as `abandoned`.
 * - A running turn's lease is renewed (every 20 s of the 60 s lease) and checked before the reply:
 *   a turn longer than one lease is not claimed again, and a host that lost its claim posts nothing.
 * - Attempts that fail before delivery are retried up to {@link MAX_ATTEMPTS} times.
 */

export const CHANNEL_TURNS_TABLE = "channelturns";
export const MAX_ATTEMPTS = 3;

export type TurnState = QueueItemState;

/** Runs one turn; calls `beforeDeliver` right before posting the reply. */
export type TurnProcessor = QueueProcessor<ChannelInboundTurn>;

const idOf = (turn: Pick<ChannelInboundTurn, "channel" | "turn_id">) => `turn/${turn.channel}/${turn.turn_id}`;

export function createChannelQueue(options: { tables: TableSource; capacity: number; leaseMs?: number }) {
  const queue = createDurableQueue<ChannelInboundTurn>({
    tables: options.tables,
    table: CHANNEL_TURNS_TABLE,
    capacity: options.capacity,
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    maxAttempts: MAX_ATTEMPTS,
    // A turn may outlive one lease (tools, the narrator up to SVC_NARRATOR_TIMEOUT_MS): renewed while
    // it runs, so the worker timer never runs it a second time, and fenced before the reply.
    renewLease: true,
    idOf,
    name: "channel queue",
  });
  return {
    capacity: queue.capacity,
    /** Admits a turn durably; `duplicate` when its vendor id was admitted before. */
    enqueue: (turn: ChannelInboundTurn, now: Date) => queue.enqueue(turn, now),
    /** The turn's state by its vendor id (undefined: never admitted). */
    stateOf: (turn: Pick<ChannelInboundTurn, "channel" | "turn_id">) => queue.stateOf(idOf(turn)),
    /** Turns waiting or in progress. */
    depth: () => queue.depth(),
    /**
     * Processes every claimable turn (queued, or processing with an expired lease), oldest slot
     * first; `only` restricts it to one turn (the route that just admitted it). Returns how many
     * turns were closed.
     */
    drain: (process: TurnProcessor, now: () => Date, only?: Pick<ChannelInboundTurn, "channel" | "turn_id">) =>
      queue.drain(process, now, only ? idOf(only) : undefined),
  };
}

export type ChannelQueue = ReturnType<typeof createChannelQueue>;
