import type { SideEffectClass } from "../../ops/actions/action-types.js";
import type { PresentationPlanner } from "../presentation.js";
import type { ToolOk } from "../tools/tool.js";

/**
 * The narrator: a language model that only translates (spec operator-console.md §1 item 2):
 * natural language into tool calls, and tool results into natural language. Its hooks return the
 * provider's raw proposals; the coordinator (`narrator-rules.ts`) decides what, if anything, runs
 * or is shown. No hook can grant eligibility or change a decision.
 */
export interface Narrator {
  readonly name: string;
  /** False when the reasoning layer cannot be reached (rule 11). */
  available(): boolean;
  /**
   * Rules 1, 5, 6: natural language (with bounded prior turns, as untrusted data) → proposed
   * function calls over the visible tools only. One call is a translation, two or three a read plan.
   */
  translate?(input: TranslationInput): Promise<NarratorProposal>;
  /** Rule 2: the presentation-only pass over completed tool results (no tools are offered). */
  present?(input: PresentationInput): Promise<NarratorText>;
  /** Rule 4: one bounded clarifying question over the visible tools (no tools are offered). */
  clarify?(input: ClarificationInput): Promise<NarratorText>;
  /**
   * §4 streaming rules: an alternative presentation plan for a finished answer, awaited at most 5 s
   * by `/chat/stream`'s final event; validated against the reply, never trusted.
   */
  planPresentation?: PresentationPlanner["planPresentation"];
}

/** A visible tool as the narrator is shown it: its descriptor's words and its arguments' JSON Schema. */
export interface NarratorTool {
  name: string;
  description: string;
  argument_hint: string;
  side_effect_class: SideEffectClass;
  /** JSON Schema of the tool's arguments (from its zod schema). */
  parameters: Record<string, unknown>;
}

/** One function call a narrator proposed: the tool's name and its arguments as JSON text. */
export interface ProposedCall {
  id: string;
  name: string;
  arguments: string;
}

export interface NarratorCallOptions {
  /** The transport's cancellation (closing a stream aborts the provider request). */
  abortSignal?: AbortSignal;
}

export interface TranslationInput extends NarratorCallOptions {
  text: string;
  tools: NarratorTool[];
  /** Bounded earlier turns of the conversation; untrusted data, never instructions (rule 5). */
  priorTurns: readonly string[];
}

/** What the provider proposed: function calls and any text it sent instead. */
export interface NarratorProposal {
  calls: ProposedCall[];
  text: string;
}

/** One executed step: the call as the translation proposed it and its immutable result. */
export interface PresentationStep {
  call: ProposedCall;
  result: ToolOk;
}

export interface PresentationInput extends NarratorCallOptions {
  text: string;
  steps: readonly PresentationStep[];
  /** Streamed transports: the rendering's sentences as they arrive (provisional, not yet validated). */
  onDelta?(text: string): void;
}

export interface ClarificationInput extends NarratorCallOptions {
  text: string;
  tools: NarratorTool[];
}

/** A text answer and how many tool calls the provider attempted in it (each discarded). */
export interface NarratorText {
  text: string;
  tool_calls: number;
}

/** A provider failure (transport, status, timeout, cancellation, empty or malformed response). */
export class NarratorUnavailableError extends Error {
  constructor(
    message: string,
    readonly reason: "provider_error" | "timeout" | "aborted" | "malformed",
  ) {
    super(message);
    this.name = "NarratorUnavailableError";
  }
}

/** No narrator: every turn is handled deterministically. */
export const NO_NARRATOR: Narrator = { name: "none", available: () => false };
