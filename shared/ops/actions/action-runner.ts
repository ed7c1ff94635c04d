import { ConflictError } from "../../errors.js";
import type { AuditLog } from "../audit.js";
import type { ProposedAction } from "../verifier/verifier.js";
import {
  type ActionExecutor,
  ActionInProgressError,
  ActionNotConfiguredError,
  ActionNotSupportedError,
  ActionParametersError,
  ActionStateChangedError,
} from "./action-executor.js";
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
  /**
   * How long a request holds a planned execution; a holder that died is taken over after it.
   * Default 15 minutes: longer than a node pool's scaling operation usually takes.
   */
  leaseMs?: number;
}

export const ACTION_AUDIT_ACTION = "ops.action_executed";

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The executor of every configured action type. Idempotent by the idempotency key: the outcome is
 * recorded in Table storage before the caller gets it and read first on every call, so a replayed
 * step answers the recorded result (or refusal) without acting again. A plan is recorded with a
 * lease before acting: while it holds, another request with the key is refused as in progress (so
 * two hosts never act at once); an execution that failed, or whose host died and whose lease ran
 * out, is resumed with that plan by the next request with the key. Every first execution writes one audit entry
 * (`ops.action_executed`) with its mode, plan and result, or why it was refused or failed.
 */
export function createActionExecutor(deps: ActionRunnerDependencies): ActionExecutor {
  const now = deps.now ?? (() => new Date());
  const leaseMs = deps.leaseMs ?? 15 * 60_000;
  const { outcomes } = deps;
  const leaseUntil = () => new Date(now().getTime() + leaseMs).toISOString();

  function replay(outcome: ActionOutcome): unknown {
    if (outcome.state === "refused") {
      const refusal = outcome.result as { reason: string; observed: unknown; kind?: "parameters" | "state" };
      if (refusal.kind === "parameters") throw new ActionParametersError(outcome.action_type, refusal.reason);
      throw new ActionStateChangedError(outcome.action_type, outcome.target, refusal.observed, refusal.reason);
    }
    return outcome.result;
  }

  return {
    async execute(action, context) {
      const hash = actionOutcomeHash(action);
      const base = {
        idempotency_key: context.idempotencyKey,
        action_hash: hash,
        action_type: action.action_type,
        target: action.target,
      };
      const audit = (outcome: "succeeded" | "denied" | "failed", details: Record<string, unknown>) =>
        deps.audit.record({
          actor: context.actor,
          action: ACTION_AUDIT_ACTION,
          target: action.target,
          outcome,
          request_id: context.requestId,
          details: { action_type: action.action_type, idempotency_key: context.idempotencyKey, ...details },
        });

      const existing = await outcomes.get(context.idempotencyKey);
      if (existing && existing.action_hash !== hash)
        throw new ConflictError(`idempotency key ${context.idempotencyKey} was used for another action`);
      if (existing && existing.state !== "planned") return replay(existing);
      const handler = deps.handlers[action.action_type];
      if (!handler) throw new ActionNotSupportedError(action.action_type);

      let mode: ActionMode;
      let plan: unknown;
      if (existing) {
        // Planned by another request: still its own while the lease holds (it may be acting now).
        const heldUntil = existing.lease_until ?? existing.at;
        if (new Date(heldUntil) > now()) throw new ActionInProgressError(context.idempotencyKey, heldUntil);
        // Its holder died after fixing the plan: take the plan over (one taker wins) and resume it; the
        // target may have changed because of the act itself, so it is not re-read.
        ({ mode, plan } = existing);
        if (
          !(await outcomes.replaceIfUnchanged(existing, {
            ...base,
            state: "planned",
            mode,
            plan,
            result: null,
            at: existing.at,
            lease_until: leaseUntil(),
          }))
        )
          throw new ActionInProgressError(context.idempotencyKey, heldUntil);
      } else {
        mode = deps.mode(action.action_type);
        try {
          plan = await handler.plan(action, context);
        } catch (error) {
          if (error instanceof ActionStateChangedError || error instanceof ActionParametersError) {
            const refusal =
              error instanceof ActionStateChangedError
                ? { kind: "state", reason: error.reason, observed: error.observed }
                : { kind: "parameters", reason: error.reason, observed: action.params };
            const recorded = await outcomes.insert({
              ...base,
              state: "refused",
              mode,
              plan: null,
              result: refusal,
              at: now().toISOString(),
            });
            if (!recorded.inserted) return replay(recorded.existing);
            await audit("denied", { mode, reason: error.reason, observed: refusal.observed });
            throw error;
          }
          await audit(error instanceof ActionNotConfiguredError ? "denied" : "failed", {
            mode,
            error: errorText(error),
          });
          throw error;
        }
        if (mode === "shadow") {
          const result = { mode, executed: false, would: plan };
          const recorded = await outcomes.insert({
            ...base,
            state: "done",
            mode,
            plan,
            result,
            at: now().toISOString(),
          });
          if (!recorded.inserted) return replay(recorded.existing);
          await audit("succeeded", { mode, plan, result });
          return result;
        }
        const claimed = await outcomes.insert({
          ...base,
          state: "planned",
          mode,
          plan,
          result: null,
          at: now().toISOString(),
          lease_until: leaseUntil(),
        });
        if (!claimed.inserted) {
          // Another request claimed this key between our read and our insert: its record rules.
          if (claimed.existing.state !== "planned") return replay(claimed.existing);
          throw new ActionInProgressError(context.idempotencyKey, claimed.existing.lease_until ?? claimed.existing.at);
        }
      }
      let applied: Record<string, unknown>;
      try {
        applied = await handler.apply(plan, action, context);
      } catch (error) {
        // The plan stays recorded and its lease is given up: a later call with this key resumes it.
        await outcomes.finish({
          ...base,
          state: "planned",
          mode,
          plan,
          result: null,
          at: now().toISOString(),
          lease_until: now().toISOString(),
        });
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
