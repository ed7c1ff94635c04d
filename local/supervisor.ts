import type { ChildProcess } from "node:child_process";
import { type RunningChild, startChildService } from "./child-service.js";

/** Options of {@link superviseChildService}: those of `startChildService`, plus the backoff. */
export type SupervisedServiceOptions = Parameters<typeof startChildService>[0] & {
  /** The setting that names the service's port; restarts keep the port the first start got. */
  portVariable: string;
  /** First wait before a restart (doubled per failed restart, up to `maxBackoffMs`). Default 250. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Hears of each unasked exit (the job API's health watch); must not throw. */
  onUnexpectedExit?: (exit: { pid: number | undefined; code: number | null; signal: NodeJS.Signals | null }) => void;
  /** Hears of each successful restart; must not throw. */
  onRestarted?: () => void;
};

/** A child service kept running: restarted after it dies, with backoff. */
export interface SupervisedService {
  /** Its URL (the same across restarts). */
  readonly url: string;
  /** The running process, or undefined while it is down. */
  current(): ChildProcess | undefined;
  /** Stops it for good (no restart). */
  stop(): Promise<void>;
}

/** How long a restarted service must stay up before the backoff starts over. */
const STABLE_AFTER_MS = 30_000;

/**
 * Starts a child service and restarts it whenever it exits unasked (a crash, an OOM kill, a
 * SIGKILL), on the same port, waiting `initialBackoffMs` then twice as long after each restart
 * that fails, up to `maxBackoffMs`. Each exit and restart is logged at warn.
 */
export async function superviseChildService(options: SupervisedServiceOptions): Promise<SupervisedService> {
  const { logger, name } = options;
  const initialBackoffMs = options.initialBackoffMs ?? 250;
  const maxBackoffMs = options.maxBackoffMs ?? 8000;
  let running: RunningChild | undefined = await startChildService(options);
  const url = running.url;
  const env = { ...options.env, [options.portVariable]: new URL(url).port };
  let stopping = false;
  let backoffMs = initialBackoffMs;
  let restarts = 0;
  let timer: NodeJS.Timeout | undefined;

  const watch = (child: RunningChild): void => {
    const startedAt = Date.now();
    child.process.once("exit", (code, signal) => {
      if (stopping || running !== child) return;
      running = undefined;
      if (Date.now() - startedAt > STABLE_AFTER_MS) backoffMs = initialBackoffMs;
      logger.warn(`${name} exited unexpectedly; restarting`, { code, signal, restart_in_ms: backoffMs, restarts });
      options.onUnexpectedExit?.({ pid: child.process.pid, code, signal });
      schedule();
    });
  };

  const schedule = (): void => {
    const delay = backoffMs;
    backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
    timer = setTimeout(() => {
      timer = undefined;
      if (stopping) return;
      restarts += 1;
      startChildService({ ...options, env })
        .then((child) => {
          if (stopping) return child.stop();
          running = child;
          watch(child);
          logger.warn(`${name} restarted`, { url: child.url, restarts });
          options.onRestarted?.();
        })
        .catch((error: unknown) => {
          if (stopping) return;
          logger.warn(`${name} failed to restart; trying again`, { error, restart_in_ms: backoffMs, restarts });
          schedule();
        });
    }, delay);
  };

  watch(running);
  return {
    url,
    current: () => running?.process,
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      await running?.stop();
    },
  };
}
