import { describe, expect, it } from "vitest";
import {
  CLUSTER_COMPONENT,
  createHealthTransitions,
  JOB_API_COMPONENT,
} from "../../shared/ops/emitters/health-transitions.js";
import { createSaturationWatch } from "../../shared/ops/emitters/saturation-watch.js";
import { createEventLog } from "../../shared/ops/events.js";
import { azuriteTables, captureLogger } from "../support/service-fakes.js";

/** The streak and transition logic of the signal emitters, over a real event log on Azurite and a clock the test moves. */
const { tables } = azuriteTables("sigw");

describe("queue saturation watch", () => {
  function watch(threshold = 3, windowSeconds = 60) {
    const source = tables();
    const events = createEventLog(source);
    let clock = Date.parse("2026-05-01T08:00:00.000Z");
    const logger = captureLogger();
    const saturation = createSaturationWatch({
      events,
      logger,
      threshold,
      windowMs: windowSeconds * 1000,
      instance: "jobapi-0",
      retryAfterSeconds: 30,
      now: () => clock,
    });
    const advance = (seconds: number) => {
      clock += seconds * 1000;
    };
    const saturated = async () => {
      await saturation.settled();
      return events.list({ event_type: "queue.saturated" });
    };
    return { saturation, advance, saturated, logger };
  }

  it("needs the threshold within the window: refusals spread wider than the window make no streak", async () => {
    const w = watch(3, 60);
    w.saturation.refused(5);
    w.advance(40);
    w.saturation.refused(5);
    w.advance(40);
    // The first refusal is out of the window now: two within it.
    w.saturation.refused(5);
    expect(await w.saturated()).toEqual([]);
    w.advance(1);
    w.saturation.refused(5);
    const [event, ...more] = await w.saturated();
    expect(more).toEqual([]);
    expect(event?.payload).toMatchObject({
      instance: "jobapi-0",
      refusals: 3,
      window_seconds: 60,
      queued: 5,
      retry_after_seconds: 30,
      streak_started_at: "2026-05-01T08:00:40.000Z",
    });
  });

  it("one event per streak: it goes on while 429s keep coming; an admitted submit ends it and the next streak is a new event", async () => {
    const w = watch(2, 60);
    for (let i = 0; i < 6; i++) {
      w.saturation.refused(2);
      w.advance(10);
    }
    expect(await w.saturated()).toHaveLength(1);
    w.saturation.admitted();
    w.saturation.refused(2);
    expect(await w.saturated()).toHaveLength(1);
    w.advance(1);
    w.saturation.refused(2);
    expect(await w.saturated()).toHaveLength(2);
    expect(w.logger.entries.filter((e) => e.msg === "queue saturated")).toHaveLength(2);
  });

  it("a streak also ends when a whole window passes without a 429", async () => {
    const w = watch(2, 60);
    w.saturation.refused(2);
    w.saturation.refused(2);
    w.advance(61);
    w.saturation.refused(2);
    w.saturation.refused(2);
    expect(await w.saturated()).toHaveLength(2);
  });
});

describe("health transitions", () => {
  it("two hosts seeing the same death record one event; steady states record nothing; each component is its own", async () => {
    const source = tables();
    const events = createEventLog(source);
    const host = (name: string) =>
      createHealthTransitions({ tables: source, events, logger: captureLogger(), source: name });
    const [a, b] = [host("host-a"), host("host-b")];
    await Promise.all([
      a.observe(JOB_API_COMPONENT, { healthy: true }),
      b.observe(JOB_API_COMPONENT, { healthy: true }),
    ]);
    await Promise.all([
      a.observe(JOB_API_COMPONENT, { healthy: false, reason: "down" }),
      b.observe(JOB_API_COMPONENT, { healthy: false, reason: "down" }),
    ]);
    await a.observe(JOB_API_COMPONENT, { healthy: false, reason: "still down" });
    expect(await events.list({ event_type: "jobapi.unhealthy" })).toHaveLength(1);
    await b.observe(CLUSTER_COMPONENT, { healthy: false, reason: "watch failed" });
    expect(await events.list({ event_type: "cluster.unhealthy" })).toHaveLength(1);
    // Recovered (seen by one host), then down again (seen by the other): a second turn, a second event.
    await a.observe(JOB_API_COMPONENT, { healthy: true });
    await b.observe(JOB_API_COMPONENT, { healthy: false, reason: "down again" });
    expect(await events.list({ event_type: "jobapi.unhealthy" })).toHaveLength(2);
  });

  it("a recording that fails leaves the state as it was, so the next observation records the event", async () => {
    const source = tables();
    const events = createEventLog(source);
    let failing = true;
    const flaky = {
      record: (input: Parameters<typeof events.record>[0]) =>
        failing ? Promise.reject(new Error("storage unavailable")) : events.record(input),
    };
    const logger = captureLogger();
    const health = createHealthTransitions({ tables: source, events: flaky, logger, source: "host" });
    await health.observe(JOB_API_COMPONENT, { healthy: false, reason: "down" });
    expect(logger.entries.map((e) => e.msg)).toContain("health transition not recorded");
    failing = false;
    await health.observe(JOB_API_COMPONENT, { healthy: false, reason: "down" });
    expect(await events.list({ event_type: "jobapi.unhealthy" })).toHaveLength(1);
  });
});
