import type { ApiClient } from "./api.js";
import {
  decide,
  type LiveFrameView,
  ledgerKey,
  mayNotify,
  notificationLink,
  notificationText,
  optInKey,
  parseLedger,
  tagOf,
} from "./notify-ledger.js";
import { readSse } from "./sse.js";

/** Whether this principal opted in here and the browser granted permission (both are required). */
export function notificationsEnabled(principalOid: string): boolean {
  return (
    typeof Notification !== "undefined" &&
    Notification.permission === "granted" &&
    localStorage.getItem(optInKey(principalOid)) === "1"
  );
}

/** Asks the browser for permission and records the opt-in; true when notifications are now on. */
export async function optIn(principalOid: string): Promise<boolean> {
  if (typeof Notification === "undefined") return false;
  const permission = await Notification.requestPermission();
  if (permission !== "granted") return false;
  localStorage.setItem(optInKey(principalOid), "1");
  return true;
}

export function optOut(principalOid: string): void {
  localStorage.removeItem(optInKey(principalOid));
}

/**
 * Shows the notification for one frame if the rules allow it. The ledger is read, decided and
 * written under a Web Lock named after the principal, so two tabs that see the same frame at once
 * decide one after the other and only the first shows it.
 */
export async function notifyFrame(frame: LiveFrameView, principalOid: string): Promise<boolean> {
  if (!mayNotify(frame) || !notificationsEnabled(principalOid)) return false;
  const tag = await tagOf(frame);
  const key = ledgerKey(principalOid);
  return navigator.locks.request(key, () => {
    const decision = decide(parseLedger(localStorage.getItem(key)), tag, Date.now());
    localStorage.setItem(key, JSON.stringify(decision.ledger));
    // Observable by the page (and the e2e tests): each decision, shown or suppressed, and why.
    window.dispatchEvent(
      new CustomEvent("blastplane:notify-decision", {
        detail: { tag, shown: decision.show, reason: decision.show ? undefined : decision.reason },
      }),
    );
    if (!decision.show) return false;
    const text = notificationText(frame.kind, navigator.language);
    const link = notificationLink(frame, window.location.origin);
    // Informational only: no actions, no approval controls; the tag replaces a repeat of the same event.
    const notification = new Notification(text.title, { body: text.body, tag, data: { link } });
    notification.onclick = () => {
      window.focus();
      window.location.assign(link);
    };
    return true;
  });
}

/**
 * Follows `/api/live/stream` while `signal` is not aborted, resuming by `Last-Event-ID` after a
 * drop (replayed frames notify nobody); `onFrame` sees every frame (the console's live list).
 */
export async function followLive(
  api: ApiClient,
  principalOid: string,
  signal: AbortSignal,
  onFrame: (frame: LiveFrameView) => void = () => undefined,
): Promise<void> {
  let lastEventId: string | undefined;
  while (!signal.aborted) {
    try {
      const body = await api.liveStream(lastEventId, signal);
      await readSse(
        body,
        (message) => {
          if (message.id) lastEventId = message.id;
          if (message.event !== "live") return;
          const frame = JSON.parse(message.data) as LiveFrameView;
          onFrame(frame);
          void notifyFrame(frame, principalOid);
        },
        signal,
      );
    } catch {
      // A refused or broken stream: try again after the pause below.
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}
