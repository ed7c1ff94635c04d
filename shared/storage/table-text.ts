/**
 * Table storage keeps at most 32K characters in one string property (64 KiB); longer text is
 * split across numbered properties. Together they may hold up to ~900K characters per entity.
 */
const CHUNK = 30_000;
const MAX_CHUNKS = 30;

export function packText(prefix: string, value: string): Record<string, string | number> {
  const count = Math.max(1, Math.ceil(value.length / CHUNK));
  if (count > MAX_CHUNKS)
    throw new Error(`${prefix} is larger than one table entity holds (${CHUNK * MAX_CHUNKS} characters)`);
  const out: Record<string, string | number> = { [`${prefix}_n`]: count };
  for (let i = 0; i < count; i++) out[`${prefix}_${i}`] = value.slice(i * CHUNK, (i + 1) * CHUNK);
  return out;
}

export function unpackText(entity: Record<string, unknown>, prefix: string): string {
  const count = Number(entity[`${prefix}_n`] ?? 0);
  let text = "";
  for (let i = 0; i < count; i++) text += String(entity[`${prefix}_${i}`] ?? "");
  return text;
}

/** True when a storage call failed with the given HTTP status (RestError.statusCode). */
export function isStatus(error: unknown, status: number): boolean {
  return typeof error === "object" && error !== null && (error as { statusCode?: number }).statusCode === status;
}
