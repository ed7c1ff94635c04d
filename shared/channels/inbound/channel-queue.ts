import { createHash } from "node:crypto";
import { createDurableQueue, type QueueItemState, type QueueProcessor } from "../../storage/durable-queue.js";
import type { Logger } from "../../logging/logger.js";
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

/** A turn by its vendor identity: all a route hands on once the turn is queued (never its text). */
export type ChannelTurnRef = Pick<ChannelInboundTurn, "channel" | "turn_id">;

const idOf = (turn: ChannelTurnRef) => `turn/${turn.channel}/${turn.turn_id}`;

/**
 * Starts an admitted turn after the route's answer (issue 26: Slack wants its answer within 3 s,
 * Bot Service within 15 s). On the Functions host: the `channelTurn` orchestration, whose activity
 * runs the turn inside an invocation the host keeps alive; in tests and as the fallback: this
 * process (`background-turns.ts`). Either way the queued turn is what runs, by its id.
 */
export type TurnStarter = (turn: ChannelTurnRef) => Promise<void>;

/** The activity of the `channelTurn` orchestration: drains the one turn it is given. */
export const CHANNEL_TURN_ACTIVITY = "runChannelTurn";

/** The `channelTurn` orchestration's instance id of a turn: one per turn, no vendor id in it. */
export const channelTurnInstanceId = (turn: ChannelTurnRef): string =>
  `turn-${createHash("sha256").update(idOf(turn)).digest("hex").slice(0, 40)}`;

export function createChannelQueue(options: {
  tables: TableSource;
  capacity: number;
  leaseMs?: number;
  /** Where a turn that failed, or was given up, is reported (its vendor identity only, never its text). */
  logger?: Logger;
}) {
  const ref = (turn: ChannelInboundTurn) => ({ channel: turn.channel, turn_id: turn.turn_id });
  const logger = options.logger;
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
    ...(logger
      ? {
          onError: (error: unknown, turn: ChannelInboundTurn, attempt: number) =>
            logger.warn("channel turn failed; it runs again once its lease runs out", {
              ...ref(turn),
              attempt,
              error,
            }),
          onAbandon: async (turn: ChannelInboundTurn) =>
            logger.error("channel turn given up after its last attempt; the sender got no answer", {
              ...ref(turn),
              attempts: MAX_ATTEMPTS,
            }),
          onAbandonedWhileDelivering: (turn: ChannelInboundTurn) =>
            logger.warn(
              "channel turn closed: its host stopped while posting the reply, which may not have arrived",
              ref(turn),
            ),
        }
      : {}),
  });
  return {
    capacity: queue.capacity,
    /** Admits a turn durably; `duplicate` when its vendor id was admitted before. */
    enqueue: (turn: ChannelInboundTurn, now: Date) => queue.enqueue(turn, now),
    /** The turn's state by its vendor id (undefined: never admitted). */
    stateOf: (turn: ChannelTurnRef) => queue.stateOf(idOf(turn)),
    /** Turns waiting or in progress. */
    depth: () => queue.depth(),
    /**
     * Processes every claimable turn (queued, or processing with an expired lease), oldest slot
     * first; `only` restricts it to one turn (the route that just admitted it). Returns how many
     * turns were closed.
     */
    drain: (process: TurnProcessor, now: () => Date, only?: ChannelTurnRef) =>
      queue.drain(process, now, only ? idOf(only) : undefined),
  };
}

export type ChannelQueue = ReturnType<typeof createChannelQueue>;
