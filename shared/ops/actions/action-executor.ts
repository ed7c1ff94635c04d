import { ConflictError } from "../../errors.js";
import type { ProposedAction } from "../verifier/verifier.js";

/** Carries out an action the verifier found eligible (and, where needed, a human approved). */
export interface ActionExecutor {
  /**
   * Executes `action`. Implementations are idempotent by `idempotencyKey`, so a host that crashed
   * after executing and before recording the result does not act twice when the step is replayed.
   */
  execute(
    action: ProposedAction,
    context: { idempotencyKey: string; actor: { oid: string; name: string }; requestId: string },
  ): Promise<unknown>;
}

/** The action type has no executor in this deployment. */
export class ActionNotSupportedError extends Error {
  constructor(readonly actionType: string) {
    super(`no executor for action type ${actionType} in this deployment`);
    this.name = "ActionNotSupportedError";
  }
}

/**
 * The action type has an executor, but what it acts on is not configured in this deployment (no
 * cluster, no Resource Manager scope). A kind of "not supported", so callers that map that to
 * `not_supported` keep doing so; the message names the missing settings.
 */
export class ActionNotConfiguredError extends ActionNotSupportedError {
  constructor(
    actionType: string,
    readonly missing: readonly string[],
  ) {
    super(actionType);
    this.name = "ActionNotConfiguredError";
    this.message = `${actionType} is not configured in this deployment: set ${missing.join(", ")}`;
  }
}

/** The executor re-read the target and it is no longer as the verifier saw it: nothing was done. */
export class ActionStateChangedError extends Error {
  constructor(
    readonly actionType: string,
    readonly target: string,
    readonly observed: unknown,
    readonly reason: string,
  ) {
    super(`${actionType} on ${target} refused: ${reason}`);
    this.name = "ActionStateChangedError";
  }
}

/** The action's parameters are outside what its executor accepts (e.g. a node count outside the pool's bounds). */
export class ActionParametersError extends Error {
  constructor(
    readonly actionType: string,
    readonly reason: string,
  ) {
    super(`${actionType} refused: ${reason}`);
    this.name = "ActionParametersError";
  }
}

/** Another request holds the execution under this idempotency key right now: nothing was done here. */
export class ActionInProgressError extends ConflictError {
  constructor(
    readonly idempotencyKey: string,
    readonly leaseUntil: string,
  ) {
    super(
      `the action under idempotency key ${idempotencyKey} is being executed by another request (held until ${leaseUntil}); replay it later for its result`,
    );
    this.name = "ActionInProgressError";
  }
}
