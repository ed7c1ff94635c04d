import { z } from "zod";
import type { ToolOk } from "../tools/tool.js";

/**
 * The grounded-answer checks of coordinator rules 3 and 5 (spec operator-console.md §1).
 *
 * Rule 3 is where DESIGN §7's trap lives: a check that looks for a rendered number anywhere in the
 * serialized result passes "3 jobs failed" when any 3 appears anywhere (a port, a date, a count of
 * something else). Here every sentence of a rendering cites the fields it rests on, and each
 * number, ratio, timestamp and canonical id in the sentence must be found in *those* fields only.
 * Text is Unicode-normalized first (NFKC: full-width digits become ASCII), thousands separators are
 * dropped and abbreviations such as `1.2k` are expanded, so none of them carries a number past the
 * check.
 */

/** The longest rendering shown (characters); a longer one falls back to the preview (C-022). */
export const PRESENTATION_LIMIT = 4000;

/** Words that claim freshness; each needs the result's exact observation time in the same sentence (C-028). */
const FRESHNESS = /\b(current|currently|live|latest|up[- ]to[- ]date|right now)\b|현재|최신|실시간/i;

const RFC3339 = /\b\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})/g;

/** Canonical identifiers of the operations core: rule, incident, event/correlation (UUID) and approval ids. */
const CANONICAL_IDS = [
  /\bR-[A-Z]+-\d{3}\b/g,
  /\bINC-[0-9a-f]{12}\b/gi,
  /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi,
  /\bapr_[0-9a-f]{24}\b/gi,
];

const MULTIPLIERS: Record<string, number> = {
  k: 1e3,
  thousand: 1e3,
  천: 1e3,
  만: 1e4,
  m: 1e6,
  mn: 1e6,
  million: 1e6,
  b: 1e9,
  bn: 1e9,
  billion: 1e9,
  억: 1e8,
};

/** Number words a rendering might use instead of digits ("one" and "no" are left to prose). */
const NUMBER_WORDS: Record<string, number> = {
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
  eleven: 11,
  twelve: 12,
  dozen: 12,
  twenty: 20,
  hundred: 100,
};

/** NFKC, with every thousands separator between digit groups removed (`1,234`, `1 234`, `1'234` → `1234`). */
export function normalizeText(text: string): string {
  return text
    .normalize("NFKC")
    .replace(/[\u2212\u2010-\u2015]/g, "-")
    .replace(/(\d)[,\u00a0\u202f\u2009' _](?=\d{3}(?!\d))/g, "$1")
    .replace(/(\d)[,\u00a0\u202f\u2009' _](?=\d{3}(?!\d))/g, "$1");
}

/** The numeric values written in `text` (normalized), abbreviations expanded and number words read. */
export function numbersIn(text: string): number[] {
  const out: number[] = [];
  const re = /(\d+(?:\.\d+)?)(?:\s?(k|mn|m|bn|b|thousand|million|billion|천|만|억)(?![a-z]))?/gi;
  for (const m of normalizeText(text).matchAll(re)) {
    const value = Number(m[1]);
    const multiplier = m[2] ? (MULTIPLIERS[m[2].toLowerCase()] ?? 1) : 1;
    out.push(Math.round(value * multiplier * 1e6) / 1e6);
  }
  for (const m of normalizeText(text)
    .toLowerCase()
    .matchAll(/\b[a-z]+\b/g)) {
    const word = NUMBER_WORDS[m[0]];
    if (word !== undefined) out.push(word);
  }
  return out;
}

/** The canonical ids in `text` and the text without them (for the number scan). */
function idsIn(text: string, actionTypes: readonly string[]): { ids: string[]; rest: string } {
  const ids: string[] = [];
  let rest = text;
  const patterns = [
    ...CANONICAL_IDS,
    ...(actionTypes.length > 0
      ? [new RegExp(`\\b(${actionTypes.map((a) => a.replace(/[^\w]/g, "")).join("|")})\\b`, "g")]
      : []),
  ];
  for (const re of patterns)
    rest = rest.replace(re, (id) => {
      ids.push(id);
      return " ";
    });
  return { ids, rest };
}

/** One cited field: the result (by its evidence reference) and a path into it. */
export interface Citation {
  evidence_ref: string;
  field: string;
}

const renderingSchema = z.object({
  evidence_ref: z.string().min(1).max(500).optional(),
  sentences: z
    .array(
      z.object({
        text: z.string().min(1).max(1000),
        cites: z
          .array(z.object({ evidence_ref: z.string().max(500), field: z.string().max(300) }))
          .max(20)
          .default([]),
      }),
    )
    .min(1)
    .max(40),
});

/** Why a rendering is not shown (audited with the fallback). */
export type RejectionReason =
  | "provider_failure"
  | "tool_call_in_presentation"
  | "malformed_rendering"
  | "over_limit"
  | "missing_evidence_ref"
  | "unknown_citation"
  | "ungrounded_number"
  | "ungrounded_timestamp"
  | "ungrounded_identifier"
  | "stale_freshness_claim";

export type RenderingVerdict = { ok: true; text: string } | { ok: false; reason: RejectionReason; detail: string };

/** Reads a path such as `groups[0].key`, `groups.0.key` or `observed_at` in a result. */
function resolve(result: ToolOk, field: string): { found: boolean; value?: unknown } {
  const top: Record<string, unknown> = {
    observed_at: result.observed_at,
    evidence_ref: result.evidence_ref,
    tool: result.tool,
  };
  const parts = field
    .replace(/\[(\d+)\]/g, ".$1")
    .split(".")
    .filter((p) => p.length > 0);
  if (parts[0] === "data") parts.shift();
  else if (parts.length === 1 && parts[0] !== undefined && parts[0] in top)
    return { found: true, value: top[parts[0]] };
  let value: unknown = result.data;
  for (const part of parts) {
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, part)) return { found: false };
    value = (value as Record<string, unknown>)[part];
  }
  return { found: true, value };
}

/** What a cited value grounds: its numbers (a list: its length), its text (for timestamps and ids). */
function groundsOf(value: unknown): { numbers: Set<number>; text: string[] } | undefined {
  if (Array.isArray(value)) return { numbers: new Set([value.length]), text: [] };
  if (value !== null && typeof value === "object") return undefined;
  const text = String(value);
  return { numbers: new Set(typeof value === "number" ? [value] : numbersIn(text)), text: [normalizeText(text)] };
}

/**
 * Checks a presentation pass's output against the immutable results it presents and returns the
 * text to show, or why it is rejected. The output is the JSON rendering the presentation prompt
 * asks for; every sentence's numbers, ratios, timestamps and canonical ids must be in the fields
 * that sentence cites (C-024..C-028).
 */
export function validateRendering(
  raw: string,
  results: readonly ToolOk[],
  options: { actionTypes?: readonly string[] } = {},
): RenderingVerdict {
  const actionTypes = options.actionTypes ?? [];
  const json = raw
    .trim()
    .replace(/^```(?:json)?\s*/i, "")
    .replace(/\s*```$/, "");
  let parsed: z.infer<typeof renderingSchema>;
  try {
    const result = renderingSchema.safeParse(JSON.parse(json));
    if (!result.success) return { ok: false, reason: "malformed_rendering", detail: "not the rendering's shape" };
    parsed = result.data;
  } catch {
    return { ok: false, reason: "malformed_rendering", detail: "not JSON" };
  }
  const byRef = new Map(results.map((r) => [r.evidence_ref, r]));
  if (!parsed.evidence_ref || !byRef.has(parsed.evidence_ref))
    return { ok: false, reason: "missing_evidence_ref", detail: "the rendering names no evidence_ref of its results" };
  const sentences: string[] = [];
  for (const [i, sentence] of parsed.sentences.entries()) {
    const numbers = new Set<number>();
    const texts: string[] = [];
    for (const cite of sentence.cites) {
      const result = byRef.get(cite.evidence_ref);
      const resolved = result ? resolve(result, cite.field) : { found: false };
      const grounds = resolved.found ? groundsOf(resolved.value) : undefined;
      if (!grounds)
        return {
          ok: false,
          reason: "unknown_citation",
          detail: `sentence ${i + 1} cites ${cite.field}, which is not a single value of its result`,
        };
      for (const n of grounds.numbers) numbers.add(n);
      texts.push(...grounds.text);
    }
    const text = normalizeText(sentence.text);
    const cited = texts.join("\n").toLowerCase();
    const timestamps = [...text.matchAll(RFC3339)].map((m) => m[0]);
    for (const ts of timestamps)
      if (!cited.includes(ts.toLowerCase()))
        return {
          ok: false,
          reason: "ungrounded_timestamp",
          detail: `sentence ${i + 1}: ${ts} is not in its cited fields`,
        };
    const { ids, rest } = idsIn(text.replace(RFC3339, " "), actionTypes);
    for (const id of ids)
      if (!cited.includes(id.toLowerCase()))
        return {
          ok: false,
          reason: "ungrounded_identifier",
          detail: `sentence ${i + 1}: ${id} is not in its cited fields`,
        };
    for (const n of numbersIn(rest))
      if (!numbers.has(n))
        return { ok: false, reason: "ungrounded_number", detail: `sentence ${i + 1}: ${n} is not in its cited fields` };
    if (
      FRESHNESS.test(text) &&
      !results.some((r) => timestamps.includes(r.observed_at) || text.includes(r.observed_at))
    )
      return {
        ok: false,
        reason: "stale_freshness_claim",
        detail: `sentence ${i + 1} claims freshness without the result's observation time`,
      };
    sentences.push(sentence.text.trim());
  }
  const refs = [...new Set(results.map((r) => r.evidence_ref))];
  const text = `${sentences.join(" ")}\n(evidence: ${refs.join(", ")})`;
  if (text.length > PRESENTATION_LIMIT)
    return { ok: false, reason: "over_limit", detail: `${text.length} characters, limit ${PRESENTATION_LIMIT}` };
  return { ok: true, text };
}

/** Case, Unicode and separator normalization for rule 5's argument check. */
function squash(text: string): string {
  return normalizeText(text)
    .toLowerCase()
    .replace(/[\s,._\-:/'"`]+/g, "");
}

/**
 * Rule 5: the scalar argument values (strings and numbers, at any depth) that appear neither in
 * the current utterance nor in a prior turn, after Unicode and separator normalization (C-037).
 */
export function unsupportedScalars(args: unknown, sources: readonly string[]): string[] {
  const haystack = sources.map(squash).join("\u0000");
  const missing: string[] = [];
  const visit = (value: unknown) => {
    if (typeof value === "string" || typeof value === "number") {
      const needle = squash(String(value));
      if (needle.length > 0 && !haystack.includes(needle)) missing.push(String(value));
    } else if (Array.isArray(value)) for (const v of value) visit(v);
    else if (value !== null && typeof value === "object") for (const v of Object.values(value)) visit(v);
  };
  visit(args);
  return missing;
}
