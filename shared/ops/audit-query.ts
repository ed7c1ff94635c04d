import { InvalidFieldError } from "../errors.js";
import { decodeContinuation, encodeContinuation } from "../http/continuation.js";
import type { AuditEntry, AuditLog } from "./audit.js";

/** Filters of {@link queryAudit}: every given filter must match. */
export interface AuditQuery {
  event_id?: string;
  /** An actor's object id or display name (exact). */
  actor?: string;
  /** The entry's recorded decision (`details.decision`) or, failing that, its outcome. */
  decision?: string;
  /** `details.mode` (`shadow`, `enforce`, `observation`). */
  mode?: string;
  action?: string;
  since?: Date;
  until?: Date;
  /** Entries per page, 1–100. */
  page_size: number;
  /** The `next_cursor` of the previous page (opaque). */
  cursor?: string;
}

/** One page of audit entries, newest first. */
export interface AuditPage {
  entries: AuditEntry[];
  /** Present while more entries remain to be searched; pass it back as `cursor`. */
  next_cursor?: string;
}

/** How many entries one page reads at most: bounded so a query cannot scan forever; the cursor continues past it. */
export const AUDIT_SCAN_LIMIT = 1000;

/**
 * Paginated, filtered search of the audit log, newest first. Each page reads at most
 * `scanLimit` entries from where the cursor left off, so a page may hold fewer than `page_size`
 * matches (even none) while `next_cursor` says more entries remain: a listing ends only where the
 * log ends, never silently at the scan bound.
 */
export async function queryAudit(
  audit: AuditLog,
  query: AuditQuery,
  options: { scanLimit?: number } = {},
): Promise<AuditPage> {
  const scanLimit = options.scanLimit ?? AUDIT_SCAN_LIMIT;
  let after: { at: string; audit_id: string } | undefined;
  if (query.cursor !== undefined) {
    const position = decodeContinuation(query.cursor, 2);
    if (!position || Number.isNaN(Date.parse(position[0] as string)))
      throw new InvalidFieldError(["cursor"], "not a cursor this service issued");
    after = { at: position[0] as string, audit_id: position[1] as string };
  }
  const scanned = await audit.list({ since: query.since, action: query.action, limit: scanLimit, after });
  const matches = (e: AuditEntry) => {
    if (query.until && e.at > query.until.toISOString()) return false;
    if (query.event_id !== undefined && e.details.event_id !== query.event_id) return false;
    if (query.actor !== undefined && e.actor.oid !== query.actor && e.actor.name !== query.actor) return false;
    if (query.decision !== undefined && (e.details.decision ?? e.outcome) !== query.decision) return false;
    if (query.mode !== undefined && e.details.mode !== query.mode) return false;
    return true;
  };
  const entries: AuditEntry[] = [];
  let last: AuditEntry | undefined;
  for (const e of scanned) {
    last = e;
    if (matches(e)) entries.push(e);
    if (entries.length === query.page_size) break;
  }
  // More may follow: the page filled before the scan ended, or the scan read its whole bound.
  const more = (last !== undefined && last !== scanned.at(-1)) || scanned.length === scanLimit;
  return more && last ? { entries, next_cursor: encodeContinuation([last.at, last.audit_id]) } : { entries };
}
