import type { KillSwitch } from "../kill-switch.js";
import { type ActionHandler, actionHandler } from "./action-runner.js";

/** kill_switch: turns the global switch on or off (setting it to what it is is harmless, so a resumed execution may set it again). */
export function createKillSwitchHandler(
  killSwitch: Pick<KillSwitch, "set">,
  now: () => Date = () => new Date(),
): ActionHandler<unknown> {
  return actionHandler<{ on: boolean }>({
    plan: async (action) => ({ on: action.params.on === true }),
    async apply(plan, _action, context) {
      await killSwitch.set(plan.on, context.actor.oid, now());
      return { kill_switch: plan.on };
    },
  });
}
