import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJobApiClient, type JobApiClientOptions } from "../../shared/dashboard/job-api-client.js";
import {
  ConflictError,
  DependencyFailedError,
  DependencyUnavailableError,
  InvalidRequestError,
  NotFoundError,
  QueueFullError,
  ValidationError,
} from "../../shared/errors.js";

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** A job API on loopback that answers each request with the handler the test sets. */
let server: Server;
let baseUrl: string;
let handler: Handler;
const received: { method: string; url: string; headers: IncomingMessage["headers"] }[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    received.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers });
    handler(request, response);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
});

function answer(status: number, body: unknown, headers: Record<string, string> = {}): Handler {
  return (_request, response) => {
    response.writeHead(status, { "Content-Type": "application/json", ...headers });
    response.end(typeof body === "string" ? body : JSON.stringify(body));
  };
}

function client(options: Partial<JobApiClientOptions> = {}) {
  return createJobApiClient({ baseUrl, token: async () => "bpt_test-token", timeoutMs: 5000, ...options });
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof Error)) throw new Error("expected the call to fail");
  return error;
}

describe("job-API client: answers", () => {
  it("submits with the configured token (read per call, never the user's token) and tells a replay from a new job", async () => {
    let token = "bpt_first";
    const api = client({ token: async () => token });
    handler = answer(202, { job_id: "abcdefghijkl", status: "queued" });
    expect(await api.submit({ program: "blastn", idempotency_key: "dashboard-x" })).toEqual({
      job_id: "abcdefghijkl",
      status: "queued",
      replayed: false,
    });
    token = "bpt_second";
    handler = answer(200, { job_id: "abcdefghijkl", status: "running" });
    expect(await api.submit({ program: "blastn", idempotency_key: "dashboard-x" })).toEqual({
      job_id: "abcdefghijkl",
      status: "running",
      replayed: true,
    });
    const [first, second] = received.slice(-2);
    expect(first).toMatchObject({
      method: "POST",
      url: "/v1/jobs",
      headers: { "x-svc-api-token": "bpt_first", "content-type": "application/json" },
    });
    expect(second?.headers["x-svc-api-token"]).toBe("bpt_second");
    expect(first?.headers.authorization).toBeUndefined();
  });

  it("reads a status and a cancel's resulting status", async () => {
    handler = answer(200, {
      job_id: "abcdefghijkl",
      status: "running",
      error: "",
      queue_position: null,
      kubernetes: { summary: { total: 2, succeeded: 1, failed: 0, active: 1 } },
    });
    expect(await client().getStatus("abcdefghijkl")).toMatchObject({
      status: "running",
      kubernetes: { summary: { active: 1 } },
    });
    expect(received.at(-1)?.url).toBe("/v1/jobs/abcdefghijkl/status");
    handler = answer(200, { job_id: "abcdefghijkl", status: "completed" });
    expect(await client().cancel("abcdefghijkl")).toBe("completed");
    expect(received.at(-1)).toMatchObject({ method: "POST", url: "/v1/jobs/abcdefghijkl/cancel" });
  });

  it("streams results through with their content type and disposition", async () => {
    handler = (_request, response) => {
      response.writeHead(200, {
        "Content-Type": "text/tab-separated-values",
        "Content-Disposition": 'attachment; filename="results.tsv"',
      });
      response.write("q1\ts1\t");
      response.end("99.5\n");
    };
    const results = await client().openResults("abcdefghijkl", "tabular");
    expect(received.at(-1)?.url).toBe("/v1/jobs/abcdefghijkl/results?content=tabular");
    expect(results.contentType).toBe("text/tab-separated-values");
    expect(results.contentDisposition).toBe('attachment; filename="results.tsv"');
    expect(await new Response(results.body).text()).toBe("q1\ts1\t99.5\n");
  });

  it("issue 23: asks for result pages under /results/queries and passes a 404 or 400 on with its detail", async () => {
    handler = answer(200, { total: 3, queries: [] });
    expect(await client().resultPage("abcdefghijkl", "", { offset: 2, limit: 50 })).toEqual({ total: 3, queries: [] });
    expect(received.at(-1)?.url).toBe("/v1/jobs/abcdefghijkl/results/queries?offset=2&limit=50");
    await client().resultPage("abcdefghijkl", "/7/hits/3");
    expect(received.at(-1)?.url).toBe("/v1/jobs/abcdefghijkl/results/queries/7/hits/3");
    handler = answer(404, { detail: "query 41 does not exist: the result has 40 queries", request_id: "r" });
    const missing = await failure(client().resultPage("abcdefghijkl", "/41/hits"));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.message).toBe("query 41 does not exist: the result has 40 queries");
    handler = answer(400, { detail: "invalid query parameter 'limit': too big", request_id: "r" });
    expect(await failure(client().resultPage("abcdefghijkl", "", { limit: 501 }))).toBeInstanceOf(InvalidRequestError);
  });
});

describe("job-API client: one error vocabulary (shared/errors.ts)", () => {
  it("makes 429 a QueueFullError and 502/503/504 a DependencyUnavailableError, each with the Retry-After to honour", async () => {
    handler = answer(429, { detail: "queue is full" }, { "Retry-After": "17" });
    const full = await failure(client().submit({}));
    expect(full).toBeInstanceOf(QueueFullError);
    expect((full as QueueFullError).retryAfterSeconds).toBe(17);
    expect(full.message).toBe("job API answered 429: queue is full");
    for (const status of [502, 503, 504]) {
      handler = answer(status, { detail: "restarting" });
      const unavailable = await failure(client().getStatus("abcdefghijkl"));
      expect(unavailable).toBeInstanceOf(DependencyUnavailableError);
      // No Retry-After: the default wait.
      expect((unavailable as DependencyUnavailableError).retryAfterSeconds).toBe(5);
    }
  });

  it("gives the job API's refusals their own classes, with its words", async () => {
    const issues = [
      {
        loc: ["body", "blast_options", "evalue"],
        msg: "evalue must be a number greater than 0 and at most 1000",
        type: "value_error",
      },
    ];
    handler = answer(422, { detail: issues, request_id: "r" });
    const invalid = await failure(client().submit({}));
    expect(invalid).toBeInstanceOf(ValidationError);
    expect((invalid as ValidationError).issues).toEqual(issues);
    const cases: [number, new (...args: never[]) => Error][] = [
      [400, InvalidRequestError],
      [404, NotFoundError],
      [409, ConflictError],
    ];
    for (const [status, type] of cases) {
      handler = answer(status, { detail: `refused with ${status}`, request_id: "r" });
      const refused = await failure(client().openResults("abcdefghijkl", "xml"));
      expect(refused).toBeInstanceOf(type);
      expect(refused.message).toBe(`refused with ${status}`);
    }
  });

  it("makes a refused token, a server error and a body that is not JSON a DependencyFailedError", async () => {
    for (const status of [401, 403, 500]) {
      handler = answer(status, { detail: "no" });
      const failed = await failure(client().cancel("abcdefghijkl"));
      expect(failed).toBeInstanceOf(DependencyFailedError);
      expect(failed.message).toBe(`job API answered ${status}: no`);
    }
    handler = answer(202, "<html>proxy page</html>");
    expect(await failure(client().submit({}))).toBeInstanceOf(DependencyFailedError);
  });

  it("makes an unreachable, unconfigured or slow job API, and an unreadable token, a DependencyUnavailableError", async () => {
    const closed = createServer();
    closed.listen(0, "127.0.0.1");
    await once(closed, "listening");
    const closedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    closed.close();
    await once(closed, "close");
    const unreachable = await failure(client({ baseUrl: closedUrl }).getStatus("abcdefghijkl"));
    expect(unreachable).toBeInstanceOf(DependencyUnavailableError);
    expect(unreachable.message).toMatch(/^job API unreachable: /);

    expect(await failure(client({ baseUrl: undefined }).submit({}))).toMatchObject({
      name: "DependencyUnavailableError",
      message: "the job API is not configured (JOBAPI_URL)",
    });

    const tokenless = await failure(
      client({ token: async () => Promise.reject(new Error("EACCES: secrets folder")) }).submit({}),
    );
    expect(tokenless).toMatchObject({
      name: "DependencyUnavailableError",
      message: "the job API token could not be read",
    });
    const missing = new DependencyUnavailableError("no job API token is configured");
    expect(await failure(client({ token: async () => Promise.reject(missing) }).submit({}))).toBe(missing);

    handler = () => {}; // never answers
    const slow = await failure(client({ timeoutMs: 300 }).getStatus("abcdefghijkl"));
    expect(slow).toBeInstanceOf(DependencyUnavailableError);
    expect(slow.message).toBe("job API unreachable: no answer within 300 ms");
  });

  it("rejects with the caller's reason when the caller aborts, not as an unavailable job API", async () => {
    const controller = new AbortController();
    const arrived = new Promise<void>((resolve) => {
      handler = () => resolve(); // holds the request open
    });
    const download = client().openResults("abcdefghijkl", "xml", { abortSignal: controller.signal });
    await arrived;
    const reason = new Error("the browser went away");
    controller.abort(reason);
    expect(await failure(download)).toBe(reason);
  });
});

describe("job-API client: result bodies (issue 23, defect 1)", () => {
  /** Reads `body` to its end; rejects when the stream errors. */
  async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
    const parts: Buffer[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return Buffer.concat(parts).toString();
      parts.push(Buffer.from(value));
    }
  }

  it("B-008 a download that lasts longer than the call timeout is not cut: the timeout covers the answer's headers only", async () => {
    let sendRest: () => void = () => {};
    handler = (_request, response) => {
      response.writeHead(200, { "Content-Type": "application/xml" });
      response.write("<BlastOutput>");
      sendRest = () => response.end("</BlastOutput>");
    };
    const results = await client({ timeoutMs: 1000 }).openResults("abcdefghijkl", "xml");
    const reader = results.body.getReader();
    expect(Buffer.from((await reader.read()).value ?? []).toString()).toBe("<BlastOutput>");
    // The consumer takes longer than the call timeout before it reads on (a slow browser, a large
    // file): the download must outlive that timeout. The wait is the condition under test.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const rest = readAll(reader);
    sendRest();
    expect(await rest).toBe("</BlastOutput>");
  });

  it("B-008 a body that stalls longer than the idle timeout fails as a DependencyUnavailableError and closes the job API's connection", async () => {
    const closed = new Promise<void>((resolve) => {
      handler = (request, response) => {
        response.writeHead(200, { "Content-Type": "application/xml" });
        response.write("<BlastOutput>"); // and nothing more
        request.socket.once("close", () => resolve());
      };
    });
    const results = await client({ timeoutMs: 5000, idleTimeoutMs: 200 }).openResults("abcdefghijkl", "xml");
    const error = await failure(readAll(results.body.getReader()));
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect(error.message).toBe("the job API sent no data for 200 ms");
    await closed;
  });

  it("B-008 a body whose connection breaks mid-way is an error, never a short body that ends cleanly", async () => {
    handler = (_request, response) => {
      response.writeHead(200, { "Content-Type": "application/xml" });
      response.write("<BlastOutput><Iteration>", () => response.socket?.destroy());
    };
    const results = await client().openResults("abcdefghijkl", "xml");
    const error = await failure(readAll(results.body.getReader()));
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect(error.message).toMatch(/^the job API's answer broke off: /);
  });
});
