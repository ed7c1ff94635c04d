import { UnauthorizedError } from "../errors.js";
import type { TableSource } from "../storage/table-source.js";
import {
  createTerminalTicketStore,
  type IssuedTicket,
  TerminalTicketRefusedError,
  type TicketRefusal,
} from "../terminal/terminal-tickets.js";
import type { ResultFileKind } from "./result-file-names.js";

/**
 * Download tickets (issue 23): a results download the browser streams to disk by itself, from a
 * plain link, without the bearer token in a URL. The job page asks for a ticket with its token
 * (`POST /api/blast/jobs/{uuid}/results/ticket`) and hands the browser a link carrying the ticket.
 * A ticket is the terminal's kind (`shared/terminal/terminal-tickets.ts`): 32 random bytes, only
 * its SHA-256 digest stored, single use, short-lived; here bound to the caller, the job and the
 * content. A ticket in a logged URL is spent (or expired) by the time anyone reads the log.
 */

export const DOWNLOAD_TICKET_TABLE = "downloadtickets";
export const DOWNLOAD_TICKET_PREFIX = "bpdt_";
/** Long enough for a browser to start the download on a slow page; the download itself may last hours. */
export const DOWNLOAD_TICKET_TTL_SECONDS = 60;

/** Why a download ticket was refused (`wrong_download`: issued for another job or content). */
export type DownloadTicketRefusal = Exclude<TicketRefusal, "origin_mismatch"> | "wrong_download";

/** A ticket that opens no download: 401, saying why (never the ticket). */
export class DownloadTicketRefusedError extends UnauthorizedError {
  constructor(readonly reason: DownloadTicketRefusal) {
    super(`download ticket refused: ${reason.replace("_", " ")}; ask for a new one`);
  }
}

/** What a download ticket is bound to besides the caller. */
function scope(jobId: string, content: ResultFileKind): string {
  return `blast-results:${jobId}:${content}`;
}

/** The download ticket store over Table storage (its own table; `now` and `ttlSeconds` for tests). */
export function createDownloadTicketStore(
  source: TableSource,
  options: { now?: () => Date; ttlSeconds?: number } = {},
) {
  const store = createTerminalTicketStore(source, {
    ...options,
    ttlSeconds: options.ttlSeconds ?? DOWNLOAD_TICKET_TTL_SECONDS,
    table: DOWNLOAD_TICKET_TABLE,
    prefix: DOWNLOAD_TICKET_PREFIX,
  });
  return {
    /** A ticket for `oid` to download `content` of dashboard job `jobId` once. */
    issue(oid: string, jobId: string, content: ResultFileKind): Promise<IssuedTicket> {
      return store.issue({ oid, origin: scope(jobId, content) });
    },
    /** Spends `ticket` on `content` of `jobId`: its caller's oid, or DownloadTicketRefusedError. */
    async redeem(ticket: string | undefined, jobId: string, content: ResultFileKind): Promise<{ oid: string }> {
      try {
        return { oid: (await store.redeem(ticket, scope(jobId, content))).oid };
      } catch (error) {
        if (!(error instanceof TerminalTicketRefusedError)) throw error;
        throw new DownloadTicketRefusedError(error.reason === "origin_mismatch" ? "wrong_download" : error.reason);
      }
    },
  };
}

export type DownloadTicketStore = ReturnType<typeof createDownloadTicketStore>;
