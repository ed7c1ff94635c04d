import { randomUUID } from "node:crypto";
import type { Caller, Role } from "../../auth/roles.js";
import { type AuditActor, type AuditLog, atLeastRole, auditEvidence } from "../../ops/audit.js";
import type { EvidenceStore } from "../../ops/evidence-store.js";
import { redactSecrets } from "../../ops/secret-scanner.js";
import type { Severity } from "../../ops/rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "../../ops/verifier/verifier.js";
import { ApprovalLimitError, type ApprovalService } from "../approvals/approval-service.js";
import type { RecurrentQueryWatch } from "../recurrent-query.js";
import type { ToolRegistry } from "../tools/registry.js";
import {
  effectiveRole,
  invokeTool,
  meetsFloor,
  refusalText,
  type Tool,
  type ToolContext,
  type ToolOk,
  type ToolResult,
} from "../tools/tool.js";
import { NO_NARRATOR, type Narrator } from "./narrator.js";
import { createNarratorRules, type NarratedFields, type PresentationOutcome } from "./narrator-rules.js";
import { leadingVerb, parseCommand } from "./verb-parser.js";

/** A vendor-neutral conversation turn (spec §2.4 InboundTurn). */
export interface InboundTurn {
  text: string;
  /** The conversation target chosen in the UI. */
  target_agent?: string;
  /** The agent named by the incident link the conversation was opened from. */
  incident_agent?: string;
  /**
   * Earlier turns of the conversation (the transport's, newest last) a follow-up is translated
   * with; untrusted data, bounded by the coordinator (rule 5).
   */
  prior_turns?: string[];
}

/** The intent class of a turn (spec §1 item 5). */
export type Intent = "read" | "simulate" | "approve" | "breakglass" | "none";

/** How the coordinator answered. */
export type ReplyKind =
  | "tool_result"
  | "refused"
  | "blocked"
  | "glossary"
  | "action_context_abstention"
  | "lifecycle_abstention"
  | "reasoning_unavailable"
  | "approval_filed"
  | "invalid_command"
  /** Rule 4: one bounded clarifying question; nothing ran. */
  | "clarification"
  /** Rules 4–6: a deterministic abstention (a discarded translation, an invalid or failed plan). */
  | "abstention"
  /** Rule 7: tools disagree about the same resource; both evidence sets, no rendering. */
  | "conflict";

/** The vendor-neutral reply (spec §2.4 OutboundResponse): text plus the evidence behind it. */
export interface OutboundResponse extends NarratedFields {
  text: string;
  kind: ReplyKind;
  intent: Intent;
  tool_results: ToolResult[];
  evidence_refs: string[];
  audit_ids: string[];
  approval_id?: string;
  request_id: string;
}

/**
 * What a transport lets the coordinator start for one turn: the durable approval orchestration
 * (filed items) and its decision event (decided items). Hooks handle their own failures: the item
 * is parked durably before either runs.
 */
export interface TurnHooks {
  approvalFiled?(approvalId: string, requestId: string): Promise<void>;
  approvalDecided?(approvalId: string): Promise<void>;
  /**
   * Aborted when the turn's client is gone (a closed `/chat/stream`): narrator calls pass it to the
   * provider request (`abortSignal`), so closing the stream cancels the provider work.
   */
  abortSignal?: AbortSignal;
  /**
   * Streamed transports only: a narrator's rendering, piece by piece, as the provider produces it.
   * Provisional — the validator (rule 3) has not seen it; the reply's final text replaces it.
   */
  onDelta?(text: string): void;
  /**
   * Each tool result as soon as its call finished (and was audited), before the reply is composed:
   * a channel's progress stream shows the activities of a long turn as they happen.
   */
  onToolResult?(result: ToolResult): void;
  /**
   * Leave the presentation pass (rule 2) to the transport, which calls `coordinator.present`
   * later; the reply keeps the deterministic preview (`presentation.status: deferred`).
   */
  deferPresentation?: boolean;
}

/** One turn as every coordinator rule sees it. */
export interface TurnContext {
  readonly caller: Caller;
  /** The caller's effective role (a turn without one never reaches the rules). */
  readonly role: Role;
  readonly inbound: InboundTurn;
  /** The turn's text, trimmed. */
  readonly text: string;
  readonly requestId: string;
  readonly hooks: TurnHooks;
}

/**
 * One numbered coordinator rule of spec operator-console.md §1: it answers the turn, or returns
 * undefined to hand it to the next rule.
 */
export interface CoordinatorRule {
  readonly id: string;
  /** The rule's number in the spec's list. */
  readonly rule: number;
  handle(turn: TurnContext): OutboundResponse | undefined | Promise<OutboundResponse | undefined>;
}

export interface CoordinatorDependencies {
  registry: ToolRegistry;
  audit: AuditLog;
  approvals: ApprovalService;
  verify(action: ProposedAction): Promise<VerifierReport>;
  narrator?: Narrator;
  /** Where evidence too large for an audit entry goes; without one the entry keeps its digest only. */
  evidence?: EvidenceStore;
  now?: () => Date;
  /** Counts each invoked tool call's argument shape (`console.recurrent_query`). */
  recurrent?: RecurrentQueryWatch;
  /** Action-type ids the grounded-answer validator treats as canonical identifiers (rule 3). */
  actionTypes?: readonly string[];
}

/** The canonical glossary (coordinator rule 9). */
export const GLOSSARY = {
  t2_eligibility:
    "T2 eligibility is the verifier's deterministic check of a proposed action against current state: every precondition of its action type must hold (eligible); a failed precondition denies it; a precondition that cannot be observed makes the verifier abstain and name the missing evidence. A language model never grants eligibility.",
  insufficient_evidence:
    "With insufficient evidence the verifier abstains rather than guesses: the reply names the missing evidence, and a write-class call is filed for human approval (enqueue_hil, audit reason verifier_abstained) instead of running.",
} as const;

/** The deterministic action-context abstention (coordinator rule 10). */
export const ACTION_CONTEXT_ABSTENTION =
  'I cannot answer that without the exact action context. Give the exact action type, target resource, proposal, approval id or action evidence (for example: run_runbook name=retry_failed_job params={"job_id":"…"} dry_run=true, or approve_hil approval_id=apr_…). Nothing was changed.';

/** Reply to a question naming an exact action, approval, correlation or idempotency selector (rule 9). */
export const LIFECYCLE_ABSTENTION =
  "That question names an exact action, approval, correlation or idempotency selector; its answer needs server-owned action lifecycle evidence. Ask with a tool: query_audit event_id=… or actor=…, list_hil (Approver), or explain_verdict event_id=…. Nothing was changed.";

const GLOSSARY_QUESTION = /\b(what|explain|define|describe|meaning|how does|how do)\b/i;
const T2_TERMS = /\b(t2|eligibility|eligible)\b/i;
const EVIDENCE_TERMS = /\binsufficient[-\s]evidence\b|\babstain|\babstention\b/i;
const LIFECYCLE_TERMS = /\b(propos\w*|approv\w*|execut\w*|verif\w*|retr(y|ies|ied)|idempoten\w*)\b/i;
const SELECTOR =
  /\bapr_[0-9a-f]{24}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b|\bINC-[0-9a-f]{12}\b|\b(idempotency[_ ]key|correlation[_ ]id|action[_ ]hash)\s*[=:]\s*\S+/i;
const RULE_ID = /\bR-[A-Z]+-\d{3}\b/;

const PREVIEW_LIMIT = 4000;

function intentOf(tool: Tool): Intent {
  const cls = tool.descriptor.side_effect_class;
  return cls === "read" ? "read" : cls === "simulate" ? "simulate" : cls === "breakglass" ? "breakglass" : "approve";
}

/** The deterministic preview of a tool result, the reply when no narrator renders it. */
export function previewOf(result: ToolResult): string {
  if (result.status === "ok") {
    const body = JSON.stringify(result.data, null, 2);
    return `${result.tool}: ok (evidence ${result.evidence_ref}, observed ${result.observed_at})\n${body.length > PREVIEW_LIMIT ? `${body.slice(0, PREVIEW_LIMIT)}\n[OUTPUT TRUNCATED]` : body}`;
  }
  const issues = result.error.issues?.map((i) => `${i.loc.join(".") || "(arguments)"}: ${i.msg}`).join("; ");
  return `${result.tool}: ${result.status} (${result.error.type}) ${result.error.message}${issues ? ` — ${issues}` : ""}`;
}

/** What an audit entry keeps of a result: small evidence inline, large evidence by reference (`auditEvidence`). */
async function evidenceOf(
  result: ToolResult,
  store: EvidenceStore | undefined,
  rbacFloor: Role,
): Promise<Record<string, unknown>> {
  if (result.status !== "ok") return { status: result.status, error: result.error };
  return {
    status: "ok",
    evidence_ref: result.evidence_ref,
    ...(await auditEvidence(result.data, { store, rbacFloor })),
  };
}

/**
 * The conversation coordinator (layer 2). Every turn is handled deterministically here; the
 * narrator is consulted only through its hooks, and with "none" never. Order of checks: the role
 * gate, the target/incident agent match (rule 8), an explicit command (rule 1 refusal, the verifier
 * re-check of write-class calls), the glossary (rule 9), the action-context abstention (rule 10),
 * a T0 direct hit, and otherwise the reasoning-unavailable reply (rule 11).
 */
export function createCoordinator(deps: CoordinatorDependencies) {
  const narrator = deps.narrator ?? NO_NARRATOR;
  const now = deps.now ?? (() => new Date());

  const reply = (
    requestId: string,
    kind: ReplyKind,
    text: string,
    extra: Partial<OutboundResponse> = {},
  ): OutboundResponse =>
    // Nothing a caller typed or a tool returned leaves with a secret in it (issue 21 item 3).
    redactSecrets({
      text,
      kind,
      intent: "none",
      tool_results: [],
      evidence_refs: [],
      audit_ids: [],
      request_id: requestId,
      ...extra,
    });

  async function runTool(
    tool: Tool,
    rawArgs: unknown,
    caller: Caller,
    role: Role,
    requestId: string,
    hooks: TurnHooks,
  ): Promise<OutboundResponse> {
    const context: ToolContext = { caller, role, requestId, now };
    const actor: AuditActor = { oid: caller.oid, name: caller.name };
    const intent = intentOf(tool);
    const descriptor = tool.descriptor;
    const argDetails = (rawArgs ?? {}) as Record<string, unknown>;
    const parsed = tool.args.safeParse(rawArgs ?? {});
    // Who may read this call's entries: the floor of the call (approval content raises it to Approver).
    const callFloor = parsed.success ? (tool.floorFor?.(parsed.data) ?? descriptor.rbac_floor) : descriptor.rbac_floor;
    // A result that depends on the caller's role (and the evidence kept of it) is readable only from that role up.
    const entryFloor = tool.roleScopedResult ? atLeastRole(callFloor, role) : callFloor;
    const auditBase = {
      actor,
      action: "console.tool_call",
      target: descriptor.name,
      request_id: requestId,
      visibility_floor: entryFloor,
    };
    const action = parsed.success ? tool.proposedAction?.(parsed.data) : undefined;
    let openedId: string | undefined;
    if (action) {
      // Write-class call: re-checked by the verifier; abstention or an unmet floor files an approval.
      const floor = tool.floorFor?.(parsed.data) ?? descriptor.rbac_floor;
      const report = await deps.verify(action);
      if (report.verdict === "deny") {
        const entry = await deps.audit.record({
          ...auditBase,
          outcome: "denied",
          details: {
            side_effect_class: descriptor.side_effect_class,
            intent,
            args: argDetails,
            decision: "deny",
            verifier_report: report,
          },
        });
        return reply(
          requestId,
          "refused",
          `Refused: the verifier denies ${action.action_type} on ${action.target}: ${report.reason}. Nothing was executed.`,
          { intent, audit_ids: [entry.audit_id] },
        );
      }
      // Who may run what without an approval is the approval authority's rule (an Owner's kill switch files one too).
      const cause =
        report.verdict === "abstain"
          ? "verifier_abstained"
          : !meetsFloor(role, floor)
            ? "rbac_floor_not_met"
            : deps.approvals.authority.filingCause(role, action.action_type, report.verdict);
      if (cause) {
        const severity: Severity = action.action_type === "kill_switch" ? "critical" : "medium";
        let item: Awaited<ReturnType<ApprovalService["request"]>>;
        try {
          item = await deps.approvals.request({
            action,
            requester: actor,
            reason: "verifier_abstained",
            severity,
            idempotencyKey: `console/${requestId}/${descriptor.name}`,
            requestId,
            now: now(),
          });
        } catch (error) {
          if (!(error instanceof ApprovalLimitError)) throw error;
          // Too many pending: refused with the reason, and nothing filed, started or sent.
          const entry = await deps.audit.record({
            ...auditBase,
            outcome: "denied",
            details: {
              side_effect_class: descriptor.side_effect_class,
              intent,
              args: argDetails,
              cause,
              ...error.details,
            },
          });
          return reply(requestId, "refused", `${error.message} Nothing was executed.`, {
            intent,
            audit_ids: [entry.audit_id],
          });
        }
        const entry = await deps.audit.record({
          ...auditBase,
          outcome: "denied",
          details: {
            side_effect_class: descriptor.side_effect_class,
            intent,
            args: argDetails,
            reason: "verifier_abstained",
            cause,
            approval_id: item.approval_id,
            verifier_report: report,
            required_role: floor,
            current_role: role,
          },
        });
        await hooks.approvalFiled?.(item.approval_id, requestId);
        const why =
          cause === "rbac_floor_not_met"
            ? `${descriptor.name} with these arguments requires the ${floor} role; your current role is ${role}`
            : cause === "approval_required"
              ? `${action.action_type} needs an Owner plus an approval by another Owner, whoever asks`
              : `the verifier abstains (missing evidence: ${report.missing_evidence.join(", ")})`;
        return reply(
          requestId,
          "approval_filed",
          `Not executed: ${why}. Filed human approval ${item.approval_id} (enqueue_hil) for an approver to decide.`,
          { intent, approval_id: item.approval_id, audit_ids: [entry.audit_id] },
        );
      }
      // Proceeds: the entry opened before the work is closed by the final one below.
      openedId = (
        await deps.audit.record({
          ...auditBase,
          action: "console.tool_started",
          outcome: "succeeded",
          details: {
            side_effect_class: descriptor.side_effect_class,
            intent,
            args: argDetails,
            verifier_report: report,
          },
        })
      ).audit_id;
    }
    const started = performance.now();
    const result = await invokeTool(tool, rawArgs, context);
    // The persisted latency evidence `POST /read-investigations` chooses its execution from.
    const durationMs = Math.round(performance.now() - started);
    // Only calls whose arguments validate are a shape someone could reuse.
    if (parsed.success) await deps.recurrent?.observe(descriptor.name, rawArgs ?? {}, caller, now());
    const auditIds: string[] = openedId ? [openedId] : [];
    if (tool.audited) {
      const eventId = typeof argDetails.event_id === "string" ? argDetails.event_id : undefined;
      const entry = await deps.audit.record({
        ...auditBase,
        outcome:
          result.status === "ok"
            ? "succeeded"
            : result.status === "error" && result.error.type === "forbidden"
              ? "denied"
              : "failed",
        details: {
          side_effect_class: descriptor.side_effect_class,
          intent,
          args: argDetails,
          duration_ms: durationMs,
          ...(eventId ? { event_id: eventId } : {}),
          ...(openedId ? { opened_audit_id: openedId } : {}),
          ...(descriptor.side_effect_class === "simulate" ? { mode: "observation" } : {}),
          ...(await evidenceOf(result, deps.evidence, entryFloor)),
        },
      });
      auditIds.push(entry.audit_id);
    }
    hooks.onToolResult?.(result);
    if (result.status === "ok" && descriptor.side_effect_class === "approve") {
      const decided = (result.data as { approval_id?: unknown }).approval_id;
      if (typeof decided === "string") await hooks.approvalDecided?.(decided);
    }
    return reply(requestId, "tool_result", previewOf(result), {
      intent,
      tool_results: [result],
      evidence_refs: result.status === "ok" ? [result.evidence_ref] : [],
      audit_ids: auditIds,
    });
  }

  /** The context every rule sees: a caller who holds a role. */
  const respond = (turn: TurnContext) => ({
    runTool: (tool: Tool, args: Record<string, unknown> | undefined) =>
      runTool(tool, args, turn.caller, turn.role, turn.requestId, turn.hooks),
  });

  const narratorRules = narrator.translate
    ? createNarratorRules<OutboundResponse>({
        narrator,
        registry: deps.registry,
        audit: deps.audit,
        ...(deps.actionTypes ? { actionTypes: deps.actionTypes } : {}),
        runTool: (turn, tool, args) => respond(turn as TurnContext).runTool(tool, args),
        reply: (turn, kind, text, extra) => reply(turn.requestId, kind as ReplyKind, text, extra),
      })
    : undefined;

  /**
   * The coordinator rules of spec operator-console.md §1, in the order a turn meets them; the first
   * that answers ends the turn. The narrator rules (2–7) slot in before the last entry (rule 11's
   * canned reply) when a narrator that implements them is configured.
   */
  const rules: readonly CoordinatorRule[] = [
    {
      id: "rule-8-agent-match",
      rule: 8,
      handle: (turn) =>
        turn.inbound.target_agent !== undefined &&
        turn.inbound.incident_agent !== undefined &&
        turn.inbound.target_agent !== turn.inbound.incident_agent
          ? reply(
              turn.requestId,
              "blocked",
              `Blocked: the chosen agent ${turn.inbound.target_agent} does not match the incident link's agent ${turn.inbound.incident_agent}. No evidence was gathered.`,
            )
          : undefined,
    },
    {
      id: "rule-1-explicit-command",
      rule: 1,
      handle: async (turn) => {
        const verb = leadingVerb(turn.text);
        if (verb === "enqueue_hil")
          return reply(
            turn.requestId,
            "refused",
            "Refused: enqueue_hil is coordinator-internal and cannot be invoked directly. The tool was not invoked.",
          );
        const tool = verb ? deps.registry.get(verb) : undefined;
        if (!tool) return undefined;
        if (!meetsFloor(turn.role, tool.descriptor.rbac_floor))
          return reply(
            turn.requestId,
            "refused",
            refusalText(tool.descriptor.name, tool.descriptor.rbac_floor, turn.role),
            { intent: intentOf(tool) },
          );
        const command = parseCommand(turn.text, tool.jsonArg);
        if (!command.ok)
          return reply(
            turn.requestId,
            "invalid_command",
            `${tool.descriptor.name}: ${command.error}. Usage: ${tool.descriptor.argument_hint}. The tool was not invoked.`,
            { intent: intentOf(tool) },
          );
        return respond(turn).runTool(tool, command.args);
      },
    },
    {
      id: "rule-9-glossary",
      rule: 9,
      handle: (turn) => {
        const { text, requestId } = turn;
        if (GLOSSARY_QUESTION.test(text) && !SELECTOR.test(text)) {
          if (T2_TERMS.test(text)) return reply(requestId, "glossary", GLOSSARY.t2_eligibility);
          if (EVIDENCE_TERMS.test(text)) return reply(requestId, "glossary", GLOSSARY.insufficient_evidence);
        }
        // An exact selector still needs server-owned action lifecycle evidence.
        if (SELECTOR.test(text) && LIFECYCLE_TERMS.test(text))
          return reply(requestId, "lifecycle_abstention", LIFECYCLE_ABSTENTION);
        return undefined;
      },
    },
    {
      // A T0 direct hit is answered whether or not the narrator is available: a rule id named in
      // the text is looked up in the catalog.
      id: "rule-11-t0-direct-hit",
      rule: 11,
      handle: (turn) => {
        const ruleId = RULE_ID.exec(turn.text)?.[0];
        const explore = deps.registry.get("explore_catalog");
        return ruleId && explore ? respond(turn).runTool(explore, { query: ruleId }) : undefined;
      },
    },
    {
      id: "rule-10-action-context",
      rule: 10,
      handle: (turn) =>
        LIFECYCLE_TERMS.test(turn.text)
          ? reply(turn.requestId, "action_context_abstention", ACTION_CONTEXT_ABSTENTION)
          : undefined,
    },
    // Narrator rules 2–7 (narrator-rules.ts), when a narrator that translates is configured.
    ...(narratorRules?.rules ?? []),
    {
      id: "rule-11-reasoning-unavailable",
      rule: 11,
      handle: async (turn) => {
        const visible = deps.registry.search(turn.role).map((d) => d.name);
        if (!narrator.available() || (await narratorRules?.translationFailed(turn)))
          return reply(
            turn.requestId,
            "reasoning_unavailable",
            `The reasoning layer is temporarily unavailable, so free-text questions cannot be translated. Direct lookups still work: type a tool name with its arguments (for example "explore_catalog query=job.failed" or "query_audit limit=20"), or "search_tools". Tools for your role (${turn.role}): ${visible.join(", ")}.`,
          );
        return reply(
          turn.requestId,
          "reasoning_unavailable",
          `No deterministic match; tools for your role (${turn.role}): ${visible.join(", ")}.`,
        );
      },
    },
  ];

  return {
    narrator,
    /** The coordinator rules in the order a turn meets them (ids and spec numbers). */
    rules: rules.map(({ id, rule }) => ({ id, rule })),
    /**
     * The presentation pass (rule 2, checked by rule 3) of a reply made with `deferPresentation`:
     * the streams' final event. Returns the reply with the rendered text, or unchanged text and
     * `presentation.status: deterministic` (and the reason, audited) on any failure or rejection.
     */
    async present(input: {
      caller: Caller;
      /** The turn's text as sent. */
      text: string;
      reply: OutboundResponse;
      abortSignal?: AbortSignal;
    }): Promise<OutboundResponse> {
      const role = effectiveRole(input.caller);
      const { reply: original } = input;
      const ok = original.tool_results.every((r) => r.status === "ok");
      const steps = original.steps ?? [];
      if (
        !narratorRules ||
        !role ||
        original.kind !== "tool_result" ||
        !ok ||
        steps.length !== original.tool_results.length
      )
        return original;
      const presented = await narratorRules.present(
        {
          caller: input.caller,
          role,
          text: input.text.trim(),
          requestId: original.request_id,
          ...(input.abortSignal ? { abortSignal: input.abortSignal } : {}),
        },
        steps.map((step, i) => ({ call: step.call, result: original.tool_results[i] as ToolOk })),
      );
      const outcome: PresentationOutcome = presented.outcome;
      return redactSecrets({
        ...original,
        ...(presented.text !== undefined ? { text: presented.text } : {}),
        presentation: outcome,
        audit_ids: presented.audit_id ? [...original.audit_ids, presented.audit_id] : original.audit_ids,
      });
    },
    /** Handles one turn for an authenticated caller; the audit entries are written before this returns. */
    async handleTurn(
      caller: Caller,
      inbound: InboundTurn,
      requestId: string = randomUUID(),
      hooks: TurnHooks = {},
    ): Promise<OutboundResponse> {
      const role = effectiveRole(caller);
      // Before every rule: a principal without a role sees nothing (rule 1's floor has no role to compare).
      if (!role)
        return reply(
          requestId,
          "blocked",
          "Access is blocked: your account has no application role assigned. Ask an Owner to assign one.",
        );
      const turn: TurnContext = { caller, role, inbound, text: inbound.text.trim(), requestId, hooks };
      for (const rule of rules) {
        const answer = await rule.handle(turn);
        if (answer !== undefined) return answer;
      }
      // The last rule always answers; this keeps the type honest.
      throw new Error("no coordinator rule answered the turn");
    },
  };
}

export type Coordinator = ReturnType<typeof createCoordinator>;
