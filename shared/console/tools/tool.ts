import { z } from "zod";
import { type Caller, ROLES, type Role, roleRank } from "../../auth/roles.js";
import type { SideEffectClass } from "../../ops/actions/action-types.js";
import type { ProposedAction } from "../../ops/verifier/verifier.js";

/**
 * A console tool's descriptor (operator console spec §2.1): all that discovery ever returns — no
 * handler, no way to invoke.
 */
export interface ToolDescriptor {
  /** CLI-friendly snake_case verb; also the verb of the canonical parser. */
  name: string;
  verb: string;
  /** One English sentence. */
  description: string;
  /** The bounded argument shape the canonical verb parser accepts. */
  argument_hint: string;
  rbac_floor: Role;
  side_effect_class: SideEffectClass;
  /** The typed error types this tool can answer with. */
  failure_modes: readonly ToolErrorType[];
}

/** Typed failures of tools; the narrator and the caller see these, never a stack trace. */
export const TOOL_ERROR_TYPES = [
  "invalid_arguments",
  "not_found",
  "unavailable",
  "forbidden",
  "self_approval",
  "reauthentication_required",
  "conflict",
  "timeout",
  "verifier_denied",
  "verifier_abstained",
  "not_supported",
  "internal",
] as const;
export type ToolErrorType = (typeof TOOL_ERROR_TYPES)[number];

/** A tool's typed failure. `details` is structured data safe to show (no secrets, no traces). */
export class ToolError extends Error {
  constructor(
    readonly type: ToolErrorType,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = "ToolError";
  }
}

/** A provider that is not configured here: the typed `unavailable` answer, never a guess. */
export class ProviderUnavailableError extends ToolError {
  constructor(provider: string) {
    super("unavailable", `${provider} is not configured for this deployment`, { provider });
  }
}

/** The provider, or the typed `unavailable` answer when this deployment has none configured. */
export function requireProvider<T>(provider: T | undefined, label: string): T {
  if (provider === undefined) throw new ProviderUnavailableError(label);
  return provider;
}

/** Who is calling and for which request; the role comes from the validated token, never from arguments. */
export interface ToolContext {
  caller: Caller;
  role: Role;
  requestId: string;
  now: () => Date;
}

/** A successful tool answer: the data and a reference to the evidence it rests on. */
export interface ToolOk {
  status: "ok";
  tool: string;
  data: unknown;
  /** Where the evidence can be read again (an audit id, a snapshot id, an event id). */
  evidence_ref: string;
  observed_at: string;
}

/** A failed or unavailable tool answer. */
export interface ToolFailed {
  status: "error" | "unavailable";
  tool: string;
  error: {
    type: ToolErrorType;
    message: string;
    details?: Record<string, unknown>;
    issues?: { loc: (string | number)[]; msg: string; type: string }[];
  };
}

export type ToolResult = ToolOk | ToolFailed;

/** What a tool's handler returns: its data and the evidence reference. */
export interface ToolAnswer {
  data: unknown;
  evidence_ref: string;
}

/** A console tool: descriptor, the zod schema of its arguments, and its handler. */
export interface Tool<A = unknown> {
  descriptor: ToolDescriptor;
  args: z.ZodType<A>;
  /** The floor for these arguments when it depends on them (`run_runbook`'s dry run); defaults to the descriptor's. */
  floorFor?(args: A): Role;
  /**
   * For write-class calls: the exact action these arguments would carry out, which the
   * coordinator re-checks with the verifier before running the tool (undefined: nothing to check).
   */
  proposedAction?(args: A): ProposedAction | undefined;
  /** The argument a bare JSON object fills in the canonical verb syntax (`describe_event {…}`). */
  jsonArg?: string;
  /** False for tools that must leave no trace (`describe_event` writes no audit entry). */
  audited: boolean;
  /**
   * True when the result depends on the caller's role (`query_audit`, discovery): the call's audit
   * entry, which keeps the result as evidence, is then readable only from the caller's role up.
   */
  roleScopedResult?: boolean;
  run(args: A, context: ToolContext): Promise<ToolAnswer>;
}

/** Declares a tool; the verb is the name. */
export function defineTool<A>(
  spec: Omit<Tool<A>, "descriptor" | "audited"> & { descriptor: Omit<ToolDescriptor, "verb">; audited?: boolean },
): Tool<unknown> {
  return {
    ...spec,
    audited: spec.audited ?? true,
    descriptor: { ...spec.descriptor, verb: spec.descriptor.name },
  } as Tool<unknown>;
}

/** The caller's highest role, or undefined when it has none (blocked, spec §5.1). */
export function effectiveRole(caller: Caller): Role | undefined {
  let best: Role | undefined;
  for (const role of caller.roles)
    if (ROLES.includes(role) && (best === undefined || roleRank(role) > roleRank(best))) best = role;
  return best;
}

/** True when `role` meets `floor`. */
export function meetsFloor(role: Role, floor: Role): boolean {
  return roleRank(role) >= roleRank(floor);
}

/**
 * Runs one tool: validates all arguments first (a partial call never runs), then the handler;
 * every failure becomes a typed error result, and an unexpected one only says "internal".
 */
export async function invokeTool(tool: Tool, rawArgs: unknown, context: ToolContext): Promise<ToolResult> {
  const name = tool.descriptor.name;
  const parsed = tool.args.safeParse(rawArgs ?? {});
  if (!parsed.success) {
    return {
      status: "error",
      tool: name,
      error: {
        type: "invalid_arguments",
        message: `${name} arguments are invalid`,
        issues: parsed.error.issues.map((i) => ({
          loc: i.path.map((p) => (typeof p === "number" ? p : String(p))),
          msg: i.message,
          type: i.code,
        })),
      },
    };
  }
  const floor = tool.floorFor?.(parsed.data) ?? tool.descriptor.rbac_floor;
  if (!meetsFloor(context.role, floor)) {
    return {
      status: "error",
      tool: name,
      error: { type: "forbidden", message: refusalText(name, floor, context.role) },
    };
  }
  try {
    const answer = await tool.run(parsed.data, context);
    return {
      status: "ok",
      tool: name,
      data: answer.data,
      evidence_ref: answer.evidence_ref,
      observed_at: context.now().toISOString(),
    };
  } catch (error) {
    if (error instanceof ToolError) {
      return {
        status: error.type === "unavailable" ? "unavailable" : "error",
        tool: name,
        error: { type: error.type, message: error.message, ...(error.details ? { details: error.details } : {}) },
      };
    }
    return {
      status: "error",
      tool: name,
      error: { type: "internal", message: `${name} failed unexpectedly; the request id finds the server's log` },
    };
  }
}

/** The deterministic refusal for a tool above the caller's role (coordinator rule 1). */
export function refusalText(tool: string, required: Role, current: Role): string {
  return `Refused: the tool ${tool} requires the ${required} role; your current role is ${current}. The tool was not invoked.`;
}

/** Bounded free text accepted by tools: no control characters. */
export const boundedText = (max: number) =>
  z
    .string()
    .max(max)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
    .refine((s) => !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(s), "must not contain control characters");
