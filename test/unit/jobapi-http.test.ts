import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { createRequestListener, type Route } from "../../jobapi/http.js";
import { createLogger } from "../../shared/logging/logger.js";

/** The job API's transport on a real socket, with the given routes; returns its base URL and log. */
async function serve(routes: Route[]) {
  const logged: string[] = [];
  const listener = createRequestListener({
    routes,
    logger: createLogger({ level: "info", write: (line) => logged.push(line) }),
    authorize: async (token) => token === "good",
    bodyLimitBytes: 1024,
  });
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, logged };
}
const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

describe("job API transport: failures the routes did not handle", () => {
  it("B-229 B-227 answers an unexpected error with 500, the exact text 'internal server error' and the response's request id, and logs the cause", async () => {
    const { base, logged } = await serve([
      {
        method: "GET",
        path: "/v1/boom",
        handler: async () => {
          throw new Error("ENOENT /var/lib/jobapi/secrets/api-token");
        },
      },
    ]);
    const res = await fetch(`${base}/v1/boom`, { headers: { "X-SVC-API-Token": "good" } });
    expect(res.status).toBe(500);
    const requestId = res.headers.get("x-request-id");
    expect(requestId).toBeTruthy();
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ detail: "internal server error", request_id: requestId });
    // The cause stays in the log, under the same request id, and never reaches the caller.
    expect(text).not.toContain("secrets");
    const line = logged.map((l) => JSON.parse(l)).find((l) => l.level === "error");
    expect(line).toMatchObject({ request_id: requestId });
    expect(JSON.stringify(line)).toContain("ENOENT");
  });

  it("B-229 keeps an inbound X-Request-Id on the 500, so the caller's id finds the log line", async () => {
    const { base } = await serve([
      {
        method: "POST",
        path: "/v1/boom",
        handler: async () => {
          throw new TypeError("cannot read properties of undefined");
        },
      },
    ]);
    const res = await fetch(`${base}/v1/boom`, { method: "POST", headers: { "X-SVC-API-Token": "good", "X-Request-Id": "lims-run-0042" } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ detail: "internal server error", request_id: "lims-run-0042" });
  });

  it("B-227 checks the token before the route runs: a failing route is never reached without it", async () => {
    let reached = false;
    const { base } = await serve([
      {
        method: "GET",
        path: "/v1/boom",
        handler: async () => {
          reached = true;
          throw new Error("unreachable");
        },
      },
    ]);
    const res = await fetch(`${base}/v1/boom`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ detail: "missing or invalid X-SVC-API-Token", request_id: expect.any(String) });
    expect(reached).toBe(false);
  });
});
