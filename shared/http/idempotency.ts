import { createHash } from "node:crypto";

/** Orders strings by UTF-16 code unit, as RFC 8785 sorts object keys (JavaScript's `<` on strings). */
function byCodeUnit(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

/**
 * Canonical JSON (RFC 8785 key order: by UTF-16 code unit, not by locale; undefined fields left
 * out), so equal requests fingerprint equally on every machine whatever its locale.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, field]) => field !== undefined)
    .sort(([left], [right]) => byCodeUnit(left, right));
  return `{${entries.map(([key, field]) => `${JSON.stringify(key)}:${canonicalJson(field)}`).join(",")}}`;
}

/**
 * What an idempotency key binds to: a hash of the request's defining fields. A retry with the
 * same key and the same fields is a replay; the same key with other fields is a different request.
 */
export function requestFingerprint(fields: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(fields)).digest("hex");
}
