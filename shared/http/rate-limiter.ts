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

/** Clients tracked at once by {@link createPerClientLimiter}; beyond it, new clients share one window. */
const MAX_TRACKED_CLIENTS = 10_000;

/**
 * A fixed window per client (at most `limit` calls each per window), so one anonymous caller
 * cannot drain what every other caller may use. The number of clients tracked is bounded: past
 * {@link MAX_TRACKED_CLIENTS} (a flood of distinct addresses) new clients share one window,
 * and every call also counts against an overall ceiling of `limit × overallFactor`.
 */
export function createPerClientLimiter(
  limit: number,
  windowMs: number,
  options: { overallFactor?: number; now?: () => number } = {},
) {
  const now = options.now ?? Date.now;
  const overall = createFixedWindowLimiter(limit * (options.overallFactor ?? 20), windowMs, now);
  const clients = new Map<string, ReturnType<typeof createFixedWindowLimiter>>();
  let sweptAt = now();
  return {
    /** Takes one slot of `client`'s window; returns the seconds to wait when it is full, else 0. */
    take(client: string): number {
      const t = now();
      // Windows older than one period start over anyway: forget them.
      if (t - sweptAt >= windowMs) {
        clients.clear();
        sweptAt = t;
      }
      const key = clients.has(client) || clients.size < MAX_TRACKED_CLIENTS ? client : "(overflow)";
      let limiter = clients.get(key);
      if (!limiter) {
        limiter = createFixedWindowLimiter(limit, windowMs, now);
        clients.set(key, limiter);
      }
      const wait = limiter.take();
      return wait > 0 ? wait : overall.take();
    },
  };
}
