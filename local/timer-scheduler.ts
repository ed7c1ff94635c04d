import type { Logger } from "../shared/logging/logger.js";
import type { RegisteredFunction } from "./functions-core.js";
import { isPastDue, parseNcrontab } from "../shared/config/ncrontab.js";

/** Last and next occurrence of one timer, kept across restarts (Azure's schedule monitor). */
export interface TimerStatus {
  last: string;
  next: string;
  lastUpdated: string;
}

export interface TimerStatusStore {
  get(functionName: string): Promise<TimerStatus | undefined>;
  set(functionName: string, status: TimerStatus): Promise<void>;
}

export interface TimerInvoker {
  invoke(fn: RegisteredFunction, triggerData: unknown): Promise<unknown>;
}

/** Resolves `%SETTING%` references in a binding value from app settings, as the Functions host does. */
export function resolveAppSettingReferences(value: string, env: Record<string, string | undefined>): string {
  return value.replace(/%([A-Za-z0-9_]+)%/g, (_match, name: string) => {
    const resolved = env[name];
    if (resolved === undefined) throw new Error(`app setting ${name} referenced by a binding is not set`);
    return resolved;
  });
}

interface ScheduledTimer {
  fn: RegisteredFunction;
  handle: NodeJS.Timeout | undefined;
}

/**
 * Runs timer triggers on their six-field NCRONTAB schedules. Like the Functions host's schedule
 * monitor, it persists each timer's next occurrence: after a restart, an occurrence that passed
 * while nothing ran fires at once with `isPastDue: true`. `runOnStartup` fires once at start.
 */
export class TimerScheduler {
  private readonly timers: ScheduledTimer[] = [];
  private stopped = false;
  private readonly running = new Set<Promise<unknown>>();

  constructor(
    private readonly deps: {
      invoker: TimerInvoker;
      store: TimerStatusStore;
      logger: Logger;
      env: Record<string, string | undefined>;
      now?: () => Date;
    },
  ) {}

  private now(): Date {
    return this.deps.now ? this.deps.now() : new Date();
  }

  /** Validates every schedule up front (a bad one fails start-up), then arms the timers. */
  async start(functions: RegisteredFunction[]): Promise<void> {
    for (const fn of functions) {
      const trigger = Object.values(fn.metadata.bindings).find((b) => b.type === "timerTrigger");
      if (!trigger || typeof trigger.schedule !== "string") {
        throw new Error(`timer function "${fn.metadata.name}" has no schedule`);
      }
      const schedule = parseNcrontab(resolveAppSettingReferences(trigger.schedule, this.deps.env));
      const timer: ScheduledTimer = { fn, handle: undefined };
      this.timers.push(timer);
      const now = this.now();
      const status = trigger.useMonitor === false ? undefined : await this.deps.store.get(fn.metadata.name);
      const missed = status !== undefined && isPastDue(new Date(status.next), now);
      if (missed || trigger.runOnStartup === true) {
        const scheduledFor = missed && status ? new Date(status.next) : now;
        this.fire(timer, scheduledFor, missed, schedule.next(now));
      }
      this.arm(timer, schedule, schedule.next(now), trigger.useMonitor !== false);
    }
  }

  private arm(timer: ScheduledTimer, schedule: ReturnType<typeof parseNcrontab>, at: Date, monitor: boolean): void {
    if (this.stopped) return;
    if (monitor) {
      const previous = this.now().toISOString();
      void this.deps.store
        .set(timer.fn.metadata.name, { last: previous, next: at.toISOString(), lastUpdated: previous })
        .catch((error: unknown) => this.deps.logger.warn("timer status not saved", { error }));
    }
    // setTimeout caps at ~24.8 days; re-arm in steps for longer waits.
    const delay = Math.min(Math.max(0, at.getTime() - this.now().getTime()), 2 ** 31 - 1);
    timer.handle = setTimeout(() => {
      if (this.now().getTime() + 5 < at.getTime()) {
        this.arm(timer, schedule, at, false);
        return;
      }
      const next = schedule.next(at);
      this.fire(timer, at, isPastDue(at, this.now()), next);
      this.arm(timer, schedule, next, monitor);
    }, delay);
    timer.handle.unref();
  }

  private fire(timer: ScheduledTimer, scheduledFor: Date, pastDue: boolean, next: Date): void {
    const payload = {
      Schedule: { AdjustForDST: true },
      ScheduleStatus: {
        Last: scheduledFor.toISOString(),
        Next: next.toISOString(),
        LastUpdated: this.now().toISOString(),
      },
      IsPastDue: pastDue,
    };
    const run = this.deps.invoker
      .invoke(timer.fn, { json: JSON.stringify(payload) })
      .catch((error: unknown) =>
        this.deps.logger.error("timer function failed", { function: timer.fn.metadata.name, error }),
      );
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** Disarms every timer and waits for running invocations. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) if (t.handle) clearTimeout(t.handle);
    await Promise.allSettled([...this.running]);
  }
}
