/**
 * How old a readiness answer may be when served: reads answer at once within it (a refresh runs
 * behind them from {@link REFRESH_AFTER_MS} on), so a slow dependency under a burst delays the
 * next answer, not every read.
 */
export const READINESS_MAX_AGE_MS = 3000;
/** From this age on, a read also starts a fresh check in the background. */
const REFRESH_AFTER_MS = 250;

/**
 * Readiness served from the last completed check while it is at most {@link READINESS_MAX_AGE_MS}
 * old, with one check running at a time: a flood of readiness reads (a load balancer, a burst of
 * clients) answers at once and adds no load to the dependencies it reports on. A read finding the
 * answer older waits for the check in flight.
 */
export function createReadinessState<T>(check: () => Promise<T>, now: () => number = Date.now) {
  let last: { value: T; at: number } | undefined;
  let inFlight: Promise<T> | undefined;
  const refresh = (): Promise<T> => {
    inFlight ??= check()
      .then((value) => {
        last = { value, at: now() };
        return value;
      })
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
  return {
    async current(): Promise<T> {
      const age = last ? now() - last.at : Number.POSITIVE_INFINITY;
      if (last && age <= READINESS_MAX_AGE_MS) {
        if (age >= REFRESH_AFTER_MS) refresh().catch(() => {});
        return last.value;
      }
      return refresh();
    },
  };
}
