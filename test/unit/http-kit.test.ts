import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { QueueFullError, NotFoundError, ValidationError } from "../../shared/errors.js";
import { createHttpHandler } from "../../shared/http/handler.js";
import { jsonResult } from "../../shared/http/envelope.js";
import { etagOf, ifNoneMatchHits, longPoll } from "../../shared/http/long-poll.js";
import { resolveRequestId } from "../../shared/http/request-id.js";
import { type HttpRequestLike, parseJsonBody, parsePath, parseQuery } from "../../shared/http/validation.js";
import { createLogger } from "../../shared/logging/logger.js";

/**
 * Resolves once the code under test arms a timer of at least `minDelayMs`: the signal that a long
 * poll holds the request (its re-check timer is set). The spy is removed at that moment.
 */
function longTimerArmed(minDelayMs: number): Promise<void> {
  const original = globalThis.setTimeout;
  return new Promise((resolve) => {
    const spy = vi.spyOn(globalThis, "setTimeout").mockImplementation(((handler: () => void, delayMs?: number) => {
      const handle = original(handler, delayMs);
      if ((delayMs ?? 0) >= minDelayMs) {
        spy.mockRestore();
        resolve();
      }
      return handle;
    }) as typeof setTimeout);
  });
}

function request(
  init: { url?: string; body?: string; headers?: Record<string, string>; params?: Record<string, string> } = {},
): HttpRequestLike {
  const url = init.url ?? "http://localhost/api/x";
  return {
    method: "POST",
    url,
    headers: new Headers(init.headers ?? {}),
    query: new URL(url).searchParams,
    params: init.params ?? {},
    text: async () => init.body ?? "",
  };
}

function capture() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger({ level: "debug", write: (l) => lines.push(JSON.parse(l)) }) };
}

const bodySchema = z.strictObject({ name: z.string().min(2), count: z.number().int().max(10) });

describe("HTTP kit", () => {
  it("keeps a well-formed inbound X-Request-Id and replaces a malformed one", () => {
    expect(resolveRequestId("abc-123-def-456")).toBe("abc-123-def-456");
    expect(resolveRequestId("bad id with spaces")).toMatch(/^[0-9a-f-]{36}$/);
    expect(resolveRequestId("x".repeat(300))).toMatch(/^[0-9a-f-]{36}$/);
    expect(resolveRequestId(undefined)).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("B-125 B-238 lists each failing field as loc/msg/type for a 422, naming unknown keys", async () => {
    const req = request({
      body: JSON.stringify({ name: "a", count: "x", extra: 1 }),
      headers: { "content-type": "application/json" },
    });
    const error = await parseJsonBody(req, bodySchema).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    const issues = (error as ValidationError).issues;
    expect(issues).toContainEqual({ loc: ["body", "extra"], msg: "unknown field 'extra'", type: "extra_forbidden" });
    expect(issues).toContainEqual(expect.objectContaining({ loc: ["body", "name"], type: "too_short" }));
    expect(issues).toContainEqual(expect.objectContaining({ loc: ["body", "count"], type: "number_type" }));
  });

  it("marks a missing field as missing", async () => {
    const req = request({ body: JSON.stringify({ name: "ab" }), headers: { "content-type": "application/json" } });
    const error = (await parseJsonBody(req, bodySchema).catch((e: unknown) => e)) as ValidationError;
    expect(error.issues).toEqual([{ loc: ["body", "count"], msg: "field required", type: "missing" }]);
  });

  it("B-231 answers 400 for malformed JSON, a wrong content type and malformed parameters; 413 for a large body", async () => {
    const handler = createHttpHandler(
      async (req) => jsonResult(200, await parseJsonBody(req, bodySchema, 64), "x"),
      createLogger({ level: "error", write: () => undefined }),
    );
    const malformed = await handler(request({ body: "{nope", headers: { "content-type": "application/json" } }));
    expect(malformed.status).toBe(400);
    expect(malformed.jsonBody).toMatchObject({ detail: "request body is not valid JSON" });
    const wrongType = await handler(request({ body: "{}", headers: { "content-type": "text/plain" } }));
    expect(wrongType.status).toBe(400);
    const large = await handler(
      request({
        body: JSON.stringify({ name: "x".repeat(100), count: 1 }),
        headers: { "content-type": "application/json" },
      }),
    );
    expect(large.status).toBe(413);
    expect(() =>
      parsePath(request({ params: { id: "../etc" } }), z.object({ id: z.string().regex(/^[a-z0-9]+$/) })),
    ).toThrow(/invalid path parameter 'id'/);
    expect(() =>
      parseQuery(request({ url: "http://h/x?page=abc" }), z.object({ page: z.coerce.number().int() })),
    ).toThrow(/invalid query parameter 'page'/);
  });

  it("answers 422 when a required query parameter is missing", () => {
    const error = (() => {
      try {
        parseQuery(request({ url: "http://h/x" }), z.object({ message: z.string() }));
      } catch (e) {
        return e;
      }
    })() as ValidationError;
    expect(error).toBeInstanceOf(ValidationError);
    expect(error.issues).toEqual([{ loc: ["query", "message"], msg: "field required", type: "missing" }]);
  });

  it("a missing enum parameter is missing too (422), a wrong value malformed (400)", () => {
    const schema = z.object({ template: z.enum(["a", "b"]) });
    const thrown = (url: string) => {
      try {
        parseQuery(request({ url }), schema);
      } catch (e) {
        return e;
      }
    };
    const missing = thrown("http://h/x") as ValidationError;
    expect(missing).toBeInstanceOf(ValidationError);
    expect(missing.issues).toEqual([{ loc: ["query", "template"], msg: "field required", type: "missing" }]);
    expect(thrown("http://h/x?template=c")).not.toBeInstanceOf(ValidationError);
  });

  it("B-126 B-228 B-229 maps an unknown error to exactly 'internal server error' with the request id, and logs it", async () => {
    const { lines, logger } = capture();
    const handler = createHttpHandler(async () => {
      throw new TypeError("database password is hunter2");
    }, logger);
    const result = await handler(request({ headers: { "x-request-id": "req-0001-abcd" } }));
    expect(result.status).toBe(500);
    expect(result.jsonBody).toEqual({ detail: "internal server error", request_id: "req-0001-abcd" });
    expect(result.headers?.["X-Request-Id"]).toBe("req-0001-abcd");
    const logged = lines.find((l) => l.msg === "unhandled error");
    expect(logged?.request_id).toBe("req-0001-abcd");
  });

  it("B-124 B-227 maps domain errors to their status, string detail and headers", async () => {
    const quiet = createLogger({ level: "error", write: () => undefined });
    const notFound = await createHttpHandler(async () => {
      throw new NotFoundError("no such job");
    }, quiet)(request());
    expect(notFound.status).toBe(404);
    expect(notFound.jsonBody).toMatchObject({ detail: "no such job", request_id: expect.any(String) });
    const busy = await createHttpHandler(async () => {
      throw new QueueFullError("queue full", 30);
    }, quiet)(request());
    expect(busy.status).toBe(429);
    expect(busy.headers?.["Retry-After"]).toBe("30");
  });

  it("B-243 maps an unreachable dependency (connection refused, also nested as a cause) to 503 with Retry-After", async () => {
    const quiet = createLogger({ level: "error", write: () => undefined });
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:10002"), { code: "ECONNREFUSED" });
    for (const error of [refused, new Error("request failed", { cause: refused }), new AggregateError([refused])]) {
      const result = await createHttpHandler(async () => {
        throw error;
      }, quiet)(request());
      expect(result.status).toBe(503);
      expect(result.headers?.["Retry-After"]).toBe("5");
      expect(result.jsonBody).toMatchObject({ detail: expect.stringContaining("unreachable") });
    }
  });

  it("B-127 stamps X-Request-Id on successful responses and logs the request with it", async () => {
    const { lines, logger } = capture();
    const result = await createHttpHandler(
      async (_req, scope) => jsonResult(200, { ok: true }, scope.requestId),
      logger,
    )(request());
    const id = result.headers?.["X-Request-Id"];
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines.find((l) => l.msg === "request")).toMatchObject({ request_id: id, status: 200, path: "/api/x" });
  });

  it("never writes secrets to logs", () => {
    const { lines, logger } = capture();
    logger.info("calling", {
      authorization: "Bearer abc",
      nested: { api_token: "t0k3n", AccountKey: "k" },
      connectionString: "AccountKey=x",
    });
    const text = JSON.stringify(lines);
    expect(text).not.toContain("abc");
    expect(text).not.toContain("t0k3n");
    expect(text).not.toContain("AccountKey=x");
  });
});

describe("conditional, long-polling reads", () => {
  it("matches If-None-Match lists, weak tags and *, and nothing else", () => {
    const etag = etagOf({ status: "running" });
    expect(etag).toBe(etagOf({ status: "running" }));
    expect(etag).not.toBe(etagOf({ status: "completed" }));
    expect(ifNoneMatchHits(etag, etag)).toBe(true);
    expect(ifNoneMatchHits(`"a", W/${etag}`, etag)).toBe(true);
    expect(ifNoneMatchHits("*", etag)).toBe(true);
    expect(ifNoneMatchHits('"a"', etag)).toBe(false);
    expect(ifNoneMatchHits(null, etag)).toBe(false);
  });

  it("answers at once without If-None-Match, on a change signal while waiting, and when the client hangs up", async () => {
    let state = "queued";
    let notify: () => void = () => {};
    let subscribed = 0;
    const subscribe = (listener: () => void) => {
      subscribed++;
      notify = listener;
      return () => {
        subscribed--;
        notify = () => {};
      };
    };
    const render = async () => ({ status: state });
    const hour = 3_600_000;
    expect(await longPoll({ render, ifNoneMatch: null, waitMs: hour, subscribe, recheckMs: hour })).toMatchObject({
      notModified: false,
      body: { status: "queued" },
    });

    const heldArmed = longTimerArmed(60_000);
    const held = longPoll({
      render,
      ifNoneMatch: etagOf({ status: "queued" }),
      waitMs: hour,
      subscribe,
      recheckMs: hour,
    });
    await heldArmed;
    state = "running";
    notify();
    expect(await held).toMatchObject({
      notModified: false,
      body: { status: "running" },
      etag: etagOf({ status: "running" }),
    });

    // A client hanging up while the request is held ends the wait, and the subscription.
    const controller = new AbortController();
    const abandonedArmed = longTimerArmed(60_000);
    const abandoned = longPoll({
      render,
      ifNoneMatch: etagOf({ status: "running" }),
      waitMs: hour,
      subscribe,
      recheckMs: hour,
      signal: controller.signal,
    });
    await abandonedArmed;
    controller.abort();
    expect(await abandoned).toMatchObject({ notModified: true });
    expect(subscribed).toBe(0);
  });

  it("finds changes nobody signalled by re-reading, and answers 304 when the wait runs out", async () => {
    let state = "running";
    let renders = 0;
    let reread: () => void = () => {};
    const rereadOnce = new Promise<void>((resolve) => {
      reread = resolve;
    });
    const render = async () => {
      renders++;
      if (renders === 2) reread();
      return { status: state };
    };
    const silent = () => () => {};
    const changed = longPoll({
      render,
      ifNoneMatch: etagOf({ status: "running" }),
      waitMs: 60_000,
      subscribe: silent,
      recheckMs: 20,
    });
    // Unsignalled, it re-read once and found nothing new; the change comes after.
    await rereadOnce;
    state = "completed";
    expect(await changed).toMatchObject({ notModified: false, body: { status: "completed" } });

    renders = 0;
    const started = Date.now();
    const unchanged = await longPoll({
      render,
      ifNoneMatch: etagOf({ status: "completed" }),
      waitMs: 120,
      subscribe: silent,
      recheckMs: 50,
    });
    expect(unchanged.notModified).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(renders).toBeGreaterThanOrEqual(2);
  });

  it("tags a version of the body weakly, so values that change by themselves do not count as changes", async () => {
    let tick = 0;
    const render = async () => ({ status: "running", elapsed_seconds: tick++ });
    const versionOf = ({ elapsed_seconds, ...stable }: { status: string; elapsed_seconds: number }) => stable;
    const first = await longPoll({
      render,
      versionOf,
      ifNoneMatch: null,
      waitMs: 0,
      subscribe: () => () => {},
      recheckMs: 10,
    });
    expect(first.etag).toMatch(/^W\/"/);
    const held = await longPoll({
      render,
      versionOf,
      ifNoneMatch: first.etag,
      waitMs: 60,
      subscribe: () => () => {},
      recheckMs: 10,
    });
    expect(held).toMatchObject({ notModified: true, etag: first.etag });
    expect(held.body.elapsed_seconds).toBeGreaterThan(first.body.elapsed_seconds);
  });
});
