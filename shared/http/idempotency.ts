import { createHash } from "node:crypto";
import { canonicalJson } from "../canonical-json.js";

/** The one canonical JSON (RFC 8785 semantics) lives in `canonical-json.ts`; re-exported for its callers here. */
export { canonicalJson } from "../canonical-json.js";

/**
 * What an idempotency key binds to: a hash of the request's defining fields. A retry with the
 * same key and the same fields is a replay; the same key with other fields is a different request.
 */
export function requestFingerprint(fields: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(fields)).digest("hex");
}
