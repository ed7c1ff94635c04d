import http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import type { ReadableStream as NodeReadableStream } from "node:stream/web";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planFor, streamChatTurn } from "../../shared/console/chat-stream.js";
import type { OutboundResponse, TurnHooks } from "../../shared/console/coordinator/coordinator.js";
import type { PresentationPlanner } from "../../shared/console/presentation.js";
import { createSseStream, SSE_HEADERS } from "../../shared/http/sse.js";

/** What the next request to the test server runs: the coordinator's turn and the planner. */
interface Scenario {
  handleTurn(hooks: Pick<TurnHooks, "abortSignal" | "onDelta">): Promise<OutboundResponse>;
  planner?: PresentationPlanner;
  presentationWaitMs?: number;
  heartbeatMs?: number;
}

let scenario: Scenario;
let server: http.Server;
let base: string;

beforeAll(async () => {
  // A real HTTP server that serves the stream body as the Functions library does (read and written
  // chunk by chunk), with the client's close as the abort signal — what the route kit hands over.
  server = http.createServer((_req, res) => {
    const client = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) client.abort();
    });
    const { body, channel } = createSseStream({
      heartbeatMs: scenario.heartbeatMs ?? 60_000,
      clientAbortSignal: client.signal,
      backlogBytes: () => res.writableLength,
      maxBacklogBytes: 1024 * 1024,
    });
    res.writeHead(200, SSE_HEADERS);
    Readable.fromWeb(body as NodeReadableStream<Uint8Array>).pipe(res);
    void streamChatTurn(channel, "req-0000-test", {
      handleTurn: scenario.handleTurn,
      planner: scenario.planner,
      presentationWaitMs: scenario.presentationWaitMs,
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const reply: OutboundResponse = {
  text: "explore_catalog: 1 rule matched.",
  kind: "tool_result",
  intent: "read",
  tool_results: [
    {
      status: "ok",
      tool: "explore_catalog",
      data: { rules: ["R-JOB-001"] },
      evidence_ref: "catalog:rules@1",
      observed_at: "2026-11-27T10:00:00.000Z",
    },
  ],
  evidence_refs: ["catalog:rules@1"],
  audit_ids: ["AUD-1"],
  request_id: "req-0000-test",
};

interface Frame {
  event: string;
  data: Record<string, unknown>;
}

/** Opens the stream with a real EventSource client (POST through its fetch) and collects named frames. */
function open(): { es: EventSource; frames: Frame[]; next: (event: string) => Promise<Frame> } {
  const frames: Frame[] = [];
  const waiters: { event: string; resolve: (f: Frame) => void }[] = [];
  const es = new EventSource(`${base}/chat/stream`, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        method: "POST",
        headers: { ...init.headers, "Content-Type": "application/json" },
        body: JSON.stringify({ text: "explore_catalog query=R-JOB-001" }),
      }),
  });
  for (const event of ["turn", "delta", "activity", "answer", "final", "error"]) {
    es.addEventListener(event, (message) => {
      const frame = { event, data: JSON.parse(message.data) as Record<string, unknown> };
      frames.push(frame);
      for (const waiter of waiters.filter((w) => w.event === event)) waiter.resolve(frame);
    });
  }
  // The server ends the stream after the final frame; without a close the client would reconnect.
  es.addEventListener("final", () => es.close());
  es.addEventListener("error", () => es.close());
  const next = (event: string) =>
    new Promise<Frame>((resolve) => {
      const seen = frames.find((f) => f.event === event);
      if (seen) resolve(seen);
      else waiters.push({ event, resolve });
    });
  return { es, frames, next };
}

/** A promise and its resolver: what a test releases once it has seen what it waits for. */
function gate<T = void>() {
  let release!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

describe("POST /chat/stream frames (shared/console/chat-stream.ts over shared/http/sse.ts)", () => {
  it("C-313 C-337: the answer's frames arrive in order and a final frame with the deterministic plan follows the answer", async () => {
    scenario = { handleTurn: async () => reply };
    const { next, frames } = open();
    const final = await next("final");
    expect(frames.map((f) => f.event)).toEqual(["turn", "activity", "answer", "final"]);
    expect(frames[1]?.data).toEqual({
      index: 0,
      tool: "explore_catalog",
      status: "ok",
      evidence_ref: "catalog:rules@1",
      observed_at: "2026-11-27T10:00:00.000Z",
    });
    expect(frames[2]?.data).toEqual(reply);
    expect(final.data).toEqual({
      request_id: "req-0000-test",
      plan_source: "deterministic",
      fallback_reason: "no_planner",
      presentation: {
        artifact: "presentation_artifact",
        version: 1,
        blocks: [
          { type: "answer_text" },
          { type: "evidence", result_index: 0, evidence_ref: "catalog:rules@1", layout: "summary" },
        ],
      },
    });
  });

  it("C-314: SSE comment heartbeats arrive while the turn is idle", async () => {
    const sawHeartbeat = gate();
    scenario = { heartbeatMs: 100, handleTurn: () => sawHeartbeat.promise.then(() => reply) };
    // Raw bytes: an EventSource client hides comment lines by design.
    const res = await fetch(`${base}/chat/stream`, { method: "POST" });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes(": heartbeat\n\n")) text += decoder.decode((await reader.read()).value, { stream: true });
    sawHeartbeat.release();
    while (!text.includes("event: final")) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
    }
    // The heartbeat came before the answer: the turn was idle.
    expect(text.indexOf(": heartbeat")).toBeLessThan(text.indexOf("event: answer"));
    expect(text).toContain("event: final");
  });

  it("C-315: closing the stream aborts the turn's provider work (the signal the narrator passes to its provider)", async () => {
    const started = gate<AbortSignal>();
    const aborted = gate<unknown>();
    scenario = {
      handleTurn: (hooks) => {
        const signal = hooks.abortSignal as AbortSignal;
        started.release(signal);
        return new Promise((_, reject) => {
          signal.addEventListener("abort", () => {
            aborted.release(signal.reason);
            reject(signal.reason);
          });
        });
      },
    };
    const { es, next } = open();
    await next("turn");
    const signal = await started.promise;
    expect(signal.aborted).toBe(false);
    es.close();
    await aborted.promise;
    expect(signal.aborted).toBe(true);
  });

  it("narrator text arrives as provisional delta frames before the validated answer replaces it", async () => {
    scenario = {
      handleTurn: async (hooks) => {
        hooks.onDelta?.("explore_catalog: ");
        hooks.onDelta?.("1 rule matched.");
        return reply;
      },
    };
    const { next, frames } = open();
    await next("final");
    expect(frames.filter((f) => f.event === "delta").map((f) => f.data)).toEqual([
      { text: "explore_catalog: ", provisional: true },
      { text: "1 rule matched.", provisional: true },
    ]);
    expect(frames.map((f) => f.event).indexOf("answer")).toBeGreaterThan(frames.map((f) => f.event).indexOf("delta"));
  });

  it("a turn that fails after the stream opened ends with an error frame in the envelope", async () => {
    scenario = { handleTurn: async () => Promise.reject(new Error("storage said: https://acct.blob.core/x?sig=1")) };
    const { next, frames } = open();
    const error = await next("error");
    expect(error.data).toEqual({
      detail: "the turn failed; nothing more will be sent on this stream",
      request_id: "req-0000-test",
    });
    expect(frames.map((f) => f.event)).toEqual(["turn", "error"]);
  });
});

describe("the final frame's presentation plan (§4 streaming rules, §8 presentation planning wait)", () => {
  const narratorPlan = {
    artifact: "presentation_artifact",
    version: 1,
    blocks: [
      { type: "evidence", result_index: 0, evidence_ref: "catalog:rules@1", layout: "table" },
      { type: "answer_text" },
    ],
  };

  it("a valid alternative plan within the wait replaces the deterministic one", async () => {
    scenario = { handleTurn: async () => reply, planner: { planPresentation: async () => narratorPlan } };
    const { next } = open();
    expect((await next("final")).data).toMatchObject({ plan_source: "narrator", presentation: narratorPlan });
  });

  it("C-338 C-339: a planner slower than the wait is stopped and the final frame keeps the deterministic plan", async () => {
    const plannerAborted = gate();
    scenario = {
      handleTurn: async () => reply,
      presentationWaitMs: 50,
      planner: {
        planPresentation: ({ abortSignal }) =>
          new Promise(() => abortSignal.addEventListener("abort", () => plannerAborted.release())),
      },
    };
    const { next } = open();
    const final = await next("final");
    expect(final.data).toMatchObject({ plan_source: "deterministic", fallback_reason: "timeout" });
    expect((final.data.presentation as { blocks: unknown[] }).blocks[0]).toEqual({ type: "answer_text" });
    await plannerAborted.promise;
  });

  it("C-341: invalid planner output (junk, or evidence the reply does not hold) keeps the deterministic plan", async () => {
    for (const junk of [
      "render it nicely",
      { ...narratorPlan, blocks: [{ type: "evidence", result_index: 0, evidence_ref: "AUD-forged", layout: "table" }] },
      { ...narratorPlan, blocks: [{ type: "evidence", result_index: 3, layout: "json" }] },
      { ...narratorPlan, blocks: [{ type: "answer_text", text: "99.9% healthy" }] },
    ]) {
      scenario = { handleTurn: async () => reply, planner: { planPresentation: async () => junk } };
      const { next } = open();
      expect((await next("final")).data, JSON.stringify(junk)).toMatchObject({
        plan_source: "deterministic",
        fallback_reason: "invalid_output",
      });
    }
  });

  it("C-342: a planner provider failure keeps the deterministic plan", async () => {
    scenario = {
      handleTurn: async () => reply,
      planner: { planPresentation: async () => Promise.reject(new Error("429 Too Many Requests")) },
    };
    const { next } = open();
    expect((await next("final")).data).toMatchObject({
      plan_source: "deterministic",
      fallback_reason: "provider_failure",
    });
  });

  it("C-340: closing the stream while the plan is awaited cancels the planner", async () => {
    const planning = gate<AbortSignal>();
    const plannerAborted = gate();
    scenario = {
      handleTurn: async () => reply,
      planner: {
        planPresentation: ({ abortSignal }) => {
          planning.release(abortSignal);
          return new Promise(() => abortSignal.addEventListener("abort", () => plannerAborted.release()));
        },
      },
    };
    const { es, next } = open();
    await next("answer");
    await planning.promise;
    es.close();
    await plannerAborted.promise;
  });

  it("C-340: a cancelled planning wait answers with the deterministic plan", async () => {
    const cancel = new AbortController();
    const plan = planFor(
      reply,
      { planner: { planPresentation: () => new Promise(() => cancel.abort()) } },
      cancel.signal,
    );
    expect(await plan).toMatchObject({ source: "deterministic", fallback: "cancelled" });
  });
});
