import type http from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { errorResult, type HttpResult, INTERNAL_ERROR_DETAIL, mapErrorToResult } from "../shared/http/envelope.js";
import { PayloadTooLargeError } from "../shared/errors.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "../shared/http/request-id.js";
import { createRouteTable } from "../shared/http/route-template.js";
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

export interface Route {
  method: "GET" | "POST" | "DELETE";
  path: string;
  /** Routes that answer without `X-SVC-API-Token`. */
  public?: boolean;
  handler: (req: JobApiRequest, ctx: RouteContext) => Promise<HttpResult>;
}

function toRequest(req: http.IncomingMessage, params: Record<string, string>, limitBytes: number, signal: AbortSignal): JobApiRequest {
  const url = new URL(req.url ?? "/", "http://jobapi.local");
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  return {
    method: req.method ?? "GET",
    url: url.href,
    headers,
    query: url.searchParams,
    params,
    signal,
    async text() {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req) {
        size += (chunk as Buffer).length;
        if (size > limitBytes) throw new PayloadTooLargeError(limitBytes);
        chunks.push(chunk as Buffer);
      }
      return Buffer.concat(chunks).toString("utf8");
    },
  };
}

async function send(res: http.ServerResponse, result: HttpResult, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = { ...result.headers };
  if (result.jsonBody !== undefined) {
    const text = JSON.stringify(result.jsonBody);
    headers["Content-Type"] ??= "application/json";
    headers["Content-Length"] = String(Buffer.byteLength(text));
    res.writeHead(result.status, headers);
    res.end(text);
    return;
  }
  const body = result.body;
  if (body === undefined || typeof body === "string" || body instanceof Uint8Array) {
    if (body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(body));
    res.writeHead(result.status, headers);
    res.end(body);
    return;
  }
  res.writeHead(result.status, headers);
  const source = body instanceof ReadableStream ? Readable.fromWeb(body as import("node:stream/web").ReadableStream) : Readable.from(body);
  await pipeline(source, res, { signal });
}

/**
 * The job API's HTTP transport: Azure-style route templates, the token check before any work, one
 * error mapper, `X-Request-Id` on every response, streamed bodies with back-pressure.
 */
export function createRequestListener(options: {
  routes: Route[];
  logger: Logger;
  authorize: (token: string | null) => Promise<boolean>;
  bodyLimitBytes: number;
}): http.RequestListener {
  const table = createRouteTable(options.routes.map((r) => ({ template: r.path.replace(/^\//, ""), methods: [r.method], value: r })));
  return (req, res) => {
    const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER.toLowerCase()] as string | undefined);
    const logger = options.logger.child({ request_id: requestId });
    const controller = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) controller.abort(new Error("client disconnected"));
    });
    const started = performance.now();
    res.setHeader(REQUEST_ID_HEADER, requestId);
    const path = new URL(req.url ?? "/", "http://jobapi.local").pathname;

    const handle = async (): Promise<HttpResult> => {
      if (/\/\/|\/$/.test(path) && path !== "/") {
        req.resume();
        return errorResult(400, "missing path parameter (empty path segment)", requestId);
      }
      const found = table.find(req.method ?? "GET", path.replace(/^\//, ""));
      if (found.kind === "not-found") {
        req.resume();
        return errorResult(404, "not found", requestId);
      }
      if (found.kind === "method-not-allowed") {
        req.resume();
        return errorResult(405, "method not allowed", requestId, { Allow: found.allowed.join(", ") });
      }
      const route = found.value;
      if (!route.public && !(await options.authorize((req.headers["x-svc-api-token"] as string | undefined) ?? null))) {
        req.resume();
        return errorResult(401, "missing or invalid X-SVC-API-Token", requestId);
      }
      try {
        return await route.handler(toRequest(req, found.params, options.bodyLimitBytes, controller.signal), { requestId, logger });
      } catch (error) {
        return mapErrorToResult(error, requestId, logger);
      }
    };

    void handle()
      .then(async (result) => {
        await send(res, result, controller.signal);
        logger.info("request", { method: req.method, path, status: result.status, duration_ms: Math.round(performance.now() - started) });
      })
      .catch((error: unknown) => {
        if (controller.signal.aborted) {
          logger.info("client went away", { method: req.method, path });
          return;
        }
        logger.error("response failed", { error });
        if (!res.headersSent) {
          const body = JSON.stringify({ detail: INTERNAL_ERROR_DETAIL, request_id: requestId });
          res.writeHead(500, { "Content-Type": "application/json" }).end(body);
        } else {
          res.destroy();
        }
      });
  };
}
