/**
 * Directory object ids (Entra `oid`) are GUIDs: the same principal may arrive in upper or lower
 * case, with surrounding whitespace or braces, depending on the channel or tool that carried it.
 * Every comparison of two ids (self-approval, the requester among approvers, pairing, bindings,
 * audit filters) goes through {@link sameObjectId}, never `===`.
 */

/** The canonical form of an object id: trimmed, braces removed, Unicode-normalized (NFKC), lower case. */
export function normalizeObjectId(id: string): string {
  const trimmed = id.normalize("NFKC").trim();
  const unbraced = /^\{.*\}$/.test(trimmed) ? trimmed.slice(1, -1).trim() : trimmed;
  return unbraced.toLowerCase();
}

/** True when `a` and `b` name the same principal; an empty id matches nothing. */
export function sameObjectId(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return false;
  const na = normalizeObjectId(a);
  return na.length > 0 && na === normalizeObjectId(b);
}
