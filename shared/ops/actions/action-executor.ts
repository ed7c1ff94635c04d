import type { ProposedAction } from "../verifier/verifier.js";

/** Carries out an action the verifier found eligible (and, where needed, a human approved). */
export interface ActionExecutor {
  /**
   * Executes `action`. Implementations are idempotent by `idempotencyKey`, so a host that crashed
   * after executing and before recording the result does not act twice when the step is replayed.
   */
  execute(action: ProposedAction, context: { idempotencyKey: string; actor: { oid: string; name: string }; requestId: string }): Promise<unknown>;
}

/** The action type has no executor in this deployment. */
export class ActionNotSupportedError extends Error {
  constructor(readonly actionType: string) {
    super(`no executor for action type ${actionType} in this deployment`);
    this.name = "ActionNotSupportedError";
  }
}
