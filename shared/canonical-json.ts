/**
 * The one canonical JSON of the code base (RFC 8785, JSON Canonicalization Scheme, semantics):
 * object keys sorted by UTF-16 code unit (not by locale), no whitespace, strings and numbers
 * serialized as ECMAScript's `JSON.stringify` does (RFC 8785 §3.2.2 adopts exactly that number
 * form). What JSON cannot carry is treated as `JSON.stringify` treats it, so a value and its JSON
 * round trip canonicalize — and hash — equally: `toJSON` is applied (a `Date` is its ISO string),
 * `undefined`, functions and symbols are left out of objects and are `null` in arrays, boxed
 * primitives are their values, and non-finite numbers are `null`. A `bigint` throws, as in JSON.
 *
 * Used by the idempotency fingerprints (`http/idempotency.ts`), the action outcome records and
 * the approvals' `action_hash`.
 */

/** Orders strings by UTF-16 code unit, as RFC 8785 §3.2.3 sorts object keys (JavaScript's `<` on strings). */
function byCodeUnit(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

function serialize(input: unknown, key: string): string | undefined {
  let value = input;
  if (value !== null && (typeof value === "object" || typeof value === "bigint")) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") value = toJSON.call(value, key);
  }
  if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
    case "boolean":
    case "number":
      // Non-finite numbers are null; -0 is 0; the shortest round-trip form otherwise (RFC 8785 §3.2.2.3).
      return JSON.stringify(value);
    case "bigint":
      throw new TypeError("canonical JSON cannot represent a bigint");
    case "undefined":
    case "function":
    case "symbol":
      return undefined;
  }
  if (Array.isArray(value)) return `[${value.map((v, i) => serialize(v, String(i)) ?? "null").join(",")}]`;
  const fields: [string, string][] = [];
  for (const name of Object.keys(value as object)) {
    const text = serialize((value as Record<string, unknown>)[name], name);
    if (text !== undefined) fields.push([name, text]);
  }
  fields.sort(([left], [right]) => byCodeUnit(left, right));
  return `{${fields.map(([name, text]) => `${JSON.stringify(name)}:${text}`).join(",")}}`;
}

/**
 * The canonical JSON text of `value`. Throws a `TypeError` for a value JSON has no text for at
 * the top level (`undefined`, a function, a symbol) and for a `bigint` anywhere.
 */
export function canonicalJson(value: unknown): string {
  const text = serialize(value, "");
  if (text === undefined) throw new TypeError(`canonical JSON cannot represent a top-level ${typeof value}`);
  return text;
}
