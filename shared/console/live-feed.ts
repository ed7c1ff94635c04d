import type { Role } from "../auth/roles.js";
import type { SseChannel } from "../http/sse.js";
import { type AuditEntry, type AuditLog, auditVisibleTo } from "../ops/audit.js";
import { SEVERITY_CHANGED } from "../ops/incidents/incidents.js";

/**
 * The verified core-stage frames of `GET /api/live/stream` (spec operator-console.md §4, §6 item 1),
 * derived from the durable audit log — what the operations core and the approval service recorded
 * after the deterministic engine and the verifier decided, never a narrator's words.
 */
export type LiveFrameKind =
  | "event_ingested"
  | "verdict"
  | "severity_changed"
  | "approval_needed"
  | "approval_decided"
  | "denied"
  | "failed_result"
  | "action_succeeded";

/**
 * One frame's data: bounded, allow-listed scalars only — no raw errors, no resource targets, no
 * justifications, no approval controls. `link` is a same-origin, read-only path the server derives.
 */
export interface LiveFrame {
  kind: LiveFrameKind;
  /** The audit entry the frame comes from (an opaque id, also the notification tag's source). */
  audit_id: string;
  at: string;
  /** True for frames sent to catch a resuming client up (before the stream turned live). */
  replay: boolean;
  event_id?: string;
  event_type?: string;
  decision?: string;
  severity?: string;
  incident_id?: string;
  approval_id?: string;
  action_type?: string;
  reason?: string;
  link: string;
}

/** Where a stream continues: the last entry sent (`at`, `audit_id`), as `Last-Event-ID`. */
export interface LiveCursor {
  at: string;
  audit_id: string;
}

/** `Last-Event-ID`: `<RFC 3339 at>~<audit id>`. */
export const LIVE_EVENT_ID = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)~([A-Za-z0-9-]{1,64})$/;

export function cursorId(cursor: LiveCursor): string {
  return `${cursor.at}~${cursor.audit_id}`;
}

export function parseCursor(id: string): LiveCursor | undefined {
  const match = LIVE_EVENT_ID.exec(id);
  if (!match || Number.isNaN(Date.parse(match[1] as string))) return undefined;
  return { at: match[1] as string, audit_id: match[2] as string };
}

const SAFE_TOKEN = /^[A-Za-z0-9._:-]{1,80}$/;

/** A scalar detail that is a short plain token (ids, enum values), else nothing. */
function token(value: unknown): string | undefined {
  return typeof value === "string" && SAFE_TOKEN.test(value) ? value : undefined;
}

function incidentLink(incidentId: string | undefined): string {
  return incidentId ? `/console?incident=${encodeURIComponent(incidentId)}` : "/console";
}

/** The frames one audit entry makes (none for entries that are not core-stage outcomes). */
export function liveFramesOf(entry: AuditEntry, replay: boolean): LiveFrame[] {
  const base = { audit_id: entry.audit_id, at: entry.at, replay };
  const d = entry.details;
  switch (entry.action) {
    case "ops.event_processed": {
      const eventType = token(d.event_type);
      const event = { event_id: token(d.event_id), event_type: eventType };
      if (eventType === SEVERITY_CHANGED) {
        const incidentId = /^incident\/(INC-[0-9a-f]{12})$/.exec(entry.target)?.[1];
        return [
          { ...base, kind: "severity_changed", ...event, incident_id: incidentId, link: incidentLink(incidentId) },
        ];
      }
      return [
        { ...base, kind: "event_ingested", ...event, link: "/console" },
        {
          ...base,
          kind: "verdict",
          ...event,
          decision: token(d.decision),
          severity: token(d.severity),
          link: "/console",
        },
      ];
    }
    case "console.enqueue_hil":
      return entry.outcome === "succeeded"
        ? [
            {
              ...base,
              kind: "approval_needed",
              approval_id: token(entry.target),
              action_type: token(d.action_type),
              link: "/console",
            },
          ]
        : [];
    case "console.approve_hil": {
      const approvalId = token(entry.target);
      if (entry.outcome === "denied")
        return [{ ...base, kind: "denied", approval_id: approvalId, reason: token(d.reason), link: "/console" }];
      if (entry.outcome !== "succeeded") return [];
      const decision = token(d.decision);
      return [
        {
          ...base,
          kind: decision === "approve" ? "approval_decided" : "denied",
          approval_id: approvalId,
          decision,
          link: "/console",
        },
      ];
    }
    case "console.action_executed": {
      const frame = { ...base, approval_id: token(entry.target), action_type: token(d.action_type), link: "/console" };
      if (entry.outcome === "failed") return [{ ...frame, kind: "failed_result" }];
      if (entry.outcome === "denied") return [{ ...frame, kind: "denied" }];
      return [{ ...frame, kind: "action_succeeded" }];
    }
    default:
      return [];
  }
}

/** Drops undefined fields (JSON would anyway; tests compare exact objects). */
function compact(frame: LiveFrame): LiveFrame {
  return Object.fromEntries(Object.entries(frame).filter(([, v]) => v !== undefined)) as unknown as LiveFrame;
}

export interface LiveFeedOptions {
  audit: AuditLog;
  /** How often the audit log is read for new entries. */
  pollMs: number;
  /** How far back a `Last-Event-ID` is honoured (older cursors resume from this far back). */
  retentionMs: number;
  /**
   * Entries recorded within this long before the newest one seen may still become visible (an
   * entry's time is taken before its insert completes): each poll re-reads this overlap and skips
   * what it already sent.
   */
  settleMs?: number;
  now?: () => Date;
}

/** What one listing may return; more entries since a cursor than this is a gap the client is told about. */
export const LIVE_PAGE = 1000;

/** One frame to send: its data and, on the last frame of an entry, the entry's cursor as the SSE id. */
export type LiveDelivery = AuditDelivery<LiveFrame>;

/**
 * Follows the audit log for one client: first the entries after `after` (marked `replay`), then
 * new entries as they are recorded, oldest first, only those the role may read. A gap (more than
 * {@link LIVE_PAGE} entries to catch up on) yields a `gap` marker instead of silently skipping.
 */
export function followLive(
  options: LiveFeedOptions,
  client: { role: Role; after?: LiveCursor; abortSignal: AbortSignal },
): AsyncGenerator<LiveDelivery | { gap: true }> {
  return followAudit(options, client, (entry, replay) => liveFramesOf(entry, replay).map(compact));
}

/** One frame of a stream that follows the audit log, and its cursor on an entry's last frame. */
export interface AuditDelivery<F> {
  frame: F;
  id?: string;
}

/**
 * Follows the audit log for one client, turning each entry the role may read into frames with
 * `framesOf` (the replay flag says whether it is catch-up): the engine of `/live/stream` and
 * `/agents/stream`. See {@link followLive}.
 */
export async function* followAudit<F>(
  options: LiveFeedOptions,
  client: { role: Role; after?: LiveCursor; abortSignal: AbortSignal },
  framesOf: (entry: AuditEntry, replay: boolean) => F[],
): AsyncGenerator<AuditDelivery<F> | { gap: true }> {
  const now = options.now ?? (() => new Date());
  const settleMs = options.settleMs ?? 5000;
  const oldest = new Date(now().getTime() - options.retentionMs);
  let since: Date;
  let replaying: boolean;
  // Entries already sent (or before the cursor) within the settle window, by id.
  const sent = new Map<string, number>();
  if (client.after) {
    const at = new Date(client.after.at);
    since = at < oldest ? oldest : at;
    replaying = true;
    sent.set(client.after.audit_id, at.getTime());
  } else {
    // A fresh stream starts at "now": history is what /agents/activity and query_audit are for.
    since = now();
    replaying = false;
  }
  const cursorTime = client.after ? Date.parse(client.after.at) : undefined;
  while (!client.abortSignal.aborted) {
    const entries = await options.audit.list({ since, limit: LIVE_PAGE });
    if (entries.length >= LIVE_PAGE) yield { gap: true };
    let newest = since.getTime();
    for (const entry of entries.reverse()) {
      const at = Date.parse(entry.at);
      newest = Math.max(newest, at);
      if (sent.has(entry.audit_id)) continue;
      // On resume: entries in the cursor's own millisecond come oldest-first in descending id order,
      // so those with a larger id than the cursor's were sent before it.
      if (cursorTime !== undefined && at === cursorTime && client.after && entry.audit_id > client.after.audit_id)
        continue;
      sent.set(entry.audit_id, at);
      if (!auditVisibleTo(entry, client.role)) continue;
      const frames = framesOf(entry, replaying);
      // The id goes on the entry's last frame: a client cut off between two frames resumes before both.
      for (const [index, frame] of frames.entries())
        yield {
          frame,
          ...(index === frames.length - 1 ? { id: cursorId({ at: entry.at, audit_id: entry.audit_id }) } : {}),
        };
    }
    replaying = false;
    // Re-read the settle window next time; forget what falls out of it (bounded memory).
    since = new Date(Math.max(since.getTime(), newest - settleMs));
    for (const [id, at] of sent) if (at < since.getTime()) sent.delete(id);
    await pause(options.pollMs, client.abortSignal);
  }
}

function pause(ms: number, abortSignal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (abortSignal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      abortSignal.removeEventListener("abort", done);
      resolve();
    }
    abortSignal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Relays {@link followLive} onto an event stream: `live` frames (ids on each entry's last frame),
 * a `gap` frame when entries were missed; ends when the stream ends (client gone, slow, or the
 * connection's lifetime is over).
 */
export function relayLive(
  channel: SseChannel,
  options: LiveFeedOptions & { role: Role; after?: LiveCursor },
): Promise<void> {
  return relayAudit(channel, "live", followLive(options, { ...options, abortSignal: channel.abortSignal }));
}

/** Relays a followed audit log onto an event stream as frames named `event` (and `gap` markers). */
export async function relayAudit<F>(
  channel: SseChannel,
  event: string,
  deliveries: AsyncIterable<AuditDelivery<F> | { gap: true }>,
): Promise<void> {
  try {
    for await (const delivery of deliveries) {
      const sent =
        "gap" in delivery
          ? channel.send({
              event: "gap",
              data: { detail: `more than ${LIVE_PAGE} entries since the cursor; some were missed` },
            })
          : channel.send({ event, data: delivery.frame, ...(delivery.id ? { id: delivery.id } : {}) });
      if (!sent) return;
    }
  } finally {
    channel.close();
  }
}
