import { createHash, randomUUID } from "node:crypto";

/**
 * A UUID named by `oid` and `idempotencyKey`: the first 128 bits of their SHA-256 with the
 * version nibble and the RFC 9562 variant bits set.
 */
function nameBasedUuid(oid: string, idempotencyKey: string, version: 5 | 8): string {
  const bytes = createHash("sha256").update(`${oid}\n${idempotencyKey}`).digest().subarray(0, 16);
  bytes[6] = ((bytes[6] as number) & 0x0f) | (version << 4);
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/**
 * The id of a dashboard job. With an idempotency key it is named by the caller and the key, so a
 * retry finds the same job, for good: an RFC 9562 version 8 UUID (custom layout) built from
 * SHA-256, since version 5 is defined for SHA-1 only. Without a key it is a random (version 4)
 * UUID.
 */
export function dashboardJobId(oid: string, idempotencyKey: string | undefined): string {
  return idempotencyKey ? nameBasedUuid(oid, idempotencyKey, 8) : randomUUID();
}

/**
 * The id the same caller and key were given before ids became version 8: the same SHA-256 bits
 * labelled version 5. Jobs stored under it keep it; a keyed submit looks it up so their retries
 * still find them.
 */
export function legacyDashboardJobId(oid: string, idempotencyKey: string): string {
  return nameBasedUuid(oid, idempotencyKey, 5);
}
