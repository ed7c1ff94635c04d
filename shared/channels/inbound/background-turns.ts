/**
 * Turns run in this process after the vendor's request is answered (issue 26). A channel route
 * answers as soon as the turn is durably in the channel queue (Slack wants its answer within 3 s,
 * Bot Service within 15 s) and starts the turn's `channelTurn` orchestration, whose activity runs it
 * inside an invocation; only when that cannot start — and in the tests below the trigger — does the
 * turn run here instead. Its reply goes out through the vendor's API either way.
 *
 * Nothing is lost when the process stops before a turn finishes: the turn stays claimed in the queue
 * and the queue's timer (`channelQueueTimer`) runs it again once its lease runs out.
 */

export interface BackgroundTurns {
  /** Starts `work` without waiting for it; a failure is reported to `onError`, never thrown. */
  run(work: () => Promise<unknown>): void;
  /** Resolves once nothing started here is running (tests; a host draining before it stops). */
  idle(): Promise<void>;
  /** How many are running now. */
  readonly running: number;
}

export function createBackgroundTurns(options: { onError?: (error: unknown) => void } = {}): BackgroundTurns {
  const running = new Set<Promise<void>>();
  return {
    run(work) {
      const task: Promise<void> = Promise.resolve()
        .then(work)
        .then(
          () => undefined,
          (error: unknown) => {
            try {
              options.onError?.(error);
            } catch {
              // A failing reporter must not become an unhandled rejection (it would end the process).
            }
          },
        )
        .finally(() => running.delete(task));
      running.add(task);
    },
    async idle() {
      // A turn may start another while this waits (a retried Slack event): wait until none is left.
      while (running.size > 0) await Promise.all(running);
    },
    get running() {
      return running.size;
    },
  };
}
