import { z } from "zod";
import type { ToolResult } from "./tools/tool.js";

/** What a plan is compiled from: the parts of the coordinator's reply (`OutboundResponse`) it reads. */
export interface PresentableReply {
  text: string;
  kind: string;
  tool_results: ToolResult[];
  evidence_refs: string[];
}

/**
 * The presentation artifact (spec operator-console.md §2.4, §9 item 2: `presentation_artifact`
 * version 1): how a client lays out one answer, compiled by the server from the immutable reply.
 * Blocks only point at evidence the reply holds; none carries a value of its own.
 */
export const presentationArtifactSchema = z.strictObject({
  artifact: z.literal("presentation_artifact"),
  version: z.literal(1),
  blocks: z
    .array(
      z.discriminatedUnion("type", [
        /** The answer's text as the reply states it. */
        z.strictObject({ type: z.literal("answer_text") }),
        /** One tool result (by its index in the reply's `tool_results`) with its evidence reference. */
        z.strictObject({
          type: z.literal("evidence"),
          result_index: z.number().int().min(0).max(31),
          evidence_ref: z.string().max(512).optional(),
          layout: z.enum(["summary", "table", "json"]),
        }),
      ]),
    )
    .min(1)
    .max(32),
});

export type PresentationArtifact = z.infer<typeof presentationArtifactSchema>;

/** The deterministic plan: the answer's text, then each tool result as a summary with its evidence. */
export function deterministicPresentation(reply: PresentableReply): PresentationArtifact {
  return {
    artifact: "presentation_artifact",
    version: 1,
    blocks: [
      { type: "answer_text" },
      ...reply.tool_results.slice(0, 31).map((result, index) => ({
        type: "evidence" as const,
        result_index: index,
        ...(result.status === "ok" ? { evidence_ref: result.evidence_ref } : {}),
        layout: "summary" as const,
      })),
    ],
  };
}

/**
 * Checks an alternative plan against the reply: well-formed, every evidence block naming a result
 * the reply holds with exactly that result's evidence reference. Undefined when it does not hold.
 */
export function validatePresentation(reply: PresentableReply, candidate: unknown): PresentationArtifact | undefined {
  const parsed = presentationArtifactSchema.safeParse(candidate);
  if (!parsed.success) return undefined;
  for (const block of parsed.data.blocks) {
    if (block.type !== "evidence") continue;
    const result = reply.tool_results[block.result_index];
    if (!result) return undefined;
    const ref = result.status === "ok" ? result.evidence_ref : undefined;
    if (block.evidence_ref !== ref) return undefined;
  }
  return parsed.data;
}

/**
 * Proposes an alternative presentation plan for a finished answer (a narrator may implement it).
 * It sees the immutable reply and the deterministic plan; what it returns is validated, never trusted.
 */
export interface PresentationPlanner {
  planPresentation(input: {
    reply: PresentableReply;
    deterministic: PresentationArtifact;
    abortSignal: AbortSignal;
  }): Promise<unknown>;
}
