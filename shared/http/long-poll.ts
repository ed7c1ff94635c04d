import { createHash } from "node:crypto";

/**
 * An ETag of a JSON value: strong for the exact body, or weak (`W/`) when `value` is a version of
 * the body that leaves out parts that change on their own (a clock).
 */
export function etagOf(value: unknown, weak = false): string {
  return `${weak ? "W/" : ""}"${createHash("sha256").update(JSON.stringify(value)).digest("base64url").slice(0, 27)}"`;
}

/** Whether an `If-None-Match` header names `etag` (or `*`); tags compare weakly (RFC 9110 §13.1.2). */
export function ifNoneMatchHits(header: string | null | undefined, etag: string): boolean {
  if (!header) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, "");
  return header.split(",").some((candidate) => opaque(candidate) === "*" || opaque(candidate) === opaque(etag));
}

export interface LongPollOptions<T> {
  /** Reads the current representation. */
  render: () => Promise<T>;
  /**
   * The part of the representation that identifies its version, when the body also holds values
   * that change by themselves (elapsed seconds); the ETag is then weak. By default, the whole body.
   */
  versionOf?: (body: T) => unknown;
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
      const etag = o.versionOf ? etagOf(o.versionOf(body), true) : etagOf(body);
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
