/**
 * A fixed-window counter: at most `limit` calls per window. Guards unauthenticated routes that
 * start work (the no-op diagnostic) so they cannot be used to flood the task hub.
 */
export function createFixedWindowLimiter(limit: number, windowMs: number, now: () => number = Date.now) {
  let windowStart = now();
  let count = 0;
  return {
    /** Takes one slot; returns the seconds to wait when the window is full, else 0. */
    take(): number {
      const t = now();
      if (t - windowStart >= windowMs) {
        windowStart = t;
        count = 0;
      }
      if (count >= limit) return Math.max(1, Math.ceil((windowStart + windowMs - t) / 1000));
      count++;
      return 0;
    },
  };
}
