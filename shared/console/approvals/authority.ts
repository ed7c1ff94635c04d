import { sameObjectId } from "../../auth/object-id.js";
import { type Role, roleRank } from "../../auth/roles.js";
import type { ActionTypeCatalog } from "../../ops/actions/action-types.js";

/**
 * Who may authorize what: the one rule the coordinator (filing), the approval service (deciding,
 * executing) and the channels (an A1 decision from a chat platform) all ask. Nothing else decides
 * whether an approval may be granted.
 *
 * 1. An action runs without an approval only when the caller's role meets the action type's
 *    `role_floor` and the type is not marked `requires_approval` (spec operator-console §5 A3
 *    table: "kill-switch on/off — Owner plus A1 approval"; ledger C-421, C-422).
 * 2. An approval is decided only by someone who could authorize the action: the decider's role
 *    meets the action's floor and is at least Approver (the floor of `approve_hil`, C-116).
 * 3. The requester never decides its own item, whatever its role (C-348, C-349), compared by
 *    normalized object id.
 *
 * An action type the catalog does not know is treated as Owner-only and approval-bound.
 */

/** The invariant named in the audit reason of a refused self-approval (spec §5 item 3). */
export const NO_SELF_APPROVAL = "no_self_approval";
/** The invariant named when the decider's role is below what the action needs. */
export const DECIDER_ROLE_BELOW_FLOOR = "decider_role_below_action_floor";

/** Why a decision may not be made; `required_role` is what the decider would need. */
export type DecisionRefusal =
  | { allowed: false; reason: typeof NO_SELF_APPROVAL; required_role: Role }
  | { allowed: false; reason: typeof DECIDER_ROLE_BELOW_FLOOR; required_role: Role };

export type DecisionAuthority = { allowed: true; required_role: Role } | DecisionRefusal;

/** Why a write call is filed for approval instead of running (undefined: it may run now). */
export type FilingCause = "verifier_abstained" | "rbac_floor_not_met" | "approval_required";

const maxRole = (a: Role, b: Role): Role => (roleRank(a) >= roleRank(b) ? a : b);

export interface ApprovalAuthority {
  /** The catalog floor of an action type (Owner when the type is unknown). */
  floorOf(actionType: string): Role;
  /** True when the action type needs an approval whoever asks (Owner + approval). */
  requiresApproval(actionType: string): boolean;
  /** The lowest role that may decide an approval of this action type. */
  deciderFloorOf(actionType: string): Role;
  /** Whether `role` may run `actionType` at once, with no approval filed. */
  mayRunDirectly(role: Role, actionType: string): boolean;
  /** Why a call with this verdict by `role` must be filed (undefined: it runs). */
  filingCause(role: Role, actionType: string, verdict: "eligible" | "abstain"): FilingCause | undefined;
  /**
   * Whether `decider` (with its effective role, undefined when it has none) may decide an item of
   * `actionType` requested by `requesterOid`.
   */
  mayDecide(
    decider: { oid: string; role: Role | undefined },
    item: { requesterOid: string; actionType: string },
  ): DecisionAuthority;
}

export function createApprovalAuthority(catalog: ActionTypeCatalog): ApprovalAuthority {
  const byId = new Map(catalog.action_types.map((a) => [a.id, a]));
  const floorOf = (actionType: string): Role => byId.get(actionType)?.role_floor ?? "Owner";
  const requiresApproval = (actionType: string): boolean => {
    const type = byId.get(actionType);
    return type === undefined || type.requires_approval === true;
  };
  const deciderFloorOf = (actionType: string): Role => maxRole(floorOf(actionType), "Approver");
  const mayRunDirectly = (role: Role, actionType: string) =>
    roleRank(role) >= roleRank(floorOf(actionType)) && !requiresApproval(actionType);
  return {
    floorOf,
    requiresApproval,
    deciderFloorOf,
    mayRunDirectly,
    filingCause(role, actionType, verdict) {
      if (verdict === "abstain") return "verifier_abstained";
      if (roleRank(role) < roleRank(floorOf(actionType))) return "rbac_floor_not_met";
      if (requiresApproval(actionType)) return "approval_required";
      return undefined;
    },
    mayDecide(decider, item) {
      const required_role = deciderFloorOf(item.actionType);
      if (sameObjectId(decider.oid, item.requesterOid))
        return { allowed: false, reason: NO_SELF_APPROVAL, required_role };
      if (decider.role === undefined || roleRank(decider.role) < roleRank(required_role))
        return { allowed: false, reason: DECIDER_ROLE_BELOW_FLOOR, required_role };
      return { allowed: true, required_role };
    },
  };
}
