import http from "node:http";
import https from "node:https";
import type { AttemptOutcome } from "../router.js";

/** A vendor's HTTP answer. */
export interface VendorResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** Errors raised before the request could reach the vendor: safe to try again. */
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

/**
 * POSTs a JSON body with `node:http(s)` (so a test can trust its own CA through `ca`), bounded by
 * `signal`. Resolves the vendor's answer; rejects only with {@link NotSentError} (nothing reached
 * the vendor) or another error (the transport was cut after the request may have reached it).
 */
export function postJson(
  url: string,
  body: string,
  options: { headers?: Record<string, string>; signal: AbortSignal; ca?: string | Buffer; maxResponseBytes?: number },
): Promise<VendorResponse> {
  const target = new URL(url);
  const client = target.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(
      target,
      {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...options.headers },
        signal: options.signal,
        ...(options.ca ? { ca: options.ca } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size <= (options.maxResponseBytes ?? 65_536)) chunks.push(chunk);
        });
        response.on("end", () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text: Buffer.concat(chunks).toString("utf8"),
          }),
        );
        response.on("error", reject);
      },
    );
    request.on("error", (error: NodeJS.ErrnoException) =>
      reject(error.code && NOT_SENT.has(error.code) ? new NotSentError(error.code) : error),
    );
    request.end(body);
  });
}

/** The request never left: the vendor cannot have seen it. */
export class NotSentError extends Error {
  constructor(readonly code: string) {
    super(`not sent: ${code}`);
    this.name = "NotSentError";
  }
}

/** Retry-After (seconds or an HTTP date) in milliseconds. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The outcome of a call that threw: not sent is a retryable rejection, anything else may have reached the vendor. */
export function thrownOutcome(error: unknown, signal: AbortSignal): AttemptOutcome {
  if (error instanceof NotSentError) return { outcome: "rejected", retryable: true, reason: error.message };
  return { outcome: "ambiguous", reason: signal.aborted ? "timeout" : "transport_interrupted" };
}

/** The outcome of a non-2xx HTTP answer: 408, 429 and 5xx retryable (with Retry-After), other 4xx definitive. */
export function rejectionOutcome(response: VendorResponse): AttemptOutcome {
  const retryable = response.status === 408 || response.status === 429 || response.status >= 500;
  const after = retryAfterMs(response.headers["retry-after"]);
  return {
    outcome: "rejected",
    retryable,
    ...(after !== undefined ? { retry_after_ms: after } : {}),
    reason: `http_${response.status}`,
  };
}
