import { createHash } from "node:crypto";

/** A strong ETag of a JSON representation: equal bodies, equal tags. */
export function etagOf(body: unknown): string {
  return `"${createHash("sha256").update(JSON.stringify(body)).digest("base64url").slice(0, 27)}"`;
}

/** Whether an `If-None-Match` header names `etag` (or `*`); weak tags compare by their value. */
export function ifNoneMatchHits(header: string | null | undefined, etag: string): boolean {
  if (!header) return false;
  return header.split(",").some((candidate) => {
    const tag = candidate.trim().replace(/^W\//, "");
    return tag === "*" || tag === etag;
  });
}

export interface LongPollOptions<T> {
  /** Reads the current representation. */
  render: () => Promise<T>;
  /** The request's `If-None-Match`: the representation the client already has. */
  ifNoneMatch: string | null | undefined;
  /** How long to hold the request while nothing changes; 0 answers at once. */
  waitMs: number;
  /** Calls `listener` when the resource may have changed here; returns the unsubscribe. */
  subscribe: (listener: () => void) => () => void;
  /** Re-reads at least this often, for changes made by other processes. */
  recheckMs: number;
  /** The request's signal: a client that hangs up ends the wait. */
  signal?: AbortSignal;
}

/**
 * A conditional GET that may wait: answers as soon as the representation differs from the one
 * the client holds (`If-None-Match`), or when `waitMs` has passed. `notModified` tells the route to
 * answer 304. Without `If-None-Match` it answers at once.
 */
export async function longPoll<T>(o: LongPollOptions<T>): Promise<{ body: T; etag: string; notModified: boolean }> {
  let signalled = false;
  let wakeUp: (() => void) | undefined;
  const onChange = () => {
    signalled = true;
    wakeUp?.();
  };
  // Subscribed before the first read, so a change between read and wait is not missed.
  const unsubscribe = o.subscribe(onChange);
  o.signal?.addEventListener("abort", onChange);
  try {
    const deadline = Date.now() + Math.max(0, o.waitMs);
    for (;;) {
      signalled = false;
      const body = await o.render();
      const etag = etagOf(body);
      const notModified = ifNoneMatchHits(o.ifNoneMatch, etag);
      const remaining = deadline - Date.now();
      if (!notModified || remaining <= 0 || o.signal?.aborted) return { body, etag, notModified };
      if (!signalled) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(remaining, o.recheckMs));
          wakeUp = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wakeUp = undefined;
      }
    }
  } finally {
    unsubscribe();
    o.signal?.removeEventListener("abort", onChange);
  }
}
