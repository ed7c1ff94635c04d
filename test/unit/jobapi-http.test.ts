import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { Readable } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createJobApiRoutes, type JobApiDeps } from "../../jobapi/app.js";
import { createJobApiTransport, type JobApiRoute } from "../../jobapi/http.js";
import { buildOpenApiDocument } from "../../jobapi/openapi.js";
import { createDocsRoutes } from "../../jobapi/routes/docs-routes.js";
import { jsonResult } from "../../shared/http/envelope.js";
import { createLogger } from "../../shared/logging/logger.js";

const LIMIT = 1024;

/** The job API's transport with the given routes (token "good"), and the log lines it wrote. */
function transport(routes: JobApiRoute[]) {
  const logged: string[] = [];
  const app = createJobApiTransport({
    routes,
    logger: createLogger({ level: "info", write: (line) => logged.push(line) }),
    authorize: async (token) => token === "good",
    bodyLimitBytes: LIMIT,
  });
  return { app, logged, entries: () => logged.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const servers: http.Server[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(
    servers.splice(0).map((server) => {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      return closed;
    }),
  );
});

/** The app on a real socket through @hono/node-server, as the job API process serves it. */
async function listen(app: ReturnType<typeof transport>["app"]): Promise<string> {
  const server = http.createServer(getRequestListener(app.fetch));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const boom = (method: JobApiRoute["method"], error: Error): JobApiRoute => ({
  method,
  path: "/v1/boom",
  handler: async () => {
    throw error;
  },
});

/** Echoes the request body's length; reads it through the transport's limited reader. */
const echo: JobApiRoute = {
  method: "POST",
  path: "/v1/echo",
  handler: async (req, { requestId }) => jsonResult(200, { length: (await req.text()).length }, requestId),
};

describe("job API transport: failures the routes did not handle", () => {
  it("B-229 B-227 answers an unexpected error with 500, the exact text 'internal server error' and the response's request id, and logs the cause", async () => {
    const { app, entries } = transport([boom("GET", new Error("ENOENT /var/lib/jobapi/secrets/api-token"))]);
    const res = await app.request("/v1/boom", { headers: { "X-SVC-API-Token": "good" } });
    expect(res.status).toBe(500);
    const requestId = res.headers.get("x-request-id");
    expect(requestId).toBeTruthy();
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ detail: "internal server error", request_id: requestId });
    // The cause stays in the log, under the same request id, and never reaches the caller.
    expect(text).not.toContain("secrets");
    const line = entries().find((l) => l.level === "error");
    expect(line).toMatchObject({ request_id: requestId });
    expect(JSON.stringify(line)).toContain("ENOENT");
  });

  it("B-229 keeps an inbound X-Request-Id on the 500, so the caller's id finds the log line", async () => {
    const { app } = transport([boom("POST", new TypeError("cannot read properties of undefined"))]);
    const res = await app.request("/v1/boom", {
      method: "POST",
      headers: { "X-SVC-API-Token": "good", "X-Request-Id": "lims-run-0042" },
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ detail: "internal server error", request_id: "lims-run-0042" });
  });

  it("B-227 checks the token before the route runs: a failing route is never reached without it", async () => {
    let reached = false;
    const { app } = transport([
      {
        method: "GET",
        path: "/v1/boom",
        handler: async () => {
          reached = true;
          throw new Error("unreachable");
        },
      },
    ]);
    for (const headers of [{}, { "X-SVC-API-Token": "goo" }, { "X-SVC-API-Token": "goodx" }] as Record<
      string,
      string
    >[]) {
      const res = await app.request("/v1/boom", { headers });
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({
        detail: "missing or invalid X-SVC-API-Token",
        request_id: res.headers.get("x-request-id"),
      });
    }
    expect(reached).toBe(false);
  });
});

describe("job API transport: routing answers in the envelope", () => {
  const ok: JobApiRoute = {
    method: "GET",
    path: "/v1/jobs/{job_id}/status",
    handler: async (req, { requestId }) => jsonResult(200, { id: req.params.job_id }, requestId),
  };

  it("B-233 B-227 answers 404 for an unknown path, 405 with Allow for a known path's other method, 400 for an empty segment", async () => {
    const { app } = transport([ok]);
    const unknown = await app.request("/v1/nope", { headers: { "X-SVC-API-Token": "good" } });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({ detail: "not found", request_id: unknown.headers.get("x-request-id") });
    const wrongMethod = await app.request("/v1/jobs/abc/status", {
      method: "DELETE",
      headers: { "X-SVC-API-Token": "good" },
    });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("GET");
    expect(await wrongMethod.json()).toMatchObject({ detail: "method not allowed" });
    // HEAD is not served (a GET handler would open a result stream nobody reads).
    const head = await app.request("/v1/jobs/abc/status", { method: "HEAD", headers: { "X-SVC-API-Token": "good" } });
    expect(head.status).toBe(405);
    expect(head.headers.get("allow")).toBe("GET");
    for (const empty of ["/v1/jobs//status", "/v1/jobs/abc/status/"]) {
      const res = await app.request(empty, { headers: { "X-SVC-API-Token": "good" } });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ detail: "missing path parameter (empty path segment)" });
    }
  });

  it("passes percent-decoded path parameters and sets X-Request-Id on success", async () => {
    const { app } = transport([ok]);
    const res = await app.request("/v1/jobs/a%20b/status", { headers: { "X-SVC-API-Token": "good" } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id: "a b" });
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("serves only the listed schema UI files: inherited object keys are 404, not a file read", async () => {
    const { app } = transport(createDocsRoutes({ openapi: () => "{}" }));
    for (const name of ["constructor", "__proto__", "toString", "..%2Fpackage.json", "index.html"]) {
      const res = await app.request(`/docs/${name}`);
      expect(res.status, name).toBe(404);
    }
    const css = await app.request("/docs/swagger-ui.css");
    expect(css.status).toBe(200);
    expect(css.headers.get("content-type")).toBe("text/css");
  });
});

describe("job API transport: browser hardening", () => {
  const ok: JobApiRoute = {
    method: "GET",
    path: "/v1/jobs/{job_id}/status",
    handler: async (req, { requestId }) => jsonResult(200, { id: req.params.job_id }, requestId),
  };
  const health: JobApiRoute = {
    method: "GET",
    path: "/v1/health",
    public: true,
    handler: async (_req, { requestId }) => jsonResult(200, { status: "ok" }, requestId),
  };

  it("says X-Content-Type-Options: nosniff on JSON success, 401, 404, 405 and mapped errors", async () => {
    const { app } = transport([ok, boom("POST", new Error("x"))]);
    const responses = [
      await app.request("/v1/jobs/a/status", { headers: { "X-SVC-API-Token": "good" } }),
      await app.request("/v1/jobs/a/status"),
      await app.request("/v1/nothing-here"),
      await app.request("/v1/jobs/a/status", { method: "DELETE", headers: { "X-SVC-API-Token": "good" } }),
      await app.request("/v1/boom", { method: "POST", headers: { "X-SVC-API-Token": "good" } }),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 401, 404, 405, 500]);
    for (const res of responses) expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  });

  it("serves /docs under a CSP without 'unsafe-inline' that forbids framing, and its start script as a file", async () => {
    const { app } = transport(createDocsRoutes({ openapi: () => "{}" }));
    const page = await app.request("/docs");
    expect(page.status).toBe(200);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).not.toContain("unsafe-eval");
    const html = await page.text();
    // Every script is a file of this origin: no inline script or style the policy would have to allow.
    expect(html).not.toMatch(/<script>|<script [^>]*>[^<]|<style|style=/);
    expect(html).toContain('<script src="/docs/init.js"></script>');
    const init = await app.request("/docs/init.js");
    expect(init.status).toBe(200);
    expect(init.headers.get("content-type")).toBe("application/javascript");
  });

  it("with loopbackHostOnly answers 421 to a Host naming anything but loopback (DNS rebinding), on a real socket", async () => {
    const app = createJobApiTransport({
      routes: [health],
      logger: createLogger({ level: "error", write: () => undefined }),
      authorize: async () => false,
      bodyLimitBytes: LIMIT,
      loopbackHostOnly: true,
    });
    const base = await listen(app);
    const port = new URL(base).port;
    const status = (host: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request(`${base}/v1/health`, { headers: { host } }, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => {
            body += c.toString();
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        req.end();
      });
    const rebound = await status(`rebind.attacker.example:${port}`);
    expect(rebound.status).toBe(421);
    expect(JSON.parse(rebound.body)).toMatchObject({ detail: "host header must name a loopback address" });
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
      expect((await status(host)).status, host).toBe(200);
    }
  });
});

describe("job API transport: request bodies", () => {
  it("reads a body within the limit and answers 413 over it, declared by Content-Length", async () => {
    const { app } = transport([echo]);
    const within = await app.request("/v1/echo", {
      method: "POST",
      headers: { "X-SVC-API-Token": "good" },
      body: "x".repeat(LIMIT),
    });
    expect(await within.json()).toEqual({ length: LIMIT });
    const base = await listen(app);
    const over = await fetch(`${base}/v1/echo`, {
      method: "POST",
      headers: { "X-SVC-API-Token": "good" },
      body: "x".repeat(LIMIT + 1),
    });
    expect(over.status).toBe(413);
    expect(await over.json()).toMatchObject({
      detail: `request body exceeds ${LIMIT} bytes`,
      request_id: over.headers.get("x-request-id"),
    });
  });

  it("counts a chunked body while reading it: 413 once it passes the limit, and the server keeps serving", async () => {
    const { app } = transport([echo]);
    const base = await listen(app);
    const post = (chunks: string[]) =>
      new Promise<{ status: number; body: string; chunked: boolean }>((resolve, reject) => {
        const req = http.request(
          `${base}/v1/echo`,
          { method: "POST", headers: { "X-SVC-API-Token": "good" } },
          (res) => {
            let body = "";
            res.on("data", (c: Buffer) => {
              body += c.toString();
            });
            res.on("end", () =>
              resolve({
                status: res.statusCode ?? 0,
                body,
                chunked: req.getHeader("transfer-encoding") === "chunked" || !req.getHeader("content-length"),
              }),
            );
          },
        );
        req.on("error", reject);
        for (const chunk of chunks) req.write(chunk);
        req.end();
      });
    const over = await post(Array.from({ length: 8 }, () => "y".repeat(256)));
    expect(over.chunked).toBe(true);
    expect(over.status).toBe(413);
    expect(JSON.parse(over.body)).toMatchObject({ detail: `request body exceeds ${LIMIT} bytes` });
    const within = await post(["a".repeat(500), "b".repeat(500)]);
    expect(within.status).toBe(200);
    expect(JSON.parse(within.body)).toEqual({ length: 1000 });
  });
});

describe("job API transport: streamed responses", () => {
  const streamRoute = (source: () => Readable): JobApiRoute => ({
    method: "GET",
    path: "/v1/stream",
    handler: async (_req, { requestId }) => ({
      status: 200,
      headers: { "Content-Type": "application/octet-stream", "X-Request-Id": requestId },
      body: source(),
    }),
  });

  it("streams a Node stream's bytes in order", async () => {
    const chunks = Array.from({ length: 50 }, (_, i) => Buffer.alloc(64 * 1024, i));
    const { app } = transport([streamRoute(() => Readable.from(chunks))]);
    const res = await app.request("/v1/stream", { headers: { "X-SVC-API-Token": "good" } });
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(Buffer.concat(chunks))).toBe(true);
    const base = await listen(app);
    const overSocket = await fetch(`${base}/v1/stream`, { headers: { "X-SVC-API-Token": "good" } });
    expect(Buffer.from(await overSocket.arrayBuffer()).equals(Buffer.concat(chunks))).toBe(true);
  });

  it("cuts the connection when the source fails midway (the client never sees a whole-looking body) and logs the cause itself", async () => {
    const consoleError = vi.spyOn(console, "error");
    const { app, entries } = transport([
      streamRoute(() =>
        Readable.from(
          (async function* () {
            yield Buffer.alloc(1024, 1);
            throw new Error("blob download failed: http://127.0.0.1:10000/devstoreaccount1/x");
          })(),
        ),
      ),
    ]);
    const base = await listen(app);
    const res = await fetch(`${base}/v1/stream`, {
      headers: { "X-SVC-API-Token": "good", "X-Request-Id": "stream-fails-1" },
    });
    expect(res.status).toBe(200);
    await expect(res.arrayBuffer()).rejects.toThrow();
    const failed = await vi.waitFor(() => {
      const line = entries().find((l) => l.msg === "response stream failed");
      if (!line) throw new Error("not logged yet");
      return line;
    });
    expect(failed).toMatchObject({ level: "error", request_id: "stream-fails-1" });
    expect(JSON.stringify(failed)).toContain("blob download failed");
    expect(consoleError).not.toHaveBeenCalled();
  });

  it("stops reading the source when the client hangs up", async () => {
    let destroyed!: () => void;
    const sourceDestroyed = new Promise<void>((resolve) => {
      destroyed = resolve;
    });
    let produced = 0;
    const endless = () =>
      new Readable({
        read() {
          produced++;
          this.push(Buffer.alloc(64 * 1024));
        },
        destroy(error, callback) {
          destroyed();
          callback(error);
        },
      });
    const { app, entries } = transport([streamRoute(endless)]);
    const base = await listen(app);
    const controller = new AbortController();
    const res = await fetch(`${base}/v1/stream`, { headers: { "X-SVC-API-Token": "good" }, signal: controller.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    controller.abort();
    await sourceDestroyed;
    expect(produced).toBeGreaterThan(0);
    // A client hanging up is not a server failure.
    const left = await vi.waitFor(() => {
      const line = entries().find((l) => l.msg === "client went away");
      if (!line) throw new Error("not logged yet");
      return line;
    });
    expect(left.level).toBe("info");
    expect(entries().filter((l) => l.level === "error")).toEqual([]);
  });
});

describe("job API OpenAPI document", () => {
  it("B-256 B-257 is generated from the route definitions and equals the committed copy the linters check", () => {
    // The route factories only describe routes here; none of their dependencies is called.
    const routes = createJobApiRoutes({ config: { bodyLimitBytes: LIMIT } } as unknown as JobApiDeps);
    const fixture = path.resolve(import.meta.dirname, "../fixtures/jobapi-openapi.json");
    expect(buildOpenApiDocument(routes)).toEqual(JSON.parse(readFileSync(fixture, "utf8")));
  });

  it("B-224 the job API takes no callback: a submit naming one is refused (422, extra_forbidden) and the description declares no callbacks or webhooks", async () => {
    // The real route definitions; a refused body never reaches the service, so none is needed.
    const routes = createJobApiRoutes({ config: { bodyLimitBytes: LIMIT } } as unknown as JobApiDeps);
    const { app } = transport(routes);
    const body = { program: "blastn", db: "demo", query_fasta: ">q\nACGT" };
    for (const [url, field] of [
      ["/v1/jobs", "callback_url"],
      ["/v1/jobs", "webhook_url"],
      ["/api/v1/facade/submit", "callback_url"],
      ["/api/v1/facade/submit", "notify_url"],
    ] as const) {
      const res = await app.request(url, {
        method: "POST",
        headers: { "X-SVC-API-Token": "good", "Content-Type": "application/json" },
        body: JSON.stringify({ ...body, [field]: "https://client.example/hook" }),
      });
      expect(res.status, `${url} ${field}`).toBe(422);
      expect(((await res.json()) as { detail: unknown }).detail).toEqual([
        { loc: ["body", field], msg: `unknown field '${field}'`, type: "extra_forbidden" },
      ]);
    }
    // Progress is read by polling: the status routes are the only way the description offers.
    const document = buildOpenApiDocument(routes) as { webhooks?: unknown; paths: Record<string, object> };
    expect(document.webhooks).toBeUndefined();
    expect(JSON.stringify(document.paths)).not.toMatch(/"callbacks"/);
    expect(Object.keys(document.paths)).toEqual(
      expect.arrayContaining(["/v1/jobs/{job_id}/status", "/api/v1/facade/jobs/{job_id}"]),
    );
  });
});
