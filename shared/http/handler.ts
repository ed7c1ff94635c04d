import type { Logger } from "../logging/logger.js";
import { type HttpResult, mapErrorToResult } from "./envelope.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "./request-id.js";
import { NOSNIFF_HEADERS } from "./security-headers.js";
import type { HttpRequestLike } from "./validation.js";

/** What a route handler receives besides the request: its request id and a logger carrying it. */
export interface RequestScope {
  readonly requestId: string;
  readonly logger: Logger;
}

export type RouteHandler<R extends HttpRequestLike = HttpRequestLike> = (
  request: R,
  scope: RequestScope,
) => Promise<HttpResult>;

/**
 * Wraps a route handler: resolves the request id, logs the request's outcome, maps every thrown
 * error through the one mapper, and stamps `X-Request-Id` and `X-Content-Type-Options: nosniff` on
 * every response.
 */
export function createHttpHandler<R extends HttpRequestLike>(
  handler: RouteHandler<R>,
  logger: Logger,
): (request: R) => Promise<HttpResult> {
  return async (request) => {
    const requestId = resolveRequestId(request.headers.get(REQUEST_ID_HEADER));
    const scoped = logger.child({ request_id: requestId });
    const started = performance.now();
    let result: HttpResult;
    try {
      result = await handler(request, { requestId, logger: scoped });
    } catch (error) {
      result = mapErrorToResult(error, requestId, scoped);
    }
    // nosniff on every response: a browser never runs a JSON (or any) body as another type.
    result.headers = { ...result.headers, ...NOSNIFF_HEADERS, [REQUEST_ID_HEADER]: requestId };
    scoped.info("request", {
      method: request.method,
      path: new URL(request.url).pathname,
      status: result.status,
      duration_ms: Math.round(performance.now() - started),
    });
    return result;
  };
}
