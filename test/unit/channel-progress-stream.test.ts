import { afterEach, describe, expect, it, vi } from "vitest";
import {
  type ChannelProgressSender,
  createProgressStream,
  PROGRESS_CALL_TIMEOUT_MS,
  PROGRESS_FAILED_TEXT,
  PROGRESS_UPDATE_LIMIT,
} from "../../shared/channels/inbound/progress-stream.js";
import type {
  ChannelDeliveryReceipt,
  ChannelInboundTurn,
  ChannelOutboundResponse,
  ChannelProgressUpdate,
} from "../../shared/channels/inbound/types.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";

/**
 * The progress stream below any vendor (spec operator-console.md §2.4 ChannelProgressUpdate, §3
 * last row): a scripted transport whose every call waits until the test answers it, so what is in
 * flight, what is coalesced and what is sent is decided by the test, never by timing. The vendor
 * wire (Slack `chat.update`, Teams `updateActivity`) is tested in channel-inbound-pipeline.test.ts
 * and notify-teams.test.ts.
 */

interface Call {
  op: "post" | "update" | "replace" | "deliver";
  messageId?: string;
  update?: ChannelProgressUpdate;
  response?: ChannelOutboundResponse;
  answer(receipt: ChannelDeliveryReceipt): void;
  fail(error: Error): void;
}

function scripted() {
  const calls: Call[] = [];
  const waiting: ((call: Call) => void)[] = [];
  let read = 0;
  const call = (c: Omit<Call, "answer" | "fail">) =>
    new Promise<ChannelDeliveryReceipt>((answer, fail) => {
      const full = { ...c, answer, fail };
      calls.push(full);
      waiting.shift()?.(full);
    });
  const sender: ChannelProgressSender = {
    post: (_turn, update) => call({ op: "post", update }),
    update: (_turn, messageId, update) => call({ op: "update", messageId, update }),
    replace: (_turn, messageId, response) => call({ op: "replace", messageId, response }),
  };
  const deliver = (response: ChannelOutboundResponse) => call({ op: "deliver", response });
  return {
    sender,
    deliver,
    calls,
    /** The next call the stream makes (already made, or the next one). */
    next(): Promise<Call> {
      const index = read++;
      const made = calls[index];
      return made ? Promise.resolve(made) : new Promise((resolve) => waiting.push(resolve));
    },
    /** Calls made and not yet read by {@link next}. */
    unread: () => calls.length - read,
  };
}

const ack = (id: string, degraded = false): ChannelDeliveryReceipt => ({
  outcome: "acknowledged",
  operation: "x",
  vendor_message_id: id,
  text_degraded: degraded,
});
const rejected: ChannelDeliveryReceipt = { outcome: "rejected", operation: "x", retryable: true, reason: "http_503" };

const turn = { turn_id: "t1", channel: "platform_b", conversation: { id: "C1" } } as ChannelInboundTurn;
const result = (i: number): ToolResult => ({
  status: "ok",
  tool: `query_tool_${i}`,
  data: {},
  evidence_ref: `aud_${i}`,
  observed_at: "2026-11-28T07:00:00Z",
});
const reply = (text: string, activities: number): ChannelOutboundResponse => ({
  text,
  mentions: [],
  kind: "tool_result",
  request_id: "r1",
  audit_ids: [],
  activities: Array.from({ length: activities }, (_, i) => ({
    kind: "observed_execution" as const,
    input_kind: "query" as const,
    command: `query_tool_${i}`,
    result_summary: "ok",
    status: "ok",
    authority: "read",
    started_at: "2026-11-28T07:00:00Z",
  })),
});

afterEach(() => {
  vi.useRealTimers();
});

describe("the channel progress stream", () => {
  it("C-205 C-206 C-207 C-208 C-297 revisions are cumulative snapshots numbered 0, 1, 2… with a non-decreasing activity count; later revisions edit revision 0's message; the final reply replaces it, confirmed", async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    const post = await s.next();
    expect(post).toMatchObject({ op: "post", update: { revision: 0, activity_count: 1, confirmed: false } });
    // Nothing else is sent before revision 0 is acknowledged (C-297).
    stream.activity(result(1));
    expect(s.unread()).toBe(0);
    post.answer(ack("m-1"));
    const first = await s.next();
    expect(first).toMatchObject({ op: "update", messageId: "m-1", update: { revision: 1, activity_count: 2 } });
    first.answer(ack("m-1"));
    stream.composing();
    const second = await s.next();
    second.answer(ack("m-1"));
    // Each snapshot carries every activity so far (cumulative), not the new one alone.
    expect(second.update?.text).toContain("query_tool_0");
    expect(second.update?.text).toContain("query_tool_1");
    expect(second.update?.text).toContain("Composing the answer");
    const finished = stream.finish(reply("All done.", 2), s.deliver);
    const replace = await s.next();
    expect(replace).toMatchObject({ op: "replace", messageId: "m-1", response: { text: "All done." } });
    replace.answer(ack("m-1"));
    const { receipt, revisions } = await finished;
    expect(receipt).toMatchObject({ outcome: "acknowledged", vendor_message_id: "m-1" });
    expect(revisions.map((r) => r.revision)).toEqual([0, 1, 2, 3]);
    const counts = revisions.map((r) => r.activity_count);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(revisions.map((r) => r.confirmed)).toEqual([false, false, false, true]);
    expect(revisions.at(-1)).toMatchObject({ text: "All done.", activity_count: 2 });
    expect(s.calls.filter((c) => c.op === "deliver")).toEqual([]);
  });

  it(`coalesced and bounded: signals while a request is in flight become one update with the latest snapshot; at most ${PROGRESS_UPDATE_LIMIT} updates per turn`, async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    const post = await s.next();
    for (let i = 1; i <= 50; i++) stream.activity(result(i));
    post.answer(ack("m-1"));
    const coalesced = await s.next();
    expect(coalesced.update).toMatchObject({ revision: 1, activity_count: 51 });
    coalesced.answer(ack("m-1"));
    // One more activity per acknowledged update, until the bound.
    for (let i = 51; i < 51 + PROGRESS_UPDATE_LIMIT - 1; i++) {
      stream.activity(result(i));
      const update = await s.next();
      expect(update).toMatchObject({ op: "update", update: { revision: i - 49, activity_count: i + 1 } });
      update.answer(ack("m-1"));
    }
    // Past the bound, activities change nothing on the wire until the final reply.
    for (let i = 51 + PROGRESS_UPDATE_LIMIT - 1; i < 100; i++) stream.activity(result(i));
    const finished = stream.finish(reply("Done.", 100), s.deliver);
    const replace = await s.next();
    expect(replace.op).toBe("replace");
    replace.answer(ack("m-1"));
    expect(s.calls.filter((c) => c.op === "update")).toHaveLength(PROGRESS_UPDATE_LIMIT);
    const { revisions } = await finished;
    expect(revisions).toHaveLength(PROGRESS_UPDATE_LIMIT + 2);
    expect(revisions.at(-1)).toMatchObject({ confirmed: true, activity_count: 100 });
  });

  it("C-297 revision 0 not acknowledged: no later revision, and the final reply is posted as its own message", async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    const post = await s.next();
    stream.activity(result(1));
    post.answer(rejected);
    const finished = stream.finish(reply("Answer.", 2), s.deliver);
    const deliver = await s.next();
    expect(deliver).toMatchObject({ op: "deliver", response: { text: "Answer." } });
    deliver.answer(ack("m-2"));
    const { receipt, revisions } = await finished;
    expect(receipt).toMatchObject({ outcome: "acknowledged", vendor_message_id: "m-2" });
    expect(revisions).toEqual([]);
    expect(s.calls.map((c) => c.op)).toEqual(["post", "deliver"]);
  });

  it("a failed update or replacement never loses the final reply: it is posted as a new message, and the stream's last revision stays unconfirmed", async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    (await s.next()).answer(ack("m-1"));
    stream.activity(result(1));
    // The update is refused (a definite answer: not applied): no more updates.
    (await s.next()).answer(rejected);
    stream.activity(result(2));
    const finished = stream.finish(reply("Final.", 3), s.deliver);
    const replace = await s.next();
    expect(replace.op).toBe("replace");
    replace.answer(rejected);
    const deliver = await s.next();
    expect(deliver).toMatchObject({ op: "deliver", response: { text: "Final." } });
    deliver.answer(ack("m-9"));
    const { receipt, revisions } = await finished;
    expect(receipt).toMatchObject({ outcome: "acknowledged", vendor_message_id: "m-9" });
    expect(revisions.map((r) => [r.revision, r.confirmed])).toEqual([[0, false]]);
    expect(s.calls.map((c) => c.op)).toEqual(["post", "update", "replace", "deliver"]);
  });

  it("C-298 the final revision is not confirmed when the vendor shows it clipped (text differs from the persisted reply)", async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    (await s.next()).answer(ack("m-1"));
    const finished = stream.finish(reply("x".repeat(5000), 1), s.deliver);
    (await s.next()).answer(ack("m-1", true));
    const { revisions } = await finished;
    expect(revisions.at(-1)).toMatchObject({ revision: 1, confirmed: false });
  });

  it("a short turn gets no progress: revision 0 is posted only once the turn has run for the start delay", async () => {
    vi.useFakeTimers();
    const s = scripted();
    const short = createProgressStream({ sender: s.sender, turn, startAfterMs: 5000 });
    short.activity(result(0));
    vi.advanceTimersByTime(4999);
    expect(s.calls).toEqual([]);
    const done = short.finish(reply("Quick.", 1), s.deliver);
    (await s.next()).answer(ack("m-1"));
    await done;
    vi.advanceTimersByTime(10_000);
    expect(s.calls.map((c) => c.op)).toEqual(["deliver"]);

    const long = createProgressStream({ sender: s.sender, turn, startAfterMs: 5000 });
    long.activity(result(0));
    vi.advanceTimersByTime(5000);
    expect((await s.next()).update).toMatchObject({ revision: 0, activity_count: 1 });
  });

  it("C-295 an ambiguous replacement (no or a malformed acknowledgement, a cut transport) is not followed by a new post: the reply may already show", async () => {
    for (const settle of [
      (c: Call) => c.answer({ outcome: "ambiguous", operation: "chat.update", reason: "malformed_acknowledgement" }),
      (c: Call) => c.fail(new Error("socket hang up")),
    ]) {
      const s = scripted();
      const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
      stream.activity(result(0));
      (await s.next()).answer(ack("m-1"));
      const finished = stream.finish(reply("Final.", 1), s.deliver);
      const replace = await s.next();
      expect(replace.op).toBe("replace");
      settle(replace);
      const { receipt, revisions } = await finished;
      expect(receipt.outcome).toBe("ambiguous");
      expect(revisions.map((r) => r.revision)).toEqual([0]);
      expect(s.calls.map((c) => c.op)).toEqual(["post", "replace"]);
    }
  });

  it('a failed turn replaces its progress message with a failure note instead of leaving "Working on it…"', async () => {
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    (await s.next()).answer(ack("m-1"));
    stream.activity(result(1));
    // The turn fails while an update is in flight: that update settles first, then the note.
    const update = await s.next();
    const cancelled = stream.cancel();
    update.answer(ack("m-1"));
    const note = await s.next();
    expect(note).toMatchObject({ op: "update", messageId: "m-1", update: { revision: 2, text: PROGRESS_FAILED_TEXT } });
    expect(note.update?.activity_count).toBe(2);
    note.answer(ack("m-1"));
    await cancelled;
    // Nothing more after the note, whatever the turn still signals.
    stream.activity(result(2));
    expect(s.calls.map((c) => c.op)).toEqual(["post", "update", "update"]);

    // A turn that fails before its progress message exists posts nothing.
    const quiet = scripted();
    const early = createProgressStream({ sender: quiet.sender, turn, startAfterMs: 0 });
    await early.cancel();
    early.activity(result(0));
    expect(quiet.calls).toEqual([]);
  });

  it(`every progress call is bounded (${PROGRESS_CALL_TIMEOUT_MS} ms): a hung replacement never holds the final reply, and is not posted anew`, async () => {
    vi.useFakeTimers();
    const s = scripted();
    const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
    stream.activity(result(0));
    (await s.next()).answer(ack("m-1"));
    const finished = stream.finish(reply("Final.", 1), s.deliver);
    // The replacement never answers: ambiguous after the bound, and not posted anew (it may show).
    expect((await s.next()).op).toBe("replace");
    await vi.advanceTimersByTimeAsync(PROGRESS_CALL_TIMEOUT_MS);
    const { receipt } = await finished;
    expect(receipt).toMatchObject({ outcome: "ambiguous", reason: "timeout" });
    expect(s.calls.map((c) => c.op)).toEqual(["post", "replace"]);
  });

  it("C-295 an update of unknown outcome (no answer within its bound, a cut transport) may still land after anything sent later: the final reply is then its own message, never a replacement the late update would overwrite; a failed turn sends no note after it", async () => {
    vi.useFakeTimers();
    /** A stream whose revision 0 was acknowledged, and the update of its second activity, not yet answered. */
    const updating = async () => {
      const s = scripted();
      const stream = createProgressStream({ sender: s.sender, turn, startAfterMs: 0 });
      stream.activity(result(0));
      (await s.next()).answer(ack("m-1"));
      stream.activity(result(1));
      const update = await s.next();
      expect(update.op).toBe("update");
      return { s, stream, update };
    };
    /** Finishes the stream: the reply must be posted as a new message (no replace), acknowledged as `id`. */
    const finishedAsOwnMessage = async ({ s, stream }: Awaited<ReturnType<typeof updating>>, id: string) => {
      const finished = stream.finish(reply("Final.", 2), s.deliver);
      const deliver = await s.next();
      expect(deliver).toMatchObject({ op: "deliver", response: { text: "Final." } });
      deliver.answer(ack(id));
      return finished;
    };

    // The update never answers within the bound.
    const late = await updating();
    await vi.advanceTimersByTimeAsync(PROGRESS_CALL_TIMEOUT_MS);
    const finished = finishedAsOwnMessage(late, "m-2");
    // The vendor applies the late update now: the reply is a message of its own and stays.
    await vi.waitFor(() => expect(late.s.calls.at(-1)?.op).toBe("deliver"));
    late.update.answer(ack("m-1"));
    const { receipt, revisions } = await finished;
    expect(receipt).toMatchObject({ outcome: "acknowledged", vendor_message_id: "m-2" });
    expect(revisions.map((r) => r.revision)).toEqual([0]);
    expect(late.s.calls.map((c) => c.op)).toEqual(["post", "update", "deliver"]);

    // An update whose transport was cut may have been applied, and may still be: the same.
    const cut = await updating();
    cut.update.fail(new Error("socket hang up"));
    expect((await finishedAsOwnMessage(cut, "m-3")).receipt).toMatchObject({ vendor_message_id: "m-3" });
    expect(cut.s.calls.map((c) => c.op)).toEqual(["post", "update", "deliver"]);

    // A failed turn after a late update: no failure note that the update could overwrite.
    const failing = await updating();
    await vi.advanceTimersByTimeAsync(PROGRESS_CALL_TIMEOUT_MS);
    await failing.stream.cancel();
    expect(failing.s.calls.map((c) => c.op)).toEqual(["post", "update"]);
  });
});
