import type { AccessToken } from "@azure/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { createLogAnalyticsProvider } from "../../shared/console/providers/azure-log-analytics.js";
import { LOG_TEMPLATES } from "../../shared/console/tools/provider-tools.js";
import type { OutboundResponse } from "../../shared/console/coordinator/coordinator.js";
import { type FakeAzureApis, startFakeAzureApis } from "../fakes/azure-apis.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let fake: FakeAzureApis;
let counter = 0;
const MINUTE = 60_000;
const now = Date.now();
const at = (minutesAgo: number) => new Date(now - minutesAgo * MINUTE).toISOString();

beforeAll(async () => {
  [azurite, fake] = await Promise.all([testAzurite(), startFakeAzureApis()]);
});
afterAll(async () => {
  await Promise.all([azurite?.stop(), fake?.close()]);
});

function harness() {
  const credential = {
    getToken: async (): Promise<AccessToken> => ({ token: fake.token, expiresOnTimestamp: Date.now() + 3_600_000 }),
  };
  const logs = createLogAnalyticsProvider({
    workspaceId: fake.workspaceId,
    credential,
    clientOptions: { endpoint: fake.url, tlsOptions: { ca: fake.ca }, retryOptions: { maxRetries: 0 } },
  });
  return consoleHarness(prefixedTables(azurite.connectionString, `lt${++counter}x${Date.now().toString(36)}`), {
    providers: { logs },
  });
}

interface LogData {
  template: string;
  tables: { columns: string[]; rows: unknown[][] }[];
}
async function ask(text: string): Promise<{ reply: OutboundResponse; data: LogData; query: unknown }> {
  const reply = await harness().coordinator.handleTurn(callerWith("Reader"), { text });
  const result = reply.tool_results[0];
  if (result?.status !== "ok") throw new Error(JSON.stringify(result ?? reply.text));
  return {
    reply,
    data: result.data as LogData,
    query: fake.requests.filter((r) => r.path.endsWith("/query")).at(-1)?.body.query,
  };
}

const request = (
  minutesAgo: number,
  operation_Name: string,
  resultCode: string,
  duration: number,
  extra: Record<string, unknown> = {},
) => ({
  timestamp: at(minutesAgo),
  operation_Name,
  resultCode,
  success: Number(resultCode) < 400,
  duration,
  ...extra,
});
const dependency = (minutesAgo: number, target: string, type: string, name: string, duration: number) => ({
  timestamp: at(minutesAgo),
  target,
  type,
  name,
  duration,
  success: true,
});

describe("query_log's server-owned templates against the Log Analytics fake, which runs the query it receives", () => {
  it("C-164 C-165: the failed-request summary groups failures by operation and result code, and its reply claims no cause", async () => {
    // The failed rows carry cause-like text; a summary of counts must not pass it on as a claim.
    const cause = { customDimensions: "root cause: storage account throttled because of a burst" };
    fake.logTables = {
      requests: [
        ...[5, 6, 7].map((m) => request(m, "GET /api/jobs", "500", 120, cause)),
        ...[8, 9].map((m) => request(m, "POST /api/jobs", "429", 15, cause)),
        request(10, "GET /api/jobs", "404", 8, cause),
        ...[11, 12, 13, 14, 15].map((m) => request(m, "GET /api/jobs", "200", 40)),
        // Outside the 24-hour window.
        request(30 * 60, "POST /api/jobs", "500", 90, cause),
      ],
    };
    const { reply, data, query } = await ask("query_log template=failed_requests");
    expect(query).toBe(LOG_TEMPLATES.failed_requests);
    expect(data.tables[0]?.columns).toEqual(["operation_Name", "resultCode", "count_"]);
    expect(data.tables[0]?.rows).toEqual([
      ["GET /api/jobs", "500", 3],
      ["POST /api/jobs", "429", 2],
      ["GET /api/jobs", "404", 1],
    ]);
    const said = `${reply.text}\n${JSON.stringify(data)}`;
    expect(said).not.toMatch(/\b(because|caused by|root cause|due to|the cause)\b|원인|때문/i);
    expect(said).not.toContain("throttled");
  });

  it("C-176: the slowest-trace ranking lists the window's slowest requests, slowest first, at most 20", async () => {
    fake.logTables = {
      requests: [
        ...Array.from({ length: 25 }, (_, n) =>
          request(n + 1, n % 2 ? "GET /api/jobs" : "POST /api/jobs", n % 5 ? "200" : "500", (n + 1) * 10),
        ),
        request(26 * 60, "GET /api/jobs", "200", 99_999),
      ],
    };
    const { data, query } = await ask("query_log template=slowest_traces window=2h");
    expect(query).toBe(LOG_TEMPLATES.slowest_traces);
    expect(data.tables[0]?.columns).toEqual(["timestamp", "operation_Name", "duration", "resultCode"]);
    const durations = data.tables[0]?.rows.map((r) => r[2]);
    expect(durations).toEqual(Array.from({ length: 20 }, (_, n) => 250 - n * 10));
    // The 25th request (250 ms) was 25 minutes ago: its time comes back with it.
    expect(data.tables[0]?.rows[0]?.[0]).toBe(at(25));
  });

  it("C-177: the dependency latency aggregation gives each dependency's average, 95th percentile and call count", async () => {
    fake.logTables = {
      dependencies: [
        ...[10, 20, 30, 40].map((d, n) =>
          dependency(n + 1, "bpstore.blob.core.windows.net", "Azure blob", "GET results", d),
        ),
        ...[100, 300].map((d, n) => dependency(n + 1, "jobapi.internal", "HTTP", "POST /jobs", d)),
      ],
    };
    const { data, query } = await ask("query_log template=dependency_latency window=1h");
    expect(query).toBe(LOG_TEMPLATES.dependency_latency);
    expect(data.tables[0]?.columns).toEqual(["target", "type", "avg_duration", "percentile_duration_95", "count_"]);
    expect(data.tables[0]?.rows).toEqual(
      expect.arrayContaining([
        ["bpstore.blob.core.windows.net", "Azure blob", 25, 40, 4],
        ["jobapi.internal", "HTTP", 200, 300, 2],
      ]),
    );
    expect(data.tables[0]?.rows).toHaveLength(2);
  });

  it("C-178: the slow database dependency calls template lists storage and SQL calls, slowest first, and leaves other dependencies out", async () => {
    fake.logTables = {
      dependencies: [
        dependency(1, "bpstore.table.core.windows.net", "Azure table", "Query jobs", 800),
        dependency(2, "sql-blast", "SQL", "SELECT releases", 500),
        dependency(3, "sql-blast", "SQL", "SELECT jobs", 50),
        dependency(4, "bpstore.blob.core.windows.net", "Azure blob", "GET results", 30),
        dependency(5, "jobapi.internal", "HTTP", "POST /jobs", 5000),
      ],
    };
    const { data, query } = await ask("query_log template=slow_database_calls");
    expect(query).toBe(LOG_TEMPLATES.slow_database_calls);
    expect(data.tables[0]?.columns).toEqual(["timestamp", "target", "name", "duration"]);
    expect(data.tables[0]?.rows.map((r) => [r[2], r[3]])).toEqual([
      ["Query jobs", 800],
      ["SELECT releases", 500],
      ["SELECT jobs", 50],
      ["GET results", 30],
    ]);
  });

  it("the exact error signature reaches the query as a bound literal, never as query text of its own", async () => {
    fake.logTables = {
      exceptions: [
        { timestamp: at(50), problemId: "System.TimeoutException.at.Submit", message: "timeout" },
        { timestamp: at(20), problemId: "System.TimeoutException.at.Submit", message: "timeout" },
        { timestamp: at(10), problemId: "Other", message: "other" },
      ],
      traces: [],
    };
    const { data, query } = await ask(
      "query_log template=error_signature_range signature=System.TimeoutException.at.Submit",
    );
    expect(query).toBe(`let signature = 'System.TimeoutException.at.Submit';\n${LOG_TEMPLATES.error_signature_range}`);
    expect(data.tables[0]?.rows).toEqual([[at(50), at(20), 2]]);
    // Anything that could close the literal is refused before a query is sent.
    const before = fake.requests.length;
    const reply = await harness().coordinator.handleTurn(callerWith("Reader"), {
      text: `query_log template=error_signature_range signature="x' | take 1000"`,
    });
    expect(reply.tool_results[0]).toMatchObject({ status: "error", error: { type: "invalid_arguments" } });
    expect(fake.requests.length).toBe(before);
  });
});
