import type { SseChannel } from "../http/sse.js";
import type { OutboundResponse, TurnHooks } from "./coordinator/coordinator.js";
import {
  deterministicPresentation,
  type PresentationArtifact,
  type PresentationPlanner,
  validatePresentation,
} from "./presentation.js";

/** Spec operator-console.md §8: the final event waits at most 5 s for an alternative presentation plan. */
export const PRESENTATION_WAIT_MS = 5000;

/** Why the final event keeps the deterministic plan. */
export type PlanFallback =
  | "no_planner"
  /** The answer holds no tool result (a refusal, an abstention): there is nothing to lay out, so no provider call. */
  | "nothing_to_plan"
  | "timeout"
  | "cancelled"
  | "invalid_output"
  | "provider_failure";

/**
 * The frames of `POST /api/chat/stream`, in order (data is JSON, snake_case):
 * - `turn` — { request_id }: the turn was accepted.
 * - `delta` — { text, provisional: true }: a narrator's rendering as it arrives (none without a narrator).
 *   Not validated yet: the `answer` frame's text replaces every delta.
 * - `activity` — one per tool result: { index, tool, status, evidence_ref?, observed_at? }.
 * - `answer` — the reply exactly as `POST /api/chat` returns it (text, kind, evidence, audit ids).
 * - `final` — { request_id, presentation, plan_source, fallback_reason? }: the last frame of a turn.
 * - `error` — { detail, request_id }: the turn failed; the stream ends after it.
 */
export type ChatFrameEvent = "turn" | "delta" | "activity" | "answer" | "final" | "error";

export interface ChatStreamDependencies {
  /** Runs the turn through the coordinator with these hooks (the transport's approval hooks included). */
  handleTurn(hooks: Pick<TurnHooks, "abortSignal" | "onDelta">): Promise<OutboundResponse>;
  /** An alternative presentation planner (a narrator); none keeps the deterministic plan. */
  planner?: PresentationPlanner;
  presentationWaitMs?: number;
  /** Reports a failure that became an `error` frame (the transport logs it). */
  onError?(error: unknown): void;
}

/**
 * Streams one chat turn over `channel`: the frames above, then the end of the stream. Closing the
 * stream aborts the turn (the provider request with it) and the presentation planner.
 */
export async function streamChatTurn(
  channel: SseChannel,
  requestId: string,
  deps: ChatStreamDependencies,
): Promise<void> {
  const send = (event: ChatFrameEvent, data: unknown) => channel.send({ event, data });
  try {
    send("turn", { request_id: requestId });
    const reply = await deps.handleTurn({
      abortSignal: channel.abortSignal,
      onDelta: (text) => {
        if (text) send("delta", { text, provisional: true });
      },
    });
    if (channel.abortSignal.aborted) return;
    reply.tool_results.forEach((result, index) => {
      send("activity", {
        index,
        tool: result.tool,
        status: result.status,
        ...(result.status === "ok" ? { evidence_ref: result.evidence_ref, observed_at: result.observed_at } : {}),
      });
    });
    send("answer", reply);
    const plan = await planFor(reply, deps, channel.abortSignal);
    send("final", {
      request_id: requestId,
      presentation: plan.presentation,
      plan_source: plan.source,
      ...(plan.fallback ? { fallback_reason: plan.fallback } : {}),
    });
  } catch (error) {
    if (!channel.abortSignal.aborted) {
      deps.onError?.(error);
      send("error", { detail: "the turn failed; nothing more will be sent on this stream", request_id: requestId });
    }
  } finally {
    channel.close();
  }
}

/**
 * The final plan: the planner's when it answers validly within the wait, else the deterministic
 * one with the reason. The wait starts after the answer frame went out (§8 "after the answer is shown").
 */
export async function planFor(
  reply: OutboundResponse,
  deps: Pick<ChatStreamDependencies, "planner" | "presentationWaitMs">,
  abortSignal: AbortSignal,
): Promise<{ presentation: PresentationArtifact; source: "deterministic" | "narrator"; fallback?: PlanFallback }> {
  const deterministic = deterministicPresentation(reply);
  const keep = (fallback: PlanFallback) => ({
    presentation: deterministic,
    source: "deterministic" as const,
    fallback,
  });
  if (!deps.planner) return keep("no_planner");
  if (abortSignal.aborted) return keep("cancelled");
  if (reply.tool_results.length === 0) return keep("nothing_to_plan");
  const attempt = new AbortController();
  const onAbort = () => attempt.abort(abortSignal.reason);
  abortSignal.addEventListener("abort", onAbort, { once: true });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), deps.presentationWaitMs ?? PRESENTATION_WAIT_MS);
  });
  const cancelled = new Promise<"cancelled">((resolve) => {
    if (attempt.signal.aborted) resolve("cancelled");
    attempt.signal.addEventListener("abort", () => resolve("cancelled"), { once: true });
  });
  try {
    const outcome = await Promise.race([
      deps.planner
        .planPresentation({ reply, deterministic, abortSignal: attempt.signal })
        .then((candidate) => ({ candidate }))
        .catch(() => "provider_failure" as const),
      timedOut,
      cancelled,
    ]);
    if (typeof outcome === "string") return keep(outcome);
    const valid = validatePresentation(reply, outcome.candidate);
    return valid ? { presentation: valid, source: "narrator" } : keep("invalid_output");
  } finally {
    clearTimeout(timer);
    abortSignal.removeEventListener("abort", onAbort);
    // A planner still running after the wait is told to stop: its answer is no longer wanted.
    attempt.abort(new Error("presentation planning is over"));
  }
}
