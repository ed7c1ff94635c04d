import { isRestError } from "@azure/core-rest-pipeline";
import type { AttemptOutcome } from "../router.js";
import { retryAfterMs } from "./http-post.js";

/**
 * What an Azure Communication Services request that failed before the service accepted it means
 * for delivery (the SMS and email channels): an HTTP refusal by its status (408, 429 and 5xx are
 * retried, Retry-After honoured), a refused connection is "not sent", a 2xx the client could not
 * read is ambiguous; undefined for anything else (the caller decides).
 */
export function acsRequestRefusal(error: unknown): AttemptOutcome | undefined {
  if (!isRestError(error)) return undefined;
  if (error.statusCode !== undefined) {
    const status = error.statusCode;
    if (status >= 200 && status < 300) return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
    const after = retryAfterMs(error.response?.headers.get("retry-after") ?? undefined);
    return {
      outcome: "rejected",
      retryable: status === 408 || status === 429 || status >= 500,
      ...(after !== undefined ? { retry_after_ms: after } : {}),
      reason: `http_${status}`,
    };
  }
  if (error.code === "ECONNREFUSED") return { outcome: "rejected", retryable: true, reason: "not sent: ECONNREFUSED" };
  return undefined;
}
