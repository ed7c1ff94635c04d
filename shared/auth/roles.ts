/**
 * Application roles and the authenticated caller. Roles come from the `roles` claim of the access
 * token (Entra app roles, or the local development identity provider).
 */

/** Every application role, lowest privilege first; the order is the privilege order. */
export const ROLES = ["Reader", "Contributor", "Approver", "Owner"] as const;

/** One application role. */
export type Role = (typeof ROLES)[number];

/** True when `value` is exactly one of {@link ROLES} (case-sensitive, as Entra emits them). */
export function isRole(value: unknown): value is Role {
  return typeof value === "string" && (ROLES as readonly string[]).includes(value);
}

/** Position of `role` in the privilege order: Reader 0 < Contributor 1 < Approver 2 < Owner 3. */
export function roleRank(role: Role): number {
  return ROLES.indexOf(role);
}

/**
 * True when any of `roles` is `floor` or a higher role, so a floor admits every role above it.
 * Strings that are not known roles are ignored; an empty or all-unknown list admits nothing.
 */
export function hasRoleAtLeast(roles: readonly string[], floor: Role): boolean {
  const needed = roleRank(floor);
  return roles.some((role) => isRole(role) && roleRank(role) >= needed);
}

/** The authenticated principal a request acts for, derived from a validated access token. */
export interface Caller {
  /** Entra object id of the user or service principal; stable across sessions. */
  oid: string;
  /** Display name; empty when the token carries none. */
  name: string;
  /** Directory (tenant) id. Snake case because this object is part of the wire contract. */
  tenant_id: string;
  /** Known application roles granted to the caller; unknown role strings are dropped. */
  roles: Role[];
  /**
   * When the user last signed in interactively (the token's `auth_time`, seconds since the epoch):
   * null when a bearer token carries none; undefined for callers not authenticated by a bearer
   * token here (a channel turn, whose A1 trust is the channel's). Approval decisions need it
   * recent (`shared/auth/fresh-authentication.ts`). Not part of `GET /api/me`.
   */
  auth_time?: number | null;
}
