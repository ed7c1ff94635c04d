import { ConflictError } from "../../errors.js";
import type { AuditLog } from "../audit.js";
import type { ProposedAction } from "../verifier/verifier.js";
import { type ActionExecutor, ActionNotConfiguredError, ActionNotSupportedError, ActionParametersError, ActionStateChangedError } from "./action-executor.js";
import { type ActionOutcome, type ActionOutcomeStore, actionOutcomeHash } from "./action-outcomes.js";

/** `shadow` records what the executor would do; `enforce` does it. */
export type ActionMode = "shadow" | "enforce";

/** What an execution is given by its caller (the approval service, a real `run_runbook`). */
export interface ActionContext {
  idempotencyKey: string;
  actor: { oid: string; name: string };
  requestId: string;
}

/**
 * One action type's executor, in two steps so a crash between them resumes rather than repeats:
 * `plan` re-reads the target (refusing with {@link ActionStateChangedError} when it is no longer
 * as verified) and fixes every value the act needs; `apply` carries that plan out and must be
 * idempotent for one plan, because a resumed execution applies the stored plan again.
 */
export interface ActionHandler<Plan> {
  plan(action: ProposedAction, context: ActionContext): Promise<Plan>;
  apply(plan: Plan, action: ProposedAction, context: ActionContext): Promise<Record<string, unknown>>;
}

/** Erases a handler's plan type for the registry (plans travel through Table storage as JSON). */
export function actionHandler<Plan>(handler: ActionHandler<Plan>): ActionHandler<unknown> {
  return handler as ActionHandler<unknown>;
}

export interface ActionRunnerDependencies {
  outcomes: ActionOutcomeStore;
  audit: Pick<AuditLog, "record">;
  /** The executor of each action type this deployment carries out. */
  handlers: Readonly<Partial<Record<string, ActionHandler<unknown>>>>;
  /** The mode an action type runs in (the catalog's default unless configured otherwise). */
  mode(actionType: string): ActionMode;
  now?: () => Date;
}

export const ACTION_AUDIT_ACTION = "ops.action_executed";

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The executor of every configured action type. Idempotent by the idempotency key: the outcome is
 * recorded in Table storage before the caller gets it and read first on every call, so a replayed
 * step answers the recorded result (or refusal) without acting again; an execution that crashed
 * after fixing its plan resumes with that plan. Every first execution writes one audit entry
 * (`ops.action_executed`) with its mode, plan and result, or why it was refused or failed.
 */
export function createActionExecutor(deps: ActionRunnerDependencies): ActionExecutor {
  const now = deps.now ?? (() => new Date());
  const { outcomes } = deps;

  function replay(outcome: ActionOutcome): unknown {
    if (outcome.state === "refused") {
      const refusal = outcome.result as { reason: string; observed: unknown };
      throw new ActionStateChangedError(outcome.action_type, outcome.target, refusal.observed, refusal.reason);
    }
    return outcome.result;
  }

  return {
    async execute(action, context) {
      const hash = actionOutcomeHash(action);
      const base = { idempotency_key: context.idempotencyKey, action_hash: hash, action_type: action.action_type, target: action.target };
      const audit = (outcome: "succeeded" | "denied" | "failed", details: Record<string, unknown>) =>
        deps.audit.record({ actor: context.actor, action: ACTION_AUDIT_ACTION, target: action.target, outcome, request_id: context.requestId, details: { action_type: action.action_type, idempotency_key: context.idempotencyKey, ...details } });

      const existing = await outcomes.get(context.idempotencyKey);
      if (existing && existing.action_hash !== hash) throw new ConflictError(`idempotency key ${context.idempotencyKey} was used for another action`);
      if (existing && existing.state !== "planned") return replay(existing);
      const handler = deps.handlers[action.action_type];
      if (!handler) throw new ActionNotSupportedError(action.action_type);

      let mode: ActionMode;
      let plan: unknown;
      if (existing) {
        // A crash after the plan was fixed: resume it; the target may have changed because of the act itself.
        ({ mode, plan } = existing);
      } else {
        mode = deps.mode(action.action_type);
        try {
          plan = await handler.plan(action, context);
        } catch (error) {
          if (error instanceof ActionStateChangedError || error instanceof ActionParametersError) {
            const refusal = { reason: error.reason, observed: error instanceof ActionStateChangedError ? error.observed : action.params };
            const recorded = await outcomes.insert({ ...base, state: "refused", mode, plan: null, result: refusal, at: now().toISOString() });
            if (!recorded.inserted) return replay(recorded.existing);
            await audit("denied", { mode, reason: error.reason, observed: refusal.observed });
            throw error;
          }
          await audit(error instanceof ActionNotConfiguredError ? "denied" : "failed", { mode, error: errorText(error) });
          throw error;
        }
        if (mode === "shadow") {
          const result = { mode, executed: false, would: plan };
          const recorded = await outcomes.insert({ ...base, state: "done", mode, plan, result, at: now().toISOString() });
          if (!recorded.inserted) return replay(recorded.existing);
          await audit("succeeded", { mode, plan, result });
          return result;
        }
        const claimed = await outcomes.insert({ ...base, state: "planned", mode, plan, result: null, at: now().toISOString() });
        if (!claimed.inserted) {
          // Another host claimed this key between our read and our insert: follow its record.
          if (claimed.existing.state !== "planned") return replay(claimed.existing);
          plan = claimed.existing.plan;
        }
      }
      let applied: Record<string, unknown>;
      try {
        applied = await handler.apply(plan, action, context);
      } catch (error) {
        // The plan stays recorded: a later call with this key resumes it.
        await audit("failed", { mode, plan, error: errorText(error) });
        throw error;
      }
      const result = { mode, executed: true, ...applied };
      await outcomes.finish({ ...base, state: "done", mode, plan, result, at: now().toISOString() });
      await audit("succeeded", { mode, plan, result });
      return result;
    },
  };
}
