import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { errorResult, type HttpResult, mapErrorToResult } from "../shared/http/envelope.js";
import { readBodyText } from "../shared/http/read-body.js";
import { isLoopbackHostHeader } from "../shared/http/loopback-host.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "../shared/http/request-id.js";
import { NOSNIFF_HEADERS } from "../shared/http/security-headers.js";
import type { HttpRequestLike } from "../shared/http/validation.js";
import type { Logger } from "../shared/logging/logger.js";

export interface JobApiRequest extends HttpRequestLike {
  /** Aborted when the client goes away, so streams stop reading storage. */
  readonly signal: AbortSignal;
}

export interface RouteContext {
  requestId: string;
  logger: Logger;
}

/** One route of the job API: what the transport serves and the OpenAPI document describes. */
export interface JobApiRoute {
  method: "GET" | "POST" | "DELETE";
  /** An OpenAPI path template (`/v1/jobs/{job_id}/status`). */
  path: string;
  /** Routes that answer without `X-SVC-API-Token`. */
  public?: boolean;
  /** Its OpenAPI operation object; routes without one (the docs UI) are not listed. */
  openapi?: Record<string, unknown>;
  handler: (req: JobApiRequest, ctx: RouteContext) => Promise<HttpResult>;
}

/** What the transport keeps per request; `incoming`/`outgoing` exist when served by @hono/node-server. */
interface JobApiEnv {
  Bindings: { outgoing?: ServerResponse };
  Variables: { requestId: string; logger: Logger };
}

export type JobApiApp = Hono<JobApiEnv>;

export interface TransportOptions {
  routes: readonly JobApiRoute[];
  logger: Logger;
  /** Whether an `X-SVC-API-Token` value is valid (constant-time; see ApiTokenService). */
  authorize: (token: string | null) => Promise<boolean>;
  bodyLimitBytes: number;
  /**
   * Answer only requests whose `Host` names loopback (421 otherwise): set when the API listens on
   * loopback, so a DNS-rebinding page cannot reach its public routes from a browser.
   */
  loopbackHostOnly?: boolean;
}

/** `/v1/jobs/{job_id}` → `/v1/jobs/:job_id` (Hono's parameter syntax). */
function honoPath(template: string): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, ":$1");
}

/** Matches a template's concrete paths, for 405 answers (which Hono's router does not give). */
function pathPattern(template: string): RegExp {
  const escaped = template
    .split(/\{[A-Za-z_][A-Za-z0-9_]*\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${escaped.join("[^/]+")}$`);
}

function toRequest(c: Context<JobApiEnv>, limitBytes: number): JobApiRequest {
  const raw = c.req.raw;
  return {
    method: raw.method,
    url: raw.url,
    headers: raw.headers,
    query: new URL(raw.url).searchParams,
    params: c.req.param() as Record<string, string>,
    signal: raw.signal,
    text: () => readBodyText(raw.body, limitBytes),
  };
}

/**
 * Sends a streamed body (a Node stream or any async iterable) straight into the Node response,
 * with back-pressure, as the job API did before Hono: the web-stream route through the adapter
 * cost ~10% more CPU per streamed MB (measured; see the README). A source that fails midway is
 * logged and the connection cut, so the client sees an incomplete transfer, never a body that
 * looks whole; a client that hangs up destroys the source.
 */
function pipeToSocket(
  result: HttpResult,
  headers: Record<string, string>,
  source: AsyncIterable<Uint8Array>,
  outgoing: ServerResponse,
  c: Context<JobApiEnv>,
): Response {
  const readable = source instanceof Readable ? source : Readable.from(source);
  // Whichever ends first tells the cause: the client hanging up, or the source failing.
  let clientLeft = false;
  let sourceFailed = false;
  outgoing.once("close", () => {
    if (!outgoing.writableFinished && !sourceFailed) clientLeft = true;
  });
  readable.once("error", () => {
    if (!clientLeft) sourceFailed = true;
  });
  outgoing.writeHead(result.status, headers);
  pipeline(readable, outgoing).catch((error: unknown) => {
    if (clientLeft) c.get("logger").info("client went away", { path: c.req.path });
    else c.get("logger").error("response stream failed", { error });
    outgoing.destroy();
  });
  return RESPONSE_ALREADY_SENT;
}

/**
 * A web stream of a streamed body, for `app.request()` (no socket): read one chunk ahead, a
 * cancel destroys the source, a failure errors the stream.
 */
function webStreamOf(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = source[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await iterator.next();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}

/** The Response of a transport-neutral {@link HttpResult}, with the request id header. */
function toResponse(result: HttpResult, c: Context<JobApiEnv>): Response {
  const headers: Record<string, string> = {
    ...NOSNIFF_HEADERS,
    ...result.headers,
    [REQUEST_ID_HEADER]: c.get("requestId"),
  };
  if (result.jsonBody !== undefined) {
    headers["Content-Type"] ??= "application/json";
    return new Response(JSON.stringify(result.jsonBody), { status: result.status, headers });
  }
  const body = result.body;
  if (body === undefined || typeof body === "string" || body instanceof ReadableStream) {
    return new Response(body ?? null, { status: result.status, headers });
  }
  if (body instanceof Uint8Array)
    return new Response(body as Uint8Array<ArrayBuffer>, { status: result.status, headers });
  const outgoing = c.env?.outgoing;
  if (outgoing) return pipeToSocket(result, headers, body, outgoing, c);
  return new Response(webStreamOf(body), { status: result.status, headers });
}

/**
 * The job API's HTTP transport (Hono): the request id and a logger per request, the token check
 * before any protected route runs, one error handler over the shared {@link mapErrorToResult},
 * 404/405 in the error envelope, request bodies read up to the limit, streamed responses.
 * Serve it with `getRequestListener(app.fetch)` from @hono/node-server, or test it with
 * `app.request()`.
 */
export function createJobApiTransport(options: TransportOptions): JobApiApp {
  const app = new Hono<JobApiEnv>();
  const patterns = options.routes.map((route) => ({ method: route.method, pattern: pathPattern(route.path) }));
  /** 404 for a path no route has, 405 (with Allow) for one whose routes take other methods. */
  const unrouted = (c: Context<JobApiEnv>) => {
    const allowed = [...new Set(patterns.filter((p) => p.pattern.test(c.req.path)).map((p) => p.method))];
    const requestId = c.get("requestId");
    if (allowed.length === 0) return toResponse(errorResult(404, "not found", requestId), c);
    return toResponse(errorResult(405, "method not allowed", requestId, { Allow: allowed.join(", ") }), c);
  };

  app.use(async (c, next) => {
    const requestId = resolveRequestId(c.req.header(REQUEST_ID_HEADER));
    const logger = options.logger.child({ request_id: requestId });
    c.set("requestId", requestId);
    c.set("logger", logger);
    const started = performance.now();
    const path = c.req.path;
    // A browser always sends Host; a request without one (in-process, app.request) is no rebinding page.
    const host = c.req.header("host");
    if (options.loopbackHostOnly && host !== undefined && !isLoopbackHostHeader(host)) {
      c.res = toResponse(errorResult(421, "host header must name a loopback address", requestId), c);
    } else if (path !== "/" && /\/\/|\/$/.test(path)) {
      c.res = toResponse(errorResult(400, "missing path parameter (empty path segment)", requestId), c);
    } else if (c.req.method === "HEAD") {
      // Hono would run the GET handler and drop its body, leaving a result stream open: not served.
      c.res = unrouted(c);
    } else {
      await next();
    }
    logger.info("request", {
      method: c.req.method,
      path,
      status: c.res.status,
      duration_ms: Math.round(performance.now() - started),
    });
  });

  const requireToken: MiddlewareHandler<JobApiEnv> = async (c, next) => {
    if (!(await options.authorize(c.req.header("x-svc-api-token") ?? null))) {
      return toResponse(errorResult(401, "missing or invalid X-SVC-API-Token", c.get("requestId")), c);
    }
    await next();
  };

  for (const route of options.routes) {
    const handler = async (c: Context<JobApiEnv>) =>
      toResponse(
        await route.handler(toRequest(c, options.bodyLimitBytes), {
          requestId: c.get("requestId"),
          logger: c.get("logger"),
        }),
        c,
      );
    if (route.public) app.on(route.method, honoPath(route.path), handler);
    else app.on(route.method, honoPath(route.path), requireToken, handler);
  }

  app.notFound(unrouted);

  app.onError((error, c) => toResponse(mapErrorToResult(error, c.get("requestId"), c.get("logger")), c));
  return app;
}
