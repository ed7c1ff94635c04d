import type { PresentationPlanner } from "../presentation.js";
import type { ToolDescriptor, ToolResult } from "../tools/tool.js";

/**
 * The narrator: a language model that only translates (spec §1 item 2). This issue ships "none";
 * the hooks below are where the next issue plugs in coordinator rules 2–7 without reshaping the
 * coordinator. No hook can grant eligibility or change a decision.
 */
export interface Narrator {
  readonly name: string;
  /** False when the reasoning layer cannot be reached (rule 11). */
  available(): boolean;
  /** Natural language → one canonical command over the visible tools (rule 1: only those schemas). */
  translate?(input: { text: string; tools: ToolDescriptor[]; abortSignal?: AbortSignal }): Promise<string | undefined>;
  /** Rule 2: the presentation-only pass over a completed tool result. */
  present?(input: { text: string; result: ToolResult; preview: string; abortSignal?: AbortSignal }): Promise<string>;
  /** Rule 4: one bounded clarifying question over the visible tools. */
  clarify?(input: { text: string; tools: ToolDescriptor[]; abortSignal?: AbortSignal }): Promise<string>;
  /** Rule 5: a single-tool follow-up from bounded prior turns (escaped as data). */
  contextual?(input: {
    text: string;
    priorTurns: string[];
    tools: ToolDescriptor[];
    abortSignal?: AbortSignal;
  }): Promise<string | undefined>;
  /** Rule 6: two or three canonical read commands for a compound request. */
  readPlan?(input: { text: string; tools: ToolDescriptor[]; abortSignal?: AbortSignal }): Promise<string[]>;
  /**
   * §4 streaming rules: an alternative presentation plan for a finished answer, awaited at most 5 s
   * by `/chat/stream`'s final event; validated against the reply, never trusted.
   */
  planPresentation?: PresentationPlanner["planPresentation"];
}

/** The narrator of this issue: none. Every turn is handled deterministically. */
export const NO_NARRATOR: Narrator = { name: "none", available: () => false };
