import { ForbiddenError } from "../errors.js";
import { type Caller, hasRoleAtLeast, type Role } from "./roles.js";

/** Validates bearer tokens; the jose-based validator in jwt-validator.ts satisfies it. */
export interface BearerValidator {
  validate(authorizationHeader: string | null | undefined): Promise<Caller>;
}

/**
 * Authenticates the caller (401 when the token fails) and checks the route's role floor (403)
 * before any work is done.
 */
export async function authorize(
  validator: BearerValidator,
  authorizationHeader: string | null | undefined,
  floor: Role,
): Promise<Caller> {
  const caller = await validator.validate(authorizationHeader);
  if (!hasRoleAtLeast(caller.roles, floor)) {
    throw new ForbiddenError(`this action needs the ${floor} role or higher`);
  }
  return caller;
}
