import type { Logger } from "../logging/logger.js";
import { DomainError, ValidationError } from "./errors.js";
import { REQUEST_ID_HEADER } from "./request-id.js";

/** A transport-neutral HTTP response; `@azure/functions` accepts it as HttpResponseInit. */
export interface HttpResult {
  status: number;
  headers?: Record<string, string>;
  jsonBody?: unknown;
  body?: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array> | Uint8Array | string;
}

export const INTERNAL_ERROR_DETAIL = "internal server error";

/** The spec's error envelope (§2.8). */
export function errorEnvelope(detail: unknown, requestId: string): { detail: unknown; request_id: string } {
  return { detail, request_id: requestId };
}

/** Builds an error response in the envelope, with the request id header. */
export function errorResult(
  status: number,
  detail: unknown,
  requestId: string,
  headers: Record<string, string> = {},
): HttpResult {
  return {
    status,
    headers: { "Content-Type": "application/json", [REQUEST_ID_HEADER]: requestId, ...headers },
    jsonBody: errorEnvelope(detail, requestId),
  };
}

/**
 * The one error mapper of the HTTP transport: domain errors become their status and message;
 * anything else is logged with the request id and answered with exactly `internal server error`.
 */
export function mapErrorToResult(error: unknown, requestId: string, logger: Logger): HttpResult {
  if (error instanceof ValidationError) {
    return errorResult(422, error.issues, requestId, error.headers);
  }
  if (error instanceof DomainError) {
    if (error.status >= 500) logger.warn("dependency failure", { status: error.status, error: error.message });
    return errorResult(error.status, error.message, requestId, error.headers);
  }
  logger.error("unhandled error", { error });
  return errorResult(500, INTERNAL_ERROR_DETAIL, requestId);
}

/** A 2xx JSON response carrying the request id header. */
export function jsonResult(status: number, body: unknown, requestId: string, headers: Record<string, string> = {}): HttpResult {
  return {
    status,
    headers: { "Content-Type": "application/json", [REQUEST_ID_HEADER]: requestId, ...headers },
    jsonBody: body,
  };
}
