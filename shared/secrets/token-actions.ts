import type { ApiTokenSettings } from "./api-token-settings.js";
import type { ApiTokenService } from "./api-tokens.js";
import { actingCaller } from "../ops/actions/acting-caller.js";
import { ActionStateChangedError } from "../ops/actions/action-executor.js";
import { actionHandler } from "../ops/actions/action-runner.js";

/** What the token executor is built from: the token store and the dashboard's token settings (its rotation, audit and event). */
export interface TokenActionDependencies {
  tokens: Pick<ApiTokenService, "state">;
  settings: () => Pick<ApiTokenSettings, "regenerate">;
}

/**
 * rotate_api_token: the dashboard's regenerate (the token store's rotation with the configured
 * grace, so the predecessor stays valid for it). The plan records which token it replaces: a
 * resumed execution that finds a newer token knows the rotation happened and does not rotate again.
 */
export function createRotateApiTokenHandler(deps: TokenActionDependencies) {
  return actionHandler<{ replaces_created_at: string }>({
    async plan(action) {
      const state = await deps.tokens.state({ fresh: true });
      if (!state)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { configured: false },
          "no API token is configured any more",
        );
      return { replaces_created_at: state.current.created_at };
    },
    async apply(plan, _action, context) {
      const current = await deps.tokens.state({ fresh: true });
      const rotated =
        current && current.current.created_at !== plan.replaces_created_at
          ? current
          : await deps.settings().regenerate(actingCaller(context.actor, "Owner"), { requestId: context.requestId });
      // Never the token: its last four characters, as the dashboard's status shows them.
      return {
        last_four: rotated.current.value.slice(-4),
        rotated_at: rotated.current.created_at,
        previous_valid_until: rotated.previous?.valid_until ?? null,
      };
    },
  });
}
