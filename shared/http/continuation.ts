/**
 * Opaque continuation tokens for lists that page (`next_cursor`, and the `next_link` that carries
 * it): the position of the last item a page held, as base64url JSON. A token is checked on the way
 * back in: anything this service did not issue is refused by the caller, never looked up.
 */
export function encodeContinuation(position: readonly string[]): string {
  return Buffer.from(JSON.stringify(position)).toString("base64url");
}

/** The position a token of `length` strings holds; undefined for anything this service did not issue. */
export function decodeContinuation(token: string, length: number): string[] | undefined {
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && value.length === length && value.every((v) => typeof v === "string"))
      return value as string[];
  } catch {
    // falls through to the field error
  }
  return undefined;
}

/** A path with its query, for `next_link` (relative to the API's server). */
export function linkWith(path: string, query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
  return `${path}?${params.toString()}`;
}
