import { describeCloudAuthorizationError } from "../auth/cloud-authorization.js";
import {
  ConflictError,
  DependencyFailedError,
  DependencyUnavailableError,
  type DomainError,
  ForbiddenError,
  InvalidRequestError,
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  PreconditionRequiredError,
  QueueFullError,
  ReauthenticationRequiredError,
  UnauthorizedError,
  ValidationError,
} from "../errors.js";
import type { Logger } from "../logging/logger.js";
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

/** How a domain error shows on HTTP: its status and any headers it implies. */
interface HttpErrorMapping {
  status: number;
  headers?: Record<string, string>;
}

const retryAfter = (seconds: number | undefined): Record<string, string> =>
  seconds === undefined ? {} : { "Retry-After": String(seconds) };

/** Each domain error class and its HTTP status; the first match wins (subclasses first). */
const HTTP_ERROR_MAPPINGS: readonly [
  abstract new (...args: never[]) => DomainError,
  (error: never) => HttpErrorMapping,
][] = [
  [InvalidRequestError, () => ({ status: 400 })],
  [
    ReauthenticationRequiredError,
    (e: ReauthenticationRequiredError) => ({
      status: 401,
      headers: {
        "WWW-Authenticate": `Bearer error="insufficient_user_authentication", error_description="a recent sign-in is required", max_age="${e.maxAgeSeconds}"`,
      },
    }),
  ],
  [UnauthorizedError, () => ({ status: 401 })],
  [ForbiddenError, () => ({ status: 403 })],
  [NotFoundError, () => ({ status: 404 })],
  [MethodNotAllowedError, (e: MethodNotAllowedError) => ({ status: 405, headers: { Allow: e.allowed.join(", ") } })],
  [ConflictError, () => ({ status: 409 })],
  [PreconditionFailedError, () => ({ status: 412 })],
  [PayloadTooLargeError, () => ({ status: 413 })],
  [ValidationError, () => ({ status: 422 })],
  [PreconditionRequiredError, () => ({ status: 428 })],
  [QueueFullError, (e: QueueFullError) => ({ status: 429, headers: retryAfter(e.retryAfterSeconds) })],
  [DependencyFailedError, () => ({ status: 502 })],
  [
    DependencyUnavailableError,
    (e: DependencyUnavailableError) => ({ status: 503, headers: retryAfter(e.retryAfterSeconds) }),
  ],
];

/** The HTTP status and headers of a domain error, or undefined for anything else. */
export function httpMappingOf(error: unknown): HttpErrorMapping | undefined {
  for (const [type, map] of HTTP_ERROR_MAPPINGS) {
    if (error instanceof type) return map(error as never);
  }
  return undefined;
}

/**
 * The one error mapper of the HTTP transport (the Functions app and the job API both use it):
 * domain errors become their status and message (422: the field issues); anything else is logged
 * with the request id and answered with exactly `internal server error`.
 */
export function mapErrorToResult(error: unknown, requestId: string, logger: Logger): HttpResult {
  if (isDependencyUnreachable(error)) {
    logger.warn("dependency unreachable", { error });
    return errorResult(503, "a dependency (storage or the job API) is unreachable; retry shortly", requestId, {
      "Retry-After": "5",
    });
  }
  const mapping = httpMappingOf(error);
  if (mapping) {
    const domainError = error as DomainError;
    if (mapping.status >= 500)
      logger.warn("dependency failure", { status: mapping.status, error: domainError.message });
    const detail = domainError instanceof ValidationError ? domainError.issues : domainError.message;
    return errorResult(mapping.status, detail, requestId, mapping.headers);
  }
  // Azure refused the service's own identity: say which role is missing where (spec §7), and log Azure's code.
  const refusal = describeCloudAuthorizationError(error);
  if (refusal) {
    logger.error("cloud authorization refused", { error_code: refusal.code, role: refusal.role, scope: refusal.scope });
    return errorResult(502, refusal.message, requestId);
  }
  logger.error("unhandled error", { error });
  return errorResult(500, INTERNAL_ERROR_DETAIL, requestId);
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
]);

/** True for errors that mean a dependency could not be reached (not that it refused the request). */
export function isDependencyUnreachable(error: unknown): boolean {
  for (
    let e: unknown = error, depth = 0;
    e && typeof e === "object" && depth < 4;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
    if (e instanceof AggregateError && e.errors.some((inner) => isDependencyUnreachable(inner))) return true;
  }
  return false;
}

/** A 2xx JSON response carrying the request id header. */
export function jsonResult(
  status: number,
  body: unknown,
  requestId: string,
  headers: Record<string, string> = {},
): HttpResult {
  return {
    status,
    headers: { "Content-Type": "application/json", [REQUEST_ID_HEADER]: requestId, ...headers },
    jsonBody: body,
  };
}
