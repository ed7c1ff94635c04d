import { describe, expect, it } from "vitest";
import type { RegisteredFunction } from "../../local/functions-core.js";
import { resolveAppSettingReferences, type TimerStatus, TimerScheduler } from "../../local/timer-scheduler.js";
import { createLogger } from "../../shared/logging/logger.js";

function timerFunction(name: string, schedule: string, extra: Record<string, unknown> = {}): RegisteredFunction {
  return {
    metadata: { name, bindings: { timerTrigger1: { type: "timerTrigger", direction: "in", schedule, ...extra } } },
    callback: () => undefined,
  };
}

function memoryStore(initial: Record<string, TimerStatus> = {}) {
  const data = new Map(Object.entries(initial));
  return {
    data,
    get: async (name: string) => data.get(name),
    set: async (name: string, status: TimerStatus) => {
      data.set(name, status);
    },
  };
}

const quiet = createLogger({ level: "error", write: () => undefined });

describe("timer scheduler", () => {
  it("fires a missed occurrence at start with isPastDue, from the persisted schedule status", async () => {
    const fired: { IsPastDue: boolean; ScheduleStatus: { Last: string } }[] = [];
    let firedOnce: () => void = () => {};
    const invoked = new Promise<void>((resolve) => {
      firedOnce = resolve;
    });
    const store = memoryStore({
      nightly: {
        last: "2026-01-01T00:00:00.000Z",
        next: "2026-01-02T00:00:00.000Z",
        lastUpdated: "2026-01-01T00:00:00.000Z",
      },
    });
    const scheduler = new TimerScheduler({
      invoker: {
        invoke: async (_fn, data) => {
          fired.push(JSON.parse((data as { json: string }).json));
          firedOnce();
        },
      },
      store,
      logger: quiet,
      env: {},
      now: () => new Date("2026-01-05T12:00:00Z"),
    });
    await scheduler.start([timerFunction("nightly", "0 0 0 * * *")]);
    // The missed occurrence fired; stopping then disarms the timers, so no second firing can follow.
    await invoked;
    await scheduler.stop();
    expect(fired).toHaveLength(1);
    expect(fired[0]?.IsPastDue).toBe(true);
    expect(fired[0]?.ScheduleStatus.Last).toBe("2026-01-02T00:00:00.000Z");
    expect(store.data.get("nightly")?.next).toBe("2026-01-06T00:00:00.000Z");
  });

  it("runs once at start with runOnStartup and not past due", async () => {
    const fired: { IsPastDue: boolean }[] = [];
    let firedOnce: () => void = () => {};
    const invoked = new Promise<void>((resolve) => {
      firedOnce = resolve;
    });
    const scheduler = new TimerScheduler({
      invoker: {
        invoke: async (_fn, data) => {
          fired.push(JSON.parse((data as { json: string }).json));
          firedOnce();
        },
      },
      store: memoryStore(),
      logger: quiet,
      env: {},
    });
    await scheduler.start([timerFunction("warm", "0 0 0 1 1 *", { runOnStartup: true })]);
    await invoked;
    await scheduler.stop();
    expect(fired).toEqual([expect.objectContaining({ IsPastDue: false })]);
  });

  it("refuses to start with an invalid schedule or a missing app setting", async () => {
    const make = () =>
      new TimerScheduler({ invoker: { invoke: async () => undefined }, store: memoryStore(), logger: quiet, env: {} });
    await expect(make().start([timerFunction("bad", "0 0 * * *")])).rejects.toThrow(/6 fields/);
    await expect(make().start([timerFunction("unset", "%NOT_SET%")])).rejects.toThrow(/NOT_SET/);
  });

  it("resolves %SETTING% references in binding values", () => {
    expect(resolveAppSettingReferences("%A% and %B%", { A: "0 0 * * * *", B: "x" })).toBe("0 0 * * * * and x");
  });
});
