/**
 * Browser notifications from `/api/live/stream` frames (spec operator-console.md §6 item 5, §8):
 * which frames may notify, what a notification says, and the per-principal ledger shared by every
 * tab of the browser that suppresses a repeated tag for 5 minutes and allows at most 5 per minute.
 * Pure functions over plain data, so the rules are tested without a browser.
 */

/** The frame kinds that may raise a notification: nothing else does (successes included). */
export const NOTIFYING_KINDS = ["approval_needed", "denied", "failed_result"] as const;
export type NotifyingKind = (typeof NOTIFYING_KINDS)[number];

/** §8: the same tag is suppressed this long. */
export const SAME_TAG_SUPPRESSION_MS = 5 * 60 * 1000;
/** §8: at most this many notifications per minute. */
export const MAX_PER_MINUTE = 5;

/** What the live stream sends (the fields this module reads). */
export interface LiveFrameView {
  kind: string;
  audit_id: string;
  replay: boolean;
  incident_id?: string;
  link?: string;
}

/** The ledger: tags shown with their time, and the times of recent notifications. */
export interface NotifyLedger {
  tags: Record<string, number>;
  shown: number[];
}

export const EMPTY_LEDGER: NotifyLedger = { tags: {}, shown: [] };

/** The storage key of a principal's ledger: tabs of one signed-in principal share it, others do not. */
export function ledgerKey(principalOid: string): string {
  return `blastplane.notify-ledger.${principalOid}`;
}

/** The storage key of a principal's opt-in (off until they choose it). */
export function optInKey(principalOid: string): string {
  return `blastplane.notify-opt-in.${principalOid}`;
}

/** Reads a stored ledger; anything malformed is an empty ledger. */
export function parseLedger(text: string | null): NotifyLedger {
  try {
    const value = JSON.parse(text ?? "") as NotifyLedger;
    if (value && typeof value.tags === "object" && Array.isArray(value.shown)) return value;
  } catch {
    // Fall through.
  }
  return { tags: {}, shown: [] };
}

/** Whether a frame may notify at all: a notifying kind, live (not replayed). */
export function mayNotify(frame: LiveFrameView): frame is LiveFrameView & { kind: NotifyingKind } {
  return !frame.replay && (NOTIFYING_KINDS as readonly string[]).includes(frame.kind);
}

/**
 * The opaque, bounded tag of a frame's event: a SHA-256 of kind and audit id, 24 hex characters.
 * The same event always has the same tag, so a repeat replaces its notification.
 */
export async function tagOf(frame: LiveFrameView): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`${frame.kind}\n${frame.audit_id}`));
  return `bp-${[...new Uint8Array(digest)]
    .slice(0, 12)
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("")}`;
}

/**
 * Decides one notification against the ledger at `now`: shown (and the ledger that records it), or
 * suppressed with the reason. Entries older than their window are dropped, so the ledger stays small.
 */
export function decide(
  ledger: NotifyLedger,
  tag: string,
  now: number,
): { show: true; ledger: NotifyLedger } | { show: false; reason: "same_tag" | "rate_limit"; ledger: NotifyLedger } {
  const tags = Object.fromEntries(
    Object.entries(ledger.tags).filter(([, at]) => now - at < SAME_TAG_SUPPRESSION_MS && at <= now),
  );
  const shown = ledger.shown.filter((at) => now - at < 60_000 && at <= now);
  const kept = { tags, shown };
  if (tags[tag] !== undefined) return { show: false, reason: "same_tag", ledger: kept };
  if (shown.length >= MAX_PER_MINUTE) return { show: false, reason: "rate_limit", ledger: kept };
  return { show: true, ledger: { tags: { ...tags, [tag]: now }, shown: [...shown, now] } };
}

const TEXT: Record<"en" | "ko", Record<NotifyingKind, { title: string; body: string }>> = {
  en: {
    approval_needed: {
      title: "Approval needed",
      body: "A request is waiting for an approver. Open the console to review it.",
    },
    denied: { title: "Request denied", body: "A request was denied. Open the console for the details." },
    failed_result: { title: "Action failed", body: "An action did not complete. Open the console for the details." },
  },
  ko: {
    approval_needed: { title: "승인 필요", body: "승인을 기다리는 요청이 있습니다. 콘솔에서 확인하세요." },
    denied: { title: "요청 거부됨", body: "요청이 거부되었습니다. 자세한 내용은 콘솔에서 확인하세요." },
    failed_result: { title: "작업 실패", body: "작업이 완료되지 않았습니다. 자세한 내용은 콘솔에서 확인하세요." },
  },
};

/** Localized generic text (English fallback): no ids, errors or resource names from the frame. */
export function notificationText(kind: NotifyingKind, language: string): { title: string; body: string } {
  return TEXT[language.toLowerCase().startsWith("ko") ? "ko" : "en"][kind];
}

/**
 * The read-only page a notification opens: the frame's server-derived link when it is a same-origin
 * console path, else the console itself.
 */
export function notificationLink(frame: LiveFrameView, origin: string): string {
  const fallback = new URL("/console", origin).href;
  if (!frame.link?.startsWith("/") || frame.link.startsWith("//")) return fallback;
  const url = new URL(frame.link, origin);
  return url.origin === origin && url.pathname === "/console" ? url.href : fallback;
}
