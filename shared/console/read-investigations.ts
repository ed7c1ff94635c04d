import { z } from "zod";
import { sameObjectId } from "../auth/object-id.js";
import type { Caller, Role } from "../auth/roles.js";
import { canonicalJson } from "../canonical-json.js";
import { type FieldIssue, ForbiddenError, NotFoundError, ValidationError } from "../errors.js";
import { type AuditEntry, type AuditLog, atLeastRole } from "../ops/audit.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { OutboundResponse } from "./coordinator/coordinator.js";
import { UNVERIFIED_ABSTENTION } from "./coordinator/narrator-rules.js";
import { leadingVerb, parseCommand } from "./coordinator/verb-parser.js";
import type { ToolRegistry } from "./tools/registry.js";
import { meetsFloor, refusalText, type ToolResult } from "./tools/tool.js";

/**
 * Read investigations (spec operator-console.md §4 `POST /read-investigations`, §2.4 activity rule
 * 1): one to three canonical read commands run serially, executed directly, as a stream or detached
 * — chosen from the latency the same tools showed before, as recorded in the durable audit log
 * (`console.tool_call` entries carry `duration_ms`).
 */

/** At or below this estimate the investigation runs inside the request and answers JSON. */
export const DIRECT_MAX_MS = 2_000;
/**
 * At or below this (or with no evidence) it answers as a stream: heartbeats keep the connection
 * while the reads run. Above it the work is detached, well inside Azure's 230 s idle front-end limit.
 */
export const STREAMED_MAX_MS = 30_000;
/** The latest samples per tool the estimate uses (its 90th percentile). */
export const LATENCY_SAMPLES_PER_TOOL = 20;
/** How many recent tool-call entries the estimate reads. */
export const LATENCY_HISTORY_ENTRIES = 500;

/** The request body: canonical read commands, as the console's verb parser reads them. */
export const readInvestigationBody = z.strictObject({
  commands: z.array(z.string().trim().min(1).max(2000)).min(1).max(3),
});
export type ReadInvestigationRequest = z.output<typeof readInvestigationBody>;

export type ExecutionMode = "direct" | "streamed" | "detached";

/** One checked read of the plan. */
export interface InvestigationStep {
  index: number;
  tool: string;
  /** The command as given (trimmed): the coordinator re-parses it when it runs. */
  command: string;
}

/** A plan the role may run, with the floor its record gets: the highest floor of its tools. */
export interface InvestigationPlan {
  steps: InvestigationStep[];
  visibilityFloor: Role;
}

/**
 * Checks every command before anything runs (an invalid plan runs nothing): a parsable canonical
 * command of an installed `read`-class tool whose arguments validate, distinct from the others.
 * A tool above the caller's role is a 403 naming the tool and both roles (coordinator rule 1).
 */
export function planInvestigation(registry: ToolRegistry, role: Role, commands: readonly string[]): InvestigationPlan {
  const issues: FieldIssue[] = [];
  const steps: InvestigationStep[] = [];
  const seen = new Set<string>();
  let visibilityFloor: Role = "Reader";
  for (const [index, command] of commands.entries()) {
    const loc = ["body", "commands", index];
    const verb = leadingVerb(command);
    const tool = verb ? registry.get(verb) : undefined;
    if (!tool) {
      issues.push({ loc, msg: "not a canonical command of an installed tool", type: "unknown_tool" });
      continue;
    }
    const d = tool.descriptor;
    if (!meetsFloor(role, d.rbac_floor)) throw new ForbiddenError(refusalText(d.name, d.rbac_floor, role));
    if (d.side_effect_class !== "read") {
      issues.push({
        loc,
        msg: `${d.name} is ${d.side_effect_class}-class; only reads can be investigated`,
        type: "not_read",
      });
      continue;
    }
    const parsed = parseCommand(command, tool.jsonArg);
    const args = parsed.ok ? tool.args.safeParse(parsed.args) : undefined;
    if (!parsed.ok || !args?.success) {
      issues.push({
        loc,
        msg: parsed.ok ? `invalid arguments; usage: ${d.argument_hint}` : parsed.error,
        type: "invalid_command",
      });
      continue;
    }
    const key = `${d.name} ${canonicalJson(args.data)}`;
    if (seen.has(key)) {
      issues.push({ loc, msg: "the same read is given twice", type: "duplicate" });
      continue;
    }
    seen.add(key);
    visibilityFloor = atLeastRole(visibilityFloor, d.rbac_floor);
    steps.push({ index, tool: d.name, command });
  }
  if (issues.length) throw new ValidationError(issues);
  return { steps, visibilityFloor };
}

/** What the audit log says about one tool's latency. */
export interface ToolLatency {
  tool: string;
  samples: number;
  /** The 90th percentile (nearest rank) of the samples, or null with none. */
  p90_ms: number | null;
}

/** The latency evidence of `tools` from tool-call entries (newest first): the latest samples of each. */
export function latencyEvidence(entries: readonly AuditEntry[], tools: readonly string[]): ToolLatency[] {
  return [...new Set(tools)].map((tool) => {
    const samples: number[] = [];
    for (const e of entries) {
      if (e.action !== "console.tool_call" || e.target !== tool) continue;
      const ms = e.details.duration_ms;
      if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) continue;
      samples.push(ms);
      if (samples.length >= LATENCY_SAMPLES_PER_TOOL) break;
    }
    samples.sort((a, b) => a - b);
    const p90 = samples.length ? (samples[Math.ceil(samples.length * 0.9) - 1] as number) : null;
    return { tool, samples: samples.length, p90_ms: p90 };
  });
}

/** The execution chosen and why (returned to the caller as the decision's evidence). */
export interface ExecutionChoice {
  mode: ExecutionMode;
  /** The serial estimate: the sum of each step's tool p90; null when a tool has no samples. */
  estimate_ms: number | null;
  reason: "fast_history" | "no_latency_evidence" | "moderate_history" | "slow_history";
  latency: ToolLatency[];
  thresholds: { direct_max_ms: number; streamed_max_ms: number };
}

/** Chooses the execution of a plan from its tools' latency evidence. */
export function chooseExecution(
  steps: readonly InvestigationStep[],
  latency: readonly ToolLatency[],
  thresholds = { direct_max_ms: DIRECT_MAX_MS, streamed_max_ms: STREAMED_MAX_MS },
): ExecutionChoice {
  const byTool = new Map(latency.map((l) => [l.tool, l]));
  let estimate: number | null = 0;
  for (const step of steps) {
    const p90 = byTool.get(step.tool)?.p90_ms ?? null;
    estimate = p90 === null || estimate === null ? null : estimate + p90;
  }
  const base = { estimate_ms: estimate, latency: [...latency], thresholds };
  // Unknown latency: stream, so a slow read still keeps its connection alive and reports progress.
  if (estimate === null) return { mode: "streamed", reason: "no_latency_evidence", ...base };
  if (estimate <= thresholds.direct_max_ms) return { mode: "direct", reason: "fast_history", ...base };
  if (estimate <= thresholds.streamed_max_ms) return { mode: "streamed", reason: "moderate_history", ...base };
  return { mode: "detached", reason: "slow_history", ...base };
}

/** One read as it ran (activity entry, spec §2.4: a query, no argv or exit code). */
export interface InvestigationActivity {
  index: number;
  tool: string;
  input_kind: "query";
  status: ToolResult["status"] | "refused";
  evidence_ref?: string;
  observed_at?: string;
}

/** The investigation's result. */
export interface InvestigationResult {
  outcome: "answered" | "abstained";
  text: string;
  activities: InvestigationActivity[];
  tool_results: ToolResult[];
  evidence_refs: string[];
  audit_ids: string[];
}

/** What running a plan needs: the coordinator's turn handling (role gate, tool validation, audit). */
export interface InvestigationRunner {
  handleTurn(
    caller: Caller,
    turn: { text: string },
    requestId: string,
    hooks: { abortSignal?: AbortSignal },
  ): Promise<Pick<OutboundResponse, "kind" | "text" | "tool_results" | "evidence_refs" | "audit_ids">>;
}

/**
 * Runs the reads serially through the coordinator (each is validated, role-checked and audited
 * there); the first that fails or is unavailable aborts the rest and the answer is the
 * deterministic unverified abstention (coordinator rule 6). Stops between reads when aborted.
 */
export async function runInvestigation(
  runner: InvestigationRunner,
  input: {
    caller: Caller;
    plan: InvestigationPlan;
    requestId: string;
    abortSignal?: AbortSignal;
    onActivity?: (activity: InvestigationActivity) => void;
  },
): Promise<InvestigationResult> {
  const activities: InvestigationActivity[] = [];
  const toolResults: ToolResult[] = [];
  const evidenceRefs: string[] = [];
  const auditIds: string[] = [];
  const texts: string[] = [];
  let failed: { step: InvestigationStep; text: string } | undefined;
  for (const step of input.plan.steps) {
    if (input.abortSignal?.aborted) break;
    const reply = await runner.handleTurn(
      input.caller,
      { text: step.command },
      input.requestId,
      input.abortSignal ? { abortSignal: input.abortSignal } : {},
    );
    const result = reply.tool_results[0];
    const activity: InvestigationActivity = {
      index: step.index,
      tool: step.tool,
      input_kind: "query",
      status: result?.status ?? "refused",
      ...(result?.status === "ok" ? { evidence_ref: result.evidence_ref, observed_at: result.observed_at } : {}),
    };
    activities.push(activity);
    input.onActivity?.(activity);
    toolResults.push(...reply.tool_results);
    evidenceRefs.push(...reply.evidence_refs);
    auditIds.push(...reply.audit_ids);
    texts.push(reply.text);
    if (reply.kind !== "tool_result" || result?.status !== "ok") {
      failed = { step, text: reply.text };
      break;
    }
  }
  const complete = !failed && activities.length === input.plan.steps.length;
  return {
    outcome: complete ? "answered" : "abstained",
    text: complete
      ? texts.join("\n\n")
      : failed
        ? `${UNVERIFIED_ABSTENTION} Step ${failed.step.index + 1} (${failed.step.tool}): ${failed.text}`
        : `${UNVERIFIED_ABSTENTION} The investigation was cancelled.`,
    activities,
    tool_results: toolResults,
    evidence_refs: evidenceRefs,
    audit_ids: auditIds,
  };
}

/** Reads the plan's latency evidence from the durable audit log and chooses its execution. */
export async function chooseFromHistory(audit: AuditLog, plan: InvestigationPlan): Promise<ExecutionChoice> {
  const entries = await audit.list({ action: "console.tool_call", limit: LATENCY_HISTORY_ENTRIES });
  return chooseExecution(
    plan.steps,
    latencyEvidence(
      entries,
      plan.steps.map((s) => s.tool),
    ),
  );
}

/**
 * Records the investigation (what `/agents/stream` reports as a read-investigation activity): its
 * mode, estimate, steps and outcome — evidence references only; each read's evidence is in its
 * own tool-call entry. Readable from the plan's highest tool floor.
 */
export async function recordInvestigation(
  audit: AuditLog,
  input: {
    caller: Caller;
    investigationId: string;
    requestId: string;
    plan: InvestigationPlan;
    choice: Pick<ExecutionChoice, "mode" | "estimate_ms" | "reason">;
    result: InvestigationResult;
  },
): Promise<AuditEntry> {
  return audit.record({
    actor: { oid: input.caller.oid, name: input.caller.name },
    action: "console.read_investigation",
    target: input.investigationId,
    outcome: input.result.outcome === "answered" ? "succeeded" : "failed",
    request_id: input.requestId,
    visibility_floor: input.plan.visibilityFloor,
    details: {
      mode: input.choice.mode,
      estimate_ms: input.choice.estimate_ms,
      reason: input.choice.reason,
      outcome: input.result.outcome,
      side_effect_class: "read",
      input_kind: "query",
      steps: input.result.activities.map((a) => ({
        tool: a.tool,
        status: a.status,
        ...(a.evidence_ref ? { evidence_ref: a.evidence_ref } : {}),
      })),
      tool_audit_ids: input.result.audit_ids,
    },
  });
}

/** The result as every answer carries it: the reads' result and, last, the investigation's own audit entry. */
export function investigationView(result: InvestigationResult, auditId: string) {
  return {
    outcome: result.outcome,
    text: result.text,
    activities: result.activities,
    tool_results: result.tool_results,
    evidence_refs: result.evidence_refs,
    audit_ids: [...result.audit_ids, auditId],
  };
}
export type InvestigationView = ReturnType<typeof investigationView>;

/** The input of a detached read investigation (the plan was checked, and the caller authorized, by the route). */
export interface ReadInvestigationInput {
  investigation_id: string;
  request_id: string;
  caller: Caller;
  plan: InvestigationPlan;
  choice: Pick<ExecutionChoice, "mode" | "estimate_ms" | "reason">;
}

/** What a detached investigation reports: the operation's outcome and the audit entry that holds its evidence. */
export interface ReadInvestigationOutput {
  outcome: "succeeded" | "failed";
  audit_id: string;
  error?: string;
  /**
   * The reads' result as a direct answer carries it: what `GET /api/read-investigations/{id}`
   * returns to the principal that started it (the operation view shows only the outcome).
   */
  result?: InvestigationView;
}

/** What the durable client reports of an instance (the fields a detached investigation's reader needs). */
export interface InvestigationInstance {
  name: string;
  input: unknown;
  output: unknown;
  runtimeStatus: string;
  createdAt: Date;
}

/**
 * A detached investigation as `GET /api/read-investigations/{id}` shows it to `caller`, whose role
 * now is `role`: only its starter reads it (another principal's and an unknown id are the same
 * 404, so ids reveal nothing), and only while that role still holds the plan's highest tool floor
 * (403 naming it). `running` until the operation ends.
 */
export function detachedInvestigationView(
  investigationId: string,
  instance: InvestigationInstance | undefined,
  caller: Caller,
  role: Role,
): { status: "running" | "succeeded" | "failed"; started_at: string; result?: InvestigationView } {
  const input = instance?.input as ReadInvestigationInput | undefined;
  if (
    !instance ||
    instance.name !== Orchestrations.readInvestigation ||
    !input ||
    !sameObjectId(input.caller.oid, caller.oid)
  )
    throw new NotFoundError(`no read investigation ${investigationId}`);
  const floor = input.plan.visibilityFloor;
  if (!meetsFloor(role, floor))
    throw new ForbiddenError(`this investigation's reads need the ${floor} role; your current role is ${role}`);
  const output = instance.output as ReadInvestigationOutput | undefined;
  const runtime = instance.runtimeStatus;
  const status =
    runtime === "Completed" && output
      ? output.outcome
      : runtime === "Failed" || runtime === "Terminated"
        ? "failed"
        : "running";
  return {
    status,
    started_at: instance.createdAt.toISOString(),
    ...(output?.result ? { result: output.result } : {}),
  };
}
