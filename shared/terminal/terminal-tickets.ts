import { createHash, randomBytes } from "node:crypto";
import { RestError } from "@azure/data-tables";
import { normalizeObjectId } from "../auth/object-id.js";
import { UnauthorizedError } from "../errors.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";

/**
 * Terminal tickets (decision 0020): the dashboard issues one after the role check, the job API
 * redeems it once when the browser opens the terminal's WebSocket. A ticket is 32 random bytes,
 * valid for {@link TERMINAL_TICKET_TTL_SECONDS}, bound to the caller's object id and the page's
 * origin. Only its SHA-256 digest is stored (table `terminaltickets`, the platform storage both
 * deployables share), so a copy of the table opens nothing.
 */

/** The table holding ticket digests. */
export const TERMINAL_TICKET_TABLE = "terminaltickets";

/** How long a ticket may wait before it is redeemed (issue 30: 30 s). */
export const TERMINAL_TICKET_TTL_SECONDS = 30;

/** Every ticket starts with this, so the secret scanner and a reader recognise one. */
export const TERMINAL_TICKET_PREFIX = "bptt_";

/** Why a ticket was not accepted; the job API answers 401 for each and audits the reason. */
export type TicketRefusal = "missing" | "malformed" | "unknown" | "used" | "expired" | "origin_mismatch";

/** A ticket that cannot open a terminal; `reason` says why (never the ticket itself). */
export class TerminalTicketRefusedError extends UnauthorizedError {
  constructor(readonly reason: TicketRefusal) {
    super(`terminal ticket refused: ${reason.replace("_", " ")}`);
  }
}

/** What a ticket is bound to. */
export interface TicketBinding {
  /** The caller's directory object id (normalised). */
  oid: string;
  /** The origin of the page that asked for it (`https://host[:port]`). */
  origin: string;
}

/** A newly issued ticket: the value is answered once and never stored. */
export interface IssuedTicket {
  ticket: string;
  expires_at: string;
}

/** The ticket store: issue on the dashboard, redeem on the job API. */
export interface TerminalTicketStore {
  issue(binding: TicketBinding): Promise<IssuedTicket>;
  /**
   * Redeems `ticket` presented from `origin`: returns its binding and marks it used, or throws
   * {@link TerminalTicketRefusedError}. Of two redemptions racing for one ticket, one wins.
   */
  redeem(ticket: string | undefined, origin: string): Promise<TicketBinding>;
}

/** A ticket: its prefix and 32 random bytes in base64url. */
const ticketPattern = (prefix: string) => new RegExp(`^${prefix}[A-Za-z0-9_-]{43}$`);
/** Row key of the one row per digest partition. */
const ROW = "ticket";

function digestOf(ticket: string): string {
  return createHash("sha256").update(ticket).digest("hex");
}

function isStatus(error: unknown, status: number): boolean {
  return error instanceof RestError && error.statusCode === status;
}

/**
 * Opens the ticket store in Table storage; `now` is for tests. `table` and `prefix` give another
 * kind of single-use ticket the same rules (the results download's, `shared/dashboard/download-tickets.ts`):
 * its own table and prefix, `origin` then being whatever that ticket is bound to.
 */
export function createTerminalTicketStore(
  source: TableSource,
  options: { now?: () => Date; ttlSeconds?: number; table?: string; prefix?: string } = {},
): TerminalTicketStore {
  const table = tableOpener(source, options.table ?? TERMINAL_TICKET_TABLE);
  const prefix = options.prefix ?? TERMINAL_TICKET_PREFIX;
  const pattern = ticketPattern(prefix);
  const now = options.now ?? (() => new Date());
  const ttlMs = (options.ttlSeconds ?? TERMINAL_TICKET_TTL_SECONDS) * 1000;
  return {
    async issue(binding) {
      const ticket = `${prefix}${randomBytes(32).toString("base64url")}`;
      const expiresAt = new Date(now().getTime() + ttlMs).toISOString();
      await (await table()).createEntity({
        partitionKey: digestOf(ticket),
        rowKey: ROW,
        oid: normalizeObjectId(binding.oid),
        origin: binding.origin,
        expires_at: expiresAt,
        used_at: "",
      });
      return { ticket, expires_at: expiresAt };
    },

    async redeem(ticket, origin) {
      if (ticket === undefined || ticket === "") throw new TerminalTicketRefusedError("missing");
      if (!pattern.test(ticket)) throw new TerminalTicketRefusedError("malformed");
      const client = await table();
      const partitionKey = digestOf(ticket);
      let entity: Record<string, unknown> & { etag: string };
      try {
        entity = await client.getEntity<Record<string, unknown>>(partitionKey, ROW);
      } catch (error) {
        if (isStatus(error, 404)) throw new TerminalTicketRefusedError("unknown");
        throw error;
      }
      if (entity.used_at) throw new TerminalTicketRefusedError("used");
      if (new Date(String(entity.expires_at)).getTime() <= now().getTime()) {
        throw new TerminalTicketRefusedError("expired");
      }
      // Used even when the origin is wrong: a ticket seen from a foreign page is burnt.
      try {
        await client.updateEntity({ partitionKey, rowKey: ROW, used_at: now().toISOString() }, "Merge", {
          etag: entity.etag,
        });
      } catch (error) {
        if (isStatus(error, 412) || isStatus(error, 404)) throw new TerminalTicketRefusedError("used");
        throw error;
      }
      if (entity.origin !== origin) throw new TerminalTicketRefusedError("origin_mismatch");
      return { oid: String(entity.oid), origin: String(entity.origin) };
    },
  };
}
