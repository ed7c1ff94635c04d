import type { ToolResult } from "../../console/tools/tool.js";
import { activitiesOf } from "./activities.js";
import type {
  ChannelDeliveryReceipt,
  ChannelInboundTurn,
  ChannelOutboundResponse,
  ChannelProgressUpdate,
} from "./types.js";

/**
 * The progress stream of one long turn (spec operator-console.md §2.4 ChannelProgressUpdate, §3
 * last row; ledger C-205–C-208, C-297, C-298):
 *
 * - A turn still running {@link PROGRESS_START_AFTER_MS} after it reached the coordinator is long:
 *   revision 0 is posted then (with `startAfterMs: 0`, at the first progress signal — a tool result
 *   or the narrator starting to compose). A short turn gets its reply only, as before. Later
 *   revisions only after revision 0 was acknowledged, and they edit that message (Teams
 *   `updateActivity`, Slack `chat.update` on its `ts`); revision 0 not acknowledged: no more progress.
 * - Each revision is a cumulative snapshot: every activity so far (the count never decreases) —
 *   revisions are numbered when sent, so the ones sent are consecutive from 0.
 * - Bounded and coalesced: one request in flight at a time; signals meanwhile only mark the stream
 *   dirty, and the next update carries the latest snapshot; at most `limit` updates after revision 0
 *   per turn. An update that fails stops the updates (the final reply still comes).
 * - The final reply replaces the progress message (the last revision, `confirmed` only when the
 *   vendor acknowledged it undegraded and its text and activity count equal the persisted reply).
 *   If that replacement is rejected — or there is no progress message — the final reply is posted
 *   as a new message: a failed update never loses the final reply. An ambiguous replacement (a
 *   cut transport, no or a malformed acknowledgement, no answer within the call bound) is not
 *   followed by a new post: it may have been applied (spec §3 reply delivery).
 * - Every progress call is bounded ({@link PROGRESS_CALL_TIMEOUT_MS}); a turn that fails replaces
 *   its progress message with a short failure note ({@link PROGRESS_FAILED_TEXT}).
 *
 * The narrator's provisional text is not shown: it has not passed the rendering validator (rule 3)
 * and a channel is shared. Progress shows the activities (the same sanitized, secret-scanned lines
 * as the reply's) and that the answer is being composed.
 */

/** Updates after revision 0 per turn (the bound of spec §3's progress stream). */
export const PROGRESS_UPDATE_LIMIT = 8;
/** A turn running longer than this gets a progress message. */
export const PROGRESS_START_AFTER_MS = 5000;
/** One progress call (post, update, replace) not answered within this is ambiguous: the turn moves on. */
export const PROGRESS_CALL_TIMEOUT_MS = 10_000;
/** What a failed turn's progress message is replaced with, so it never says "Working on it…" forever. */
export const PROGRESS_FAILED_TEXT =
  "This attempt failed before an answer was ready. If it is tried again, the answer comes as a new message.";

/** A channel's progress transport (the adapter's vendor calls). */
export interface ChannelProgressSender {
  /** Posts revision 0; an acknowledgement's vendor message id is what later revisions edit. */
  post(turn: ChannelInboundTurn, update: ChannelProgressUpdate): Promise<ChannelDeliveryReceipt>;
  /** Edits the progress message to a later revision. */
  update(turn: ChannelInboundTurn, messageId: string, update: ChannelProgressUpdate): Promise<ChannelDeliveryReceipt>;
  /** Replaces the progress message with the final reply. */
  replace(
    turn: ChannelInboundTurn,
    messageId: string,
    response: ChannelOutboundResponse,
  ): Promise<ChannelDeliveryReceipt>;
}

const failed = (operation: string, error: unknown): ChannelDeliveryReceipt => ({
  outcome: "ambiguous",
  operation,
  reason: error instanceof Error ? error.message.slice(0, 200) : "failed",
});

/**
 * One progress call, bounded: a call not answered within `ms` is ambiguous (the vendor may still
 * apply it), a throw is ambiguous too; the turn never waits on a hung vendor call.
 */
function bounded(
  operation: string,
  ms: number,
  call: () => Promise<ChannelDeliveryReceipt>,
): Promise<ChannelDeliveryReceipt> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<ChannelDeliveryReceipt>((resolve) => {
    timer = setTimeout(() => resolve({ outcome: "ambiguous", operation, reason: "timeout" }), ms);
    timer.unref?.();
  });
  return Promise.race([
    Promise.resolve()
      .then(call)
      .catch((e: unknown) => failed(operation, e)),
    expired,
  ]).finally(() => clearTimeout(timer));
}

export function createProgressStream(options: {
  sender: ChannelProgressSender;
  turn: ChannelInboundTurn;
  limit?: number;
  /** 0: revision 0 at the first progress signal. */
  startAfterMs?: number;
  /** The bound of each progress call (default {@link PROGRESS_CALL_TIMEOUT_MS}). */
  callTimeoutMs?: number;
  now?: () => Date;
}) {
  const { sender, turn } = options;
  const limit = options.limit ?? PROGRESS_UPDATE_LIMIT;
  const startAfterMs = options.startAfterMs ?? PROGRESS_START_AFTER_MS;
  const now = options.now ?? (() => new Date());
  const callTimeoutMs = options.callTimeoutMs ?? PROGRESS_CALL_TIMEOUT_MS;
  const results: ToolResult[] = [];
  let composing = false;
  /** Acknowledged revisions, in order. */
  const sent: ChannelProgressUpdate[] = [];
  let messageId: string | undefined;
  /** No more progress (revision 0 or an update was not acknowledged, or the turn finished). */
  let stopped = false;
  /**
   * An update's outcome is unknown (no answer within its bound, a cut transport, a malformed
   * acknowledgement): the vendor may still apply it after anything sent later, so nothing later goes
   * into the progress message.
   */
  let lateUpdate = false;
  let updates = 0;
  let dirty = false;
  let inFlight: Promise<void> | undefined;
  let started = startAfterMs === 0;

  function snapshot(): ChannelProgressUpdate {
    const { activities } = activitiesOf(results, now().toISOString());
    const lines = activities.map((a) => `${a.input_kind} ${a.command}: ${a.status}`);
    return {
      revision: sent.length,
      activity_count: activities.length,
      text: [
        `Working on it… ${activities.length} step(s) so far.`,
        ...lines,
        ...(composing ? ["Composing the answer…"] : []),
      ].join("\n"),
      confirmed: false,
    };
  }

  async function pump(): Promise<void> {
    while (dirty && !stopped) {
      dirty = false;
      const update = snapshot();
      if (messageId === undefined) {
        const receipt = await bounded("progress.post", callTimeoutMs, () => sender.post(turn, update));
        if (receipt.outcome !== "acknowledged") {
          stopped = true;
          return;
        }
        messageId = receipt.vendor_message_id;
        sent.push(update);
        continue;
      }
      if (updates >= limit) return;
      updates++;
      const id = messageId;
      const receipt = await bounded("progress.update", callTimeoutMs, () => sender.update(turn, id, update));
      if (receipt.outcome !== "acknowledged") {
        stopped = true;
        if (receipt.outcome === "ambiguous") lateUpdate = true;
        return;
      }
      sent.push(update);
    }
  }

  function signal() {
    if (stopped) return;
    dirty = true;
    if (!started || inFlight) return;
    inFlight = pump().finally(() => {
      inFlight = undefined;
    });
  }

  const timer = started
    ? undefined
    : setTimeout(() => {
        started = true;
        signal();
      }, startAfterMs);
  timer?.unref?.();

  return {
    /** A tool call finished. */
    activity(result: ToolResult) {
      results.push(result);
      signal();
    },
    /** The narrator started composing (its text is not shown). */
    composing() {
      if (composing) return;
      composing = true;
      signal();
    },
    /**
     * The turn failed: no progress after this, and a progress message already posted is edited to
     * a short failure note (it would otherwise say "Working on it…" forever). Never throws.
     */
    async cancel(): Promise<void> {
      clearTimeout(timer);
      dirty = false;
      const settling = inFlight;
      stopped = true;
      await settling;
      // A late update could land after the note: the message stays as the vendor has it.
      if (messageId === undefined || lateUpdate) return;
      const last = sent.at(-1);
      const note: ChannelProgressUpdate = {
        revision: sent.length,
        activity_count: last?.activity_count ?? 0,
        text: PROGRESS_FAILED_TEXT,
        confirmed: false,
      };
      const id = messageId;
      const receipt = await bounded("progress.update", callTimeoutMs, () => sender.update(turn, id, note));
      if (receipt.outcome === "acknowledged") sent.push(note);
    },
    /**
     * The final reply: replaces the progress message, or is posted with `deliver` when there is
     * none or the replacement was not acknowledged. Answers the receipt of what carries the reply
     * and every acknowledged revision (the last one is the final reply's when it was confirmed).
     */
    async finish(
      response: ChannelOutboundResponse,
      deliver: (response: ChannelOutboundResponse) => Promise<ChannelDeliveryReceipt>,
    ): Promise<{ receipt: ChannelDeliveryReceipt; revisions: ChannelProgressUpdate[] }> {
      // Progress still pending is superseded by the reply; the request in flight finishes first.
      clearTimeout(timer);
      dirty = false;
      const settling = inFlight;
      stopped = true;
      await settling;
      // No progress message, or one an update of unknown outcome may still overwrite (hiding the reply):
      // the reply is its own message.
      if (messageId === undefined || lateUpdate) return { receipt: await deliver(response), revisions: [...sent] };
      const id = messageId;
      const receipt = await bounded("progress.replace", callTimeoutMs, () => sender.replace(turn, id, response));
      // Only a definite rejection posts the reply anew: an ambiguous replacement may have been
      // applied, and posting again would show the reply twice (spec §3 reply delivery: ambiguous,
      // not retried automatically).
      if (receipt.outcome === "rejected") return { receipt: await deliver(response), revisions: [...sent] };
      if (receipt.outcome !== "acknowledged") return { receipt, revisions: [...sent] };
      const activity_count = response.activities?.length ?? 0;
      const last: ChannelProgressUpdate = {
        revision: sent.length,
        activity_count,
        text: response.text,
        // Shown as persisted: acknowledged, not clipped, same text and activity count (C-298).
        confirmed: !receipt.text_degraded && activity_count >= (sent.at(-1)?.activity_count ?? 0),
      };
      return { receipt, revisions: [...sent, last] };
    },
  };
}

export type ProgressStream = ReturnType<typeof createProgressStream>;
