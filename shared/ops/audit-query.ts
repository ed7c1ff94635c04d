import { sameObjectId } from "../auth/object-id.js";
import { InvalidFieldError } from "../errors.js";
import type { Role } from "../auth/roles.js";
import { type AuditEntry, type AuditLog, auditVisibleTo } from "./audit.js";

/** Filters of {@link queryAudit}: every given filter must match. */
export interface AuditQuery {
  /** The caller's role: entries above it are not returned, not counted, not paged over. */
  role: Role;
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
  /** The `next_cursor` of the previous page. */
  cursor?: string;
}

/** One page of audit entries, newest first. */
export interface AuditPage {
  entries: AuditEntry[];
  /** Present when more entries match; pass it back as `cursor`. */
  next_cursor?: string;
}

/** How far back a query scans: enough for the console, bounded so a query cannot scan forever. */
export const AUDIT_SCAN_LIMIT = 1000;

function encodeCursor(entry: AuditEntry): string {
  return Buffer.from(JSON.stringify([entry.at, entry.audit_id])).toString("base64url");
}

function decodeCursor(cursor: string): [string, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === "string"))
      return value as [string, string];
  } catch {
    // falls through to the field error
  }
  throw new InvalidFieldError(["cursor"], "not a cursor this service issued");
}

/** Paginated, filtered search of the audit log (newest first), over the latest {@link AUDIT_SCAN_LIMIT} entries. */
export async function queryAudit(audit: AuditLog, query: AuditQuery): Promise<AuditPage> {
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const all = await audit.list({ since: query.since, action: query.action, limit: AUDIT_SCAN_LIMIT });
  const matching = all.filter((e) => {
    if (!auditVisibleTo(e, query.role)) return false;
    if (query.until && e.at > query.until.toISOString()) return false;
    if (query.event_id !== undefined && e.details.event_id !== query.event_id) return false;
    if (query.actor !== undefined && !sameObjectId(e.actor.oid, query.actor) && e.actor.name !== query.actor)
      return false;
    if (query.decision !== undefined && (e.details.decision ?? e.outcome) !== query.decision) return false;
    if (query.mode !== undefined && e.details.mode !== query.mode) return false;
    // Newest first: a page continues with entries strictly older than the cursor's.
    if (after && (e.at > after[0] || (e.at === after[0] && e.audit_id >= after[1]))) return false;
    return true;
  });
  // Entries recorded in the same millisecond: order by id too, so the cursor is exact.
  matching.sort((a, b) => b.at.localeCompare(a.at) || b.audit_id.localeCompare(a.audit_id));
  const entries = matching.slice(0, query.page_size);
  const last = entries.at(-1);
  return matching.length > query.page_size && last ? { entries, next_cursor: encodeCursor(last) } : { entries };
}
