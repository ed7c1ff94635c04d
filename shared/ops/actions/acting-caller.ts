import type { Caller, Role } from "../../auth/roles.js";

/**
 * The caller an executor acts as: the person who approved (or ran) the action, holding the action
 * type's role floor for this one act — the verifier and the approval are what granted it, so the
 * service's own role check sees that floor rather than the approver's own roles.
 */
export function actingCaller(actor: { oid: string; name: string }, roleFloor: Role): Caller {
  return { oid: actor.oid, name: actor.name, tenant_id: "", roles: [roleFloor] };
}

/** The id part of a `resource_type/id` target. */
export function targetId(target: string): string {
  return target.slice(target.indexOf("/") + 1);
}
