import { type Caller, hasRoleAtLeast, type Role } from "../auth/roles.js";
import { ForbiddenError, InvalidRequestError } from "../errors.js";
import type { AuditLog } from "../ops/audit.js";
import type { IssuedTicket, TerminalTicketStore } from "./terminal-tickets.js";

/** The lowest role that gets a terminal (decision 0020: Readers get none). */
export const TERMINAL_ROLE_FLOOR: Role = "Contributor";

/** What the ticket service is built from. */
export interface TerminalTicketServiceDependencies {
  tickets: Pick<TerminalTicketStore, "issue">;
  audit: Pick<AuditLog, "record">;
}

/**
 * The canonical origin (`scheme://host[:port]`) of an `Origin` header, or undefined when the header
 * is absent, `null` (an opaque origin) or not an http(s) origin.
 */
export function originOf(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  try {
    const url = new URL(header);
    if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
    // An Origin header is exactly scheme://host[:port]; anything with a path or query is not one.
    if (`${url.origin}` !== header.replace(/\/$/, "")) return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/**
 * Issues terminal tickets: Contributor or higher, bound to the caller and the page's origin.
 * Every issuance and every refusal for the role is audited as `terminal.ticket`.
 */
export function createTerminalTicketService(dependencies: TerminalTicketServiceDependencies) {
  const { tickets, audit } = dependencies;
  function auditBase(caller: Caller, requestId: string) {
    return {
      actor: { oid: caller.oid, name: caller.name },
      action: "terminal.ticket",
      target: "terminal",
      request_id: requestId,
    };
  }

  /** The role check (before any work): a caller below the floor is refused and audited as `denied`. */
  async function requireTerminalRole(caller: Caller, options: { requestId: string }): Promise<void> {
    if (hasRoleAtLeast(caller.roles, TERMINAL_ROLE_FLOOR)) return;
    await audit.record({
      ...auditBase(caller, options.requestId),
      outcome: "denied",
      details: { roles: caller.roles },
    });
    throw new ForbiddenError(`the terminal needs the ${TERMINAL_ROLE_FLOOR} role or higher`);
  }

  return {
    requireTerminalRole,

    /** Issues a ticket bound to the caller and the page's origin (`originHeader`), audited. */
    async issue(caller: Caller, originHeader: string | null, options: { requestId: string }): Promise<IssuedTicket> {
      await requireTerminalRole(caller, options);
      const origin = originOf(originHeader);
      if (!origin) {
        throw new InvalidRequestError(
          "an Origin header naming the web app is required (the terminal is opened from a browser)",
        );
      }
      const issued = await tickets.issue({ oid: caller.oid, origin });
      await audit.record({
        ...auditBase(caller, options.requestId),
        outcome: "succeeded",
        details: { origin, expires_at: issued.expires_at },
      });
      return issued;
    },
  };
}

export type TerminalTicketService = ReturnType<typeof createTerminalTicketService>;
