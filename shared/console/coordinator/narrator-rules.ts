import { z } from "zod";
import type { Caller, Role } from "../../auth/roles.js";
import { canonicalJson } from "../../canonical-json.js";
import type { AuditLog } from "../../ops/audit.js";
import { type Conflict, findConflicts } from "../narrators/conflicts.js";
import { numbersIn, type RejectionReason, unsupportedScalars, validateRendering } from "../narrators/grounding.js";
import type { ToolRegistry } from "../tools/registry.js";
import { meetsFloor, type Tool, type ToolOk } from "../tools/tool.js";
import type { Narrator, NarratorProposal, NarratorTool, PresentationStep, ProposedCall } from "./narrator.js";
import { NarratorUnavailableError } from "./narrator.js";
import { parseCommand } from "./verb-parser.js";

/**
 * Coordinator rules 2–7 (spec operator-console.md §1): what the coordinator does with a narrator's
 * proposals. The narrator translates; everything that runs passes the canonical verb parser, the
 * tool's own validation, the role floor and (write-class) the verifier in `runTool`; everything
 * shown passes the grounded-answer validator or is the deterministic preview.
 */

/** The most prior turns a follow-up is translated with, and the longest one (rule 5, C-035). */
export const PRIOR_TURNS_LIMIT = 6;
export const PRIOR_TURN_CHARS = 2000;
/** The longest clarifying question (rule 4). */
export const CLARIFICATION_LIMIT = 300;

/** Rule 4's deterministic abstention (provider failure, format violation, or no clarifier). */
export const CLARIFICATION_ABSTENTION =
  'I could not map that to one tool, so nothing was run. Name the tool and its arguments (for example "query_audit limit=20"), or type "search_tools" to see the tools for your role.';
/** Rule 6's deterministic unverified abstention when a plan read fails. */
export const UNVERIFIED_ABSTENTION =
  "One of the reads this answer needs failed or is unavailable, so the remaining reads were not run and no answer is given: the evidence is incomplete and unverified.";
/** Rule 7's abstention when two tools disagree about the same resource. */
export const CONFLICT_ABSTENTION =
  "The tools disagree about the same resource, so no answer is given; both evidence sets are listed.";
/** A translation the coordinator discards (rules 1, 5, 6): nothing ran. */
export const TRANSLATION_DISCARDED =
  'I could not turn that into a valid request for the tools available to you, so nothing was run. Name the tool and its arguments directly, or type "search_tools".';

/** How a reply's text came to be (rule 2). */
export interface PresentationOutcome {
  status: "rendered" | "deterministic" | "deferred";
  /** Why the deterministic preview was kept. */
  reason?: RejectionReason | "no_presenter";
}

/** One executed step of a translated request: the call the narrator proposed, as it ran. */
export interface TurnStep {
  call: ProposedCall;
  /** The canonical command the call became. */
  command: string;
  tool: string;
  status: "ok" | "error" | "unavailable";
  evidence_ref?: string;
}

/** The reply fields the narrator rules add to an `OutboundResponse`. */
export interface NarratedFields {
  presentation?: PresentationOutcome;
  steps?: TurnStep[];
  conflicts?: Conflict[];
}

/** What the rules need of the coordinator's turn (a structural subset of `TurnContext`). */
export interface NarratorTurn {
  readonly caller: Caller;
  readonly role: Role;
  readonly text: string;
  readonly requestId: string;
  readonly inbound: { readonly prior_turns?: readonly string[] };
  readonly hooks: {
    readonly abortSignal?: AbortSignal;
    readonly deferPresentation?: boolean;
    onDelta?(text: string): void;
  };
}

/** A reply as the rules see it (the coordinator's `OutboundResponse`). */
export interface NarratedReply extends NarratedFields {
  text: string;
  kind: string;
  tool_results: import("../tools/tool.js").ToolResult[];
  evidence_refs: string[];
  audit_ids: string[];
}

export interface NarratorRuleDependencies<R extends NarratedReply> {
  narrator: Narrator;
  registry: ToolRegistry;
  audit: AuditLog;
  /** Action-type ids the validator treats as canonical identifiers. */
  actionTypes?: readonly string[];
  runTool(turn: NarratorTurn, tool: Tool, args: Record<string, unknown>): Promise<R>;
  reply(turn: NarratorTurn, kind: string, text: string, extra?: Partial<R>): R;
}

type ProposalState = { ok: true; proposal: NarratorProposal } | { ok: false; reason: string };

/** JSON Schemas of the tools' arguments, made once per tool. */
const parameterSchemas = new WeakMap<Tool, Record<string, unknown>>();
function parametersOf(tool: Tool): Record<string, unknown> {
  let schema = parameterSchemas.get(tool);
  if (!schema) {
    try {
      const { $schema: _ignored, ...rest } = z.toJSONSchema(tool.args, {
        io: "input",
        unrepresentable: "any",
      }) as Record<string, unknown>;
      schema = rest;
    } catch {
      schema = { type: "object" };
    }
    parameterSchemas.set(tool, schema);
  }
  return schema;
}

/** The prior turns a follow-up is translated with: the last few, each bounded. */
export function boundedPriorTurns(turns: readonly string[] | undefined): string[] {
  return (turns ?? []).slice(-PRIOR_TURNS_LIMIT).map((t) => String(t).slice(0, PRIOR_TURN_CHARS));
}

/** Builds rules 2–7 (to slot in before rule 11's canned reply) and the presentation pass streams call later. */
export function createNarratorRules<R extends NarratedReply>(deps: NarratorRuleDependencies<R>) {
  const { narrator, registry } = deps;
  const proposals = new WeakMap<NarratorTurn, Promise<ProposalState>>();

  /** The tools the principal may see, as the narrator is shown them (rule 1: nothing above the role). */
  const visibleTools = (role: Role): NarratorTool[] =>
    registry
      .search(role)
      .filter((d) => d.name !== "enqueue_hil")
      .flatMap((d) => {
        const tool = registry.get(d.name);
        return tool
          ? [
              {
                name: d.name,
                description: d.description,
                argument_hint: d.argument_hint,
                side_effect_class: d.side_effect_class,
                parameters: parametersOf(tool),
              },
            ]
          : [];
      });

  const proposalOf = (turn: NarratorTurn): Promise<ProposalState> => {
    let state = proposals.get(turn);
    if (!state) {
      const translate = narrator.translate;
      state = translate
        ? translate({
            text: turn.text,
            tools: visibleTools(turn.role),
            priorTurns: boundedPriorTurns(turn.inbound.prior_turns),
            ...(turn.hooks.abortSignal ? { abortSignal: turn.hooks.abortSignal } : {}),
          }).then(
            (proposal): ProposalState => ({ ok: true, proposal }),
            (error): ProposalState => ({
              ok: false,
              reason: error instanceof NarratorUnavailableError ? error.reason : "provider_error",
            }),
          )
        : Promise.resolve<ProposalState>({ ok: false, reason: "no_translator" });
      proposals.set(turn, state);
    }
    return state;
  };

  const auditDiscard = (turn: NarratorTurn, action: string, target: string, details: Record<string, unknown>) =>
    deps.audit.record({
      actor: { oid: turn.caller.oid, name: turn.caller.name },
      action,
      target,
      outcome: "denied",
      request_id: turn.requestId,
      details,
      visibility_floor: turn.role,
    });

  /** A translation discarded before anything ran, with the reason audited. */
  async function discarded(turn: NarratorTurn, reason: string, details: Record<string, unknown> = {}): Promise<R> {
    const entry = await auditDiscard(turn, "console.translation_discarded", "narrator", { reason, ...details });
    return deps.reply(turn, "abstention", TRANSLATION_DISCARDED, { audit_ids: [entry.audit_id] } as Partial<R>);
  }

  /** The call's arguments as a JSON object (an empty string means none), or undefined when they are not one. */
  const argumentsOf = (call: ProposedCall): Record<string, unknown> | undefined => {
    if (call.arguments.trim() === "") return {};
    try {
      const value = JSON.parse(call.arguments) as unknown;
      return value && typeof value === "object" && !Array.isArray(value)
        ? (value as Record<string, unknown>)
        : undefined;
    } catch {
      return undefined;
    }
  };

  /** A proposed call as a canonical command, re-parsed by the canonical verb parser and validated by the tool. */
  function checkedCall(
    turn: NarratorTurn,
    call: ProposedCall,
  ): { ok: true; tool: Tool; command: string; args: Record<string, unknown> } | { ok: false; reason: string } {
    const tool = call.name === "enqueue_hil" ? undefined : registry.get(call.name);
    // A tool above the role is as unknown to this principal as one that is not installed (rule 1).
    if (!tool || !meetsFloor(turn.role, tool.descriptor.rbac_floor)) return { ok: false, reason: "tool_not_available" };
    const json = argumentsOf(call);
    if (json === undefined) return { ok: false, reason: "arguments_not_json" };
    const command = `${tool.descriptor.name} ${JSON.stringify(json)}`;
    const parsed = parseCommand(command, tool.jsonArg);
    if (!parsed.ok || parsed.verb !== tool.descriptor.name) return { ok: false, reason: "not_a_canonical_command" };
    // Nothing partial runs: every argument validates first.
    const valid = tool.args.safeParse(parsed.args);
    if (!valid.success) return { ok: false, reason: "invalid_arguments" };
    const floor = tool.floorFor?.(valid.data) ?? tool.descriptor.rbac_floor;
    if (tool.descriptor.side_effect_class === "read" && !meetsFloor(turn.role, floor))
      return { ok: false, reason: "tool_not_available" };
    return { ok: true, tool, command, args: parsed.args };
  }

  const stepOf = (call: ProposedCall, command: string, reply: R): TurnStep => {
    const result = reply.tool_results[0];
    return {
      call,
      command,
      tool: call.name,
      status: result?.status ?? "error",
      ...(result?.status === "ok" ? { evidence_ref: result.evidence_ref } : {}),
    };
  };

  /**
   * Rule 2: one presentation-only pass over completed successful results, checked by rule 3's
   * validator; any failure keeps the deterministic preview, and a rejected rendering is audited.
   */
  async function present(
    turn: Pick<NarratorTurn, "caller" | "role" | "text" | "requestId"> & {
      abortSignal?: AbortSignal;
      onDelta?(text: string): void;
    },
    steps: readonly PresentationStep[],
  ): Promise<{ text?: string; outcome: PresentationOutcome; audit_id?: string }> {
    const results = steps.map((s) => s.result);
    let reason: RejectionReason | undefined;
    let detail = "";
    if (!narrator.present) return { outcome: { status: "deterministic", reason: "no_presenter" } };
    if (results.length === 0 || results.some((r) => !r.evidence_ref)) {
      reason = "missing_evidence_ref";
      detail = "a result has no evidence_ref";
    } else {
      try {
        const out = await narrator.present({
          text: turn.text,
          steps,
          ...(turn.abortSignal ? { abortSignal: turn.abortSignal } : {}),
          ...(turn.onDelta ? { onDelta: turn.onDelta } : {}),
        });
        if (out.tool_calls > 0) {
          // The presentation pass may call nothing: the call is discarded with its rendering.
          reason = "tool_call_in_presentation";
          detail = `${out.tool_calls} tool call(s) discarded`;
        } else {
          const verdict = validateRendering(out.text, results, { actionTypes: deps.actionTypes ?? [] });
          if (verdict.ok) return { text: verdict.text, outcome: { status: "rendered" } };
          reason = verdict.reason;
          detail = verdict.detail;
        }
      } catch (error) {
        reason = "provider_failure";
        detail = error instanceof NarratorUnavailableError ? error.reason : "provider_error";
      }
    }
    const entry = await deps.audit.record({
      actor: { oid: turn.caller.oid, name: turn.caller.name },
      action: "console.presentation_rejected",
      target: [...new Set(results.map((r) => r.tool))].join(",") || "narrator",
      outcome: "denied",
      request_id: turn.requestId,
      details: { reason, detail, evidence_refs: results.map((r) => r.evidence_ref) },
      visibility_floor: turn.role,
    });
    return { outcome: { status: "deterministic", reason }, audit_id: entry.audit_id };
  }

  /** Applies the presentation pass to a reply (unless the transport defers it to the stream's final event). */
  async function withPresentation(turn: NarratorTurn, reply: R, steps: PresentationStep[]): Promise<R> {
    if (turn.hooks.deferPresentation) return { ...reply, presentation: { status: "deferred" } };
    const { abortSignal, onDelta } = turn.hooks;
    const presented = await present(
      { ...turn, ...(abortSignal ? { abortSignal } : {}), ...(onDelta ? { onDelta: (t: string) => onDelta(t) } : {}) },
      steps,
    );
    return {
      ...reply,
      ...(presented.text !== undefined ? { text: presented.text } : {}),
      presentation: presented.outcome,
      audit_ids: presented.audit_id ? [...reply.audit_ids, presented.audit_id] : reply.audit_ids,
    };
  }

  /** Runs one checked translation (rules 1, 2, 5). */
  async function runSingle(turn: NarratorTurn, call: ProposedCall): Promise<R> {
    const checked = checkedCall(turn, call);
    if (!checked.ok) return discarded(turn, checked.reason, { tool: call.name });
    const reply = await deps.runTool(turn, checked.tool, checked.args);
    const step = stepOf(call, checked.command, reply);
    const withSteps = { ...reply, steps: [step] };
    const result = reply.tool_results[0];
    if (reply.kind !== "tool_result" || result?.status !== "ok") return withSteps;
    return withPresentation(turn, withSteps, [{ call, result }]);
  }

  /** Rule 6: a read plan of two or three distinct, installed, role-held reads; invalid runs nothing. */
  async function runPlan(turn: NarratorTurn, calls: ProposedCall[]): Promise<R> {
    if (calls.length > 3) return discarded(turn, "plan_too_long", { steps: calls.length });
    const checked: { call: ProposedCall; tool: Tool; command: string; args: Record<string, unknown> }[] = [];
    const seen = new Set<string>();
    for (const [i, call] of calls.entries()) {
      const c = checkedCall(turn, call);
      if (!c.ok) return discarded(turn, `plan_step_${c.reason}`, { step: i + 1, tool: call.name });
      if (c.tool.descriptor.side_effect_class !== "read")
        return discarded(turn, "plan_step_not_read", { step: i + 1, tool: call.name });
      const key = `${c.tool.descriptor.name} ${canonicalJson(c.tool.args.parse(c.args))}`;
      if (seen.has(key)) return discarded(turn, "plan_duplicate_step", { step: i + 1, tool: call.name });
      seen.add(key);
      checked.push({ call, ...c });
    }
    const replies: R[] = [];
    const steps: TurnStep[] = [];
    // Serially: each read finishes (and is audited) before the next starts (C-045).
    for (const c of checked) {
      const r = await deps.runTool(turn, c.tool, c.args);
      replies.push(r);
      steps.push(stepOf(c.call, c.command, r));
      if (r.kind !== "tool_result" || r.tool_results[0]?.status !== "ok") break;
    }
    const results = replies.flatMap((r) => r.tool_results);
    const merged = {
      tool_results: results,
      evidence_refs: replies.flatMap((r) => r.evidence_refs),
      audit_ids: replies.flatMap((r) => r.audit_ids),
      steps,
      intent: "read",
    } as unknown as Partial<R>;
    const failed = replies.find((r) => r.kind !== "tool_result" || r.tool_results[0]?.status !== "ok");
    if (failed || replies.length < checked.length) {
      // One failed read aborts the rest and skips synthesis (C-048, C-049).
      const which = steps.findIndex((s) => s.status !== "ok");
      return deps.reply(
        turn,
        "abstention",
        `${UNVERIFIED_ABSTENTION} Step ${which + 1} (${steps[which]?.tool}): ${failed?.text ?? "failed"}`,
        merged,
      );
    }
    const ok = results as ToolOk[];
    const conflicts = findConflicts(ok);
    if (conflicts.length > 0) {
      // A disagreement is shown as both evidence sets, never rendered by the model (C-051, C-052).
      const lines = conflicts.map(
        (c) =>
          `${c.identifier.field} ${c.identifier.value}, ${c.field}: ${c.sides.map((s) => `${s.tool} says ${JSON.stringify(s.value)} (evidence ${s.evidence_ref}, ${s.path})`).join("; ")}`,
      );
      return deps.reply(turn, "conflict", `${CONFLICT_ABSTENTION}\n${lines.join("\n")}`, {
        ...merged,
        conflicts,
      } as Partial<R>);
    }
    const preview = replies.map((r) => r.text).join("\n\n");
    const reply = deps.reply(turn, "tool_result", preview, merged);
    return withPresentation(
      turn,
      reply,
      checked.map((c, i) => ({ call: c.call, result: ok[i] as ToolOk })),
    );
  }

  /** Rule 4: one bounded question, or the deterministic abstention. */
  async function clarify(turn: NarratorTurn): Promise<R> {
    const abstain = () => deps.reply(turn, "abstention", CLARIFICATION_ABSTENTION);
    if (!narrator.clarify) return abstain();
    let out: { text: string; tool_calls: number };
    try {
      out = await narrator.clarify({
        text: turn.text,
        tools: visibleTools(turn.role),
        ...(turn.hooks.abortSignal ? { abortSignal: turn.hooks.abortSignal } : {}),
      });
    } catch {
      return abstain();
    }
    const question = out.text.normalize("NFKC").trim();
    const asked = turn.text.normalize("NFKC");
    const userNumbers = new Set(numbersIn(asked));
    const wellFormed =
      out.tool_calls === 0 &&
      question.length > 0 &&
      question.length <= CLARIFICATION_LIMIT &&
      !/[\r\n]/.test(question) &&
      question.endsWith("?") &&
      question.split("?").length === 2 &&
      // No command and no guessed argument: no key=value, no value the operator did not write.
      !/\b[a-z][a-z0-9_]*\s*=\s*\S/.test(question) &&
      !/[{}]/.test(question) &&
      numbersIn(question).every((n) => userNumbers.has(n));
    if (!wellFormed) return abstain();
    return deps.reply(turn, "clarification", question);
  }

  const proposed = async (turn: NarratorTurn) => {
    const state = await proposalOf(turn);
    return state.ok ? state.proposal.calls : undefined;
  };
  const isFollowUp = (turn: NarratorTurn) => boundedPriorTurns(turn.inbound.prior_turns).length > 0;

  const rules = [
    {
      // Rule 5: a follow-up translated with prior turns: one tool only, every scalar argument
      // found in the conversation, or the whole translation is discarded before any tool lookup.
      id: "rule-5-contextual-follow-up",
      rule: 5,
      handle: async (turn: NarratorTurn) => {
        if (!isFollowUp(turn)) return undefined;
        const calls = await proposed(turn);
        if (!calls || calls.length === 0) return undefined;
        if (calls.length > 1) return discarded(turn, "follow_up_needs_one_tool", { calls: calls.length });
        const call = calls[0] as ProposedCall;
        const args = argumentsOf(call);
        if (args === undefined) return discarded(turn, "arguments_not_json", { tool: call.name });
        const missing = unsupportedScalars(args, [turn.text, ...boundedPriorTurns(turn.inbound.prior_turns)]);
        if (missing.length > 0)
          return discarded(turn, "argument_not_in_conversation", { tool: call.name, values: missing.slice(0, 5) });
        return runSingle(turn, call);
      },
    },
    {
      id: "rule-6-read-plan",
      rule: 6,
      handle: async (turn: NarratorTurn) => {
        if (isFollowUp(turn)) return undefined;
        const calls = await proposed(turn);
        return calls && calls.length > 1 ? runPlan(turn, calls) : undefined;
      },
    },
    {
      // Rules 2 and 3: a single translated call, then the grounded presentation pass.
      id: "rule-2-grounded-answer",
      rule: 2,
      handle: async (turn: NarratorTurn) => {
        if (isFollowUp(turn)) return undefined;
        const calls = await proposed(turn);
        return calls?.length === 1 ? runSingle(turn, calls[0] as ProposedCall) : undefined;
      },
    },
    {
      id: "rule-4-clarification",
      rule: 4,
      handle: async (turn: NarratorTurn) => {
        const calls = await proposed(turn);
        return calls?.length === 0 ? clarify(turn) : undefined;
      },
    },
  ];

  return {
    rules,
    /** True when the turn's translation failed at the provider (rule 11 then says the layer is unavailable). */
    async translationFailed(turn: NarratorTurn): Promise<boolean> {
      const state = proposals.get(turn);
      return state !== undefined && !(await state).ok;
    },
    present,
    visibleTools,
  };
}
