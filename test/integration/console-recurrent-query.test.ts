import { describe, expect, it } from "vitest";
import { loadConsoleConfig } from "../../shared/console/console-config.js";
import { argumentShape, RECURRENT_QUERY_EVENT } from "../../shared/console/recurrent-query.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

/**
 * `console.recurrent_query` (spec §6 item 2, §8) through the coordinator over real Azurite: real
 * tool calls by distinct principals, counted by the shape of their arguments, published once into
 * the event stream.
 */
const { tables } = azuriteTables("rq");

function console_(recurrentQuery = loadConsoleConfig({}).recurrentQuery, now?: () => Date) {
  const harness = consoleHarness(tables(), { recurrentQuery, ...(now ? { now } : {}) });
  const ask = (oid: string, text: string) => harness.coordinator.handleTurn(callerWith("Reader", oid), { text });
  const published = () => harness.events.list({ event_type: RECURRENT_QUERY_EVENT });
  return { ...harness, ask, published };
}

describe("console.recurrent_query", () => {
  it("C-449 C-451 the same argument shape from 5 distinct principals (the default N, within a week) publishes one event; a 6th adds none", async () => {
    expect(loadConsoleConfig({}).recurrentQuery).toEqual({ threshold: 5, windowSeconds: 7 * 86_400 });
    const c = console_();
    // Same tool and argument names and kinds; the values differ from principal to principal.
    for (const i of [1, 2, 3, 4]) {
      const reply = await c.ask(`oid-principal-${i}`, `explore_catalog query=R-JOB-00${i}`);
      expect(reply.kind).toBe("tool_result");
    }
    expect(await c.published()).toEqual([]);
    await c.ask("oid-principal-5", "explore_catalog query=job.failed");
    const [event, ...more] = await c.published();
    expect(more).toEqual([]);
    const shape = argumentShape("explore_catalog", { query: "anything" });
    expect(event).toMatchObject({
      source: "console.coordinator",
      event_type: RECURRENT_QUERY_EVENT,
      mode: "shadow",
      correlation_id: shape.id,
      resource_ref: "console_tool/explore_catalog",
      payload: {
        tool: "explore_catalog",
        shape: "explore_catalog{query:string}",
        argument_kinds: { query: "string" },
        distinct_principals: 5,
        threshold: 5,
        window_seconds: 604_800,
      },
    });
    // Values never reach the event: only names and kinds.
    expect(JSON.stringify(event)).not.toContain("R-JOB-001");
    expect(JSON.stringify(event)).not.toContain("oid-principal");

    await c.ask("oid-principal-6", "explore_catalog query=R-DB-001");
    expect(await c.published()).toHaveLength(1);
  });

  it("C-450 five calls of one shape by one principal count once: no event; shapes differ by argument names, and invalid calls do not count", async () => {
    const c = console_();
    for (const i of [1, 2, 3, 4, 5])
      expect((await c.ask("oid-same", `explore_catalog query=R-JOB-00${i}`)).kind).toBe("tool_result");
    expect(await c.published()).toEqual([]);
    // Same tool, different argument names: two shapes (4 + 1 principals), neither at 5.
    for (const oid of ["oid-a", "oid-b", "oid-c", "oid-d"])
      expect((await c.ask(oid, "query_audit limit=3")).kind).toBe("tool_result");
    expect((await c.ask("oid-e", "query_audit actor=oid-a")).kind).toBe("tool_result");
    expect(await c.published()).toEqual([]);
    // Calls whose arguments do not validate are not a query shape anyone reuses: not counted.
    for (const oid of ["oid-f", "oid-g", "oid-h", "oid-i", "oid-j"])
      expect((await c.ask(oid, "query_audit limit=many")).tool_results[0]?.status).toBe("error");
    expect(await c.published()).toEqual([]);
  });

  it("C-451 N is configurable: SVC_RECURRENT_QUERY_THRESHOLD=3 publishes at the third distinct principal", async () => {
    const config = loadConsoleConfig({
      SVC_RECURRENT_QUERY_THRESHOLD: "3",
      SVC_RECURRENT_QUERY_WINDOW_SECONDS: "3600",
    });
    expect(config.recurrentQuery).toEqual({ threshold: 3, windowSeconds: 3600 });
    const c = console_(config.recurrentQuery);
    await c.ask("oid-x", "explore_catalog query=a");
    await c.ask("oid-y", "explore_catalog query=b");
    expect(await c.published()).toEqual([]);
    await c.ask("oid-z", "explore_catalog query=c");
    expect(await c.published()).toHaveLength(1);
  });

  it("C-449 the window rolls: principals whose calls are older than the window no longer count", async () => {
    let clock = new Date("2026-03-02T10:00:00.000Z");
    const c = console_({ threshold: 3, windowSeconds: 3600 }, () => clock);
    await c.ask("oid-old-1", "explore_catalog query=a");
    await c.ask("oid-old-2", "explore_catalog query=b");
    clock = new Date(clock.getTime() + 3601_000);
    await c.ask("oid-new-1", "explore_catalog query=c");
    await c.ask("oid-new-2", "explore_catalog query=d");
    expect(await c.published()).toEqual([]);
    await c.ask("oid-old-1", "explore_catalog query=e");
    expect(await c.published()).toHaveLength(1);
  });
});
