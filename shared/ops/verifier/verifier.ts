import type { ActionType, ActionTypeCatalog, Precondition } from "../actions/action-types.js";
import { resourceTypeOf } from "../rules/rule-catalog.js";

/**
 * What the verifier reads about the control plane right now. Each method answers from current
 * state; `undefined` means the state could not be observed (no provider, unreachable), which the
 * verifier turns into an abstention naming the missing evidence — never into a guess.
 */
export interface ControlPlaneStateReader {
  /** The job's status, `null` when no such job exists. */
  jobStatus(jobId: string): Promise<string | null | undefined>;
  /** Whether the database exists and has an update waiting; `null` when it does not exist. */
  database(name: string): Promise<{ update_available: boolean } | null | undefined>;
  apiTokenConfigured(): Promise<boolean | undefined>;
  clusterReachable(): Promise<boolean | undefined>;
  /** Node-count bounds of a node pool, from configuration. */
  nodePoolBounds(pool: string): Promise<{ min: number; max: number } | undefined>;
  killSwitchOn(): Promise<boolean | undefined>;
}

/** An action the core or an operator proposes: its type, target resource and parameters. */
export interface ProposedAction {
  action_type: string;
  /** `resource_type/id`, e.g. `blast_job/j-123`; `control_plane` for the kill switch. */
  target: string;
  params: Record<string, unknown>;
}

export type CheckResult = "pass" | "fail" | "unknown";

/** The verifier's report: the verdict and each precondition's outcome with what it observed. */
export interface VerifierReport {
  verdict: "eligible" | "abstain" | "deny";
  action_type: string;
  target: string;
  checks: { precondition: Precondition; result: CheckResult; observed: unknown }[];
  /** For `abstain`: the evidence that could not be observed. */
  missing_evidence: string[];
  /** For `deny`: why, in one sentence. */
  reason?: string;
  checked_at: string;
}

const ACTIVE_JOB_STATES = new Set(["queued", "submitted", "running", "pending", "accepted"]);

async function observe(
  precondition: Precondition,
  action: ProposedAction,
  state: ControlPlaneStateReader,
): Promise<{ result: CheckResult; observed: unknown }> {
  const id = action.target.slice(action.target.indexOf("/") + 1);
  const known = <T>(value: T | undefined, ok: (v: T) => boolean) =>
    value === undefined
      ? { result: "unknown" as const, observed: null }
      : { result: ok(value) ? ("pass" as const) : ("fail" as const), observed: value };
  try {
    switch (precondition) {
      case "job_exists":
        return known(await state.jobStatus(id), (s) => s !== null);
      case "job_failed":
        return known(await state.jobStatus(id), (s) => s === "failed");
      case "job_active":
        return known(await state.jobStatus(id), (s) => s !== null && ACTIVE_JOB_STATES.has(s));
      case "database_exists":
        return known(await state.database(id), (d) => d !== null);
      case "database_update_available":
        return known(await state.database(id), (d) => d?.update_available === true);
      case "api_token_configured":
        return known(await state.apiTokenConfigured(), (v) => v);
      case "cluster_reachable":
        return known(await state.clusterReachable(), (v) => v);
      case "node_count_in_bounds": {
        const count = action.params.node_count;
        if (typeof count !== "number" || !Number.isInteger(count))
          return { result: "fail", observed: { node_count: count ?? null } };
        return known(await state.nodePoolBounds(id), (b) => count >= b.min && count <= b.max);
      }
      case "kill_switch_off":
        return known(await state.killSwitchOn(), (on) => !on);
    }
  } catch {
    // A reader that fails is missing evidence, not a pass or a fail.
    return { result: "unknown", observed: null };
  }
}

/**
 * T2: decides deterministically whether a proposed action may run now. `deny` when the action type
 * is unknown, the target is of the wrong resource type, or a precondition fails; `abstain` with
 * the missing evidence when a precondition cannot be observed; `eligible` only when every
 * precondition passes. Nothing else in the system grants eligibility.
 */
export async function verifyAction(
  action: ProposedAction,
  catalog: ActionTypeCatalog,
  state: ControlPlaneStateReader,
  now: () => Date = () => new Date(),
): Promise<VerifierReport> {
  const base = {
    action_type: action.action_type,
    target: action.target,
    checks: [] as VerifierReport["checks"],
    missing_evidence: [] as string[],
  };
  const type: ActionType | undefined = catalog.action_types.find((a) => a.id === action.action_type);
  if (!type)
    return {
      ...base,
      verdict: "deny",
      reason: `unknown action type ${action.action_type}`,
      checked_at: now().toISOString(),
    };
  if (
    resourceTypeOf(action.target) !== type.resource_type ||
    (type.resource_type !== "control_plane" && !action.target.includes("/"))
  )
    return {
      ...base,
      verdict: "deny",
      reason: `${type.id} acts on a ${type.resource_type}, not on ${action.target}`,
      checked_at: now().toISOString(),
    };
  for (const precondition of type.preconditions) {
    const { result, observed } = await observe(precondition, action, state);
    base.checks.push({ precondition, result, observed });
    if (result === "unknown") base.missing_evidence.push(precondition);
  }
  const failed = base.checks.find((c) => c.result === "fail");
  const checked_at = now().toISOString();
  if (failed)
    return { ...base, verdict: "deny", reason: `precondition ${failed.precondition} does not hold`, checked_at };
  if (base.missing_evidence.length > 0) return { ...base, verdict: "abstain", checked_at };
  return { ...base, verdict: "eligible", checked_at };
}
