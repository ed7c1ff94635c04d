import { createHash } from "node:crypto";

/** Canonical JSON (sorted keys, undefined fields left out), so equal requests fingerprint equally. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => a.localeCompare(b));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
}

/**
 * What an idempotency key binds to: a hash of the request's defining fields. A retry with the
 * same key and the same fields is a replay; the same key with other fields is a different request.
 */
export function requestFingerprint(fields: Record<string, unknown>): string {
  return createHash("sha256").update(canonical(fields)).digest("hex");
}
