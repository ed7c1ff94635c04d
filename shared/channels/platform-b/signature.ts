import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Slack's request signatures, version 0 (spec operator-console.md §5 item 7: chat platform B
 * inbound events verify a timestamped signature): `v0=` + hex HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` under the app's signing secret. The same algorithm
 * as `@slack/bolt`'s receiver, checked against Slack's documented example in the tests.
 */

/** Requests older or newer than this are refused (Slack's recommendation: five minutes). */
export const SIGNATURE_WINDOW_SECONDS = 300;

export type SignatureRefusal = "missing_headers" | "stale_timestamp" | "bad_signature";

/** The v0 signature of `body` at `timestamp`. */
export function slackSignature(secret: string, timestamp: string, body: string): string {
  return `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;
}

/**
 * Checks one request: the timestamp within ±{@link SIGNATURE_WINDOW_SECONDS} of `now` (past and
 * future), then the signature compared in constant time (digests of equal length, so a wrong
 * prefix and a wrong length cost the same).
 */
export function verifySlackSignature(input: {
  secret: string;
  timestamp: string | null | undefined;
  signature: string | null | undefined;
  body: string;
  now: Date;
  windowSeconds?: number;
}): { ok: true } | { ok: false; reason: SignatureRefusal } {
  const { timestamp, signature } = input;
  if (!timestamp || !signature) return { ok: false, reason: "missing_headers" };
  if (!/^\d{1,12}$/.test(timestamp)) return { ok: false, reason: "stale_timestamp" };
  const skew = Math.abs(input.now.getTime() / 1000 - Number(timestamp));
  if (skew > (input.windowSeconds ?? SIGNATURE_WINDOW_SECONDS)) return { ok: false, reason: "stale_timestamp" };
  const expected = createHmac("sha256", "compare")
    .update(slackSignature(input.secret, timestamp, input.body))
    .digest();
  const presented = createHmac("sha256", "compare").update(signature).digest();
  return timingSafeEqual(expected, presented) ? { ok: true } : { ok: false, reason: "bad_signature" };
}
