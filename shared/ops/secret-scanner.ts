/**
 * The high-signal secret scanner (spec operator-console §2.4 activity rule 3, §8 "an adapter must
 * re-scan the body for secret patterns"; issue 21 item 3). One module, used before anything is
 * written to the audit log, the evidence store or a reply, and by the notifier's adapters.
 *
 * It scans values, not key names (the audit's and logger's key rule stays as a second line):
 *
 * - bearer and basic credentials after `Bearer`/`Basic` in whitespace and separator forms
 *   (`Bearer x`, `bearer:x`, `Bearer=x`, `Bearer%20x`, `Bearer+x`, `Bearer\tx`, `bearer_x`…);
 * - JSON Web Tokens (`eyJ…` header, two or three dot-separated base64url parts);
 * - connection-string credentials: `AccountKey=`, `SharedAccessKey=`, `SharedAccessSignature=`,
 *   `Password=`, `Pwd=`, `ClientSecret=`, `SecretKey=`;
 * - SAS query strings: the `sig=` signature of a shared access signature;
 * - the product's own job-API token (`bpt_` and base64url);
 * - PEM private keys (`-----BEGIN … PRIVATE KEY-----` to its end, or to the end of the text);
 * - `key=value` / `key: value` credentials under a secret-sounding name
 *   (password, secret, token, api_key, access_key, client_secret…);
 * - credentials in URLs (`scheme://user:password@host`).
 *
 * Text is scanned as written and after Unicode compatibility normalization (NFKC), so full-width
 * or other compatibility forms of the markers are caught too. What is found is replaced by
 * `[redacted:<kind>]`; the rest of the text is kept.
 */

/** What kind of secret a match is; the replacement names it. */
export type SecretKind =
  | "private_key"
  | "jwt"
  | "bearer"
  | "connection_string"
  | "sas"
  | "product_token"
  | "url_credentials"
  | "key_value";

interface Pattern {
  kind: SecretKind;
  re: RegExp;
  /** Replaces one match; defaults to the whole match. */
  replace?: (match: string, ...groups: string[]) => string;
}

const mark = (kind: SecretKind) => `[redacted:${kind}]`;

/** Separators that may stand between a scheme word and its credential. */
const SEP = String.raw`(?:[\s:=_+,;|]|%20|%3[aAdD]|\\[tn])+`;

const PATTERNS: readonly Pattern[] = [
  {
    kind: "private_key",
    re: /-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)/g,
  },
  // Before bearer: a JWT after "Bearer" is reported as a JWT, and one alone too.
  { kind: "jwt", re: /eyJ[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*){1,2}/g },
  { kind: "product_token", re: /bpt_[A-Za-z0-9_-]{8,}/g },
  {
    kind: "bearer",
    // The credential has a digit or is long: "basic search" is prose, "Basic dXNlcjpwYXNz" is not.
    re: new RegExp(
      String.raw`\b(bearer|basic)(${SEP})(?!\[redacted)((?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{6,}|[A-Za-z0-9._~+/=-]{16,})`,
      "gi",
    ),
    replace: (_m, word, sep) => `${word}${sep}${mark("bearer")}`,
  },
  {
    kind: "connection_string",
    re: /(AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd|ClientSecret|SecretKey)(\s*=\s*)(?!\[redacted)("[^"]*"|'[^']*'|[^;\s"'&]+)/gi,
    replace: (_m, key, eq) => `${key}${eq}${mark("connection_string")}`,
  },
  {
    kind: "sas",
    re: /([?&;\s]|^)(sig|signature)=(?!\[redacted)([^&\s"';]{6,})/gi,
    replace: (_m, lead, key) => `${lead}${key}=${mark("sas")}`,
  },
  {
    kind: "url_credentials",
    re: /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/:@]+):([^\s/@]+)@/gi,
    replace: (_m, scheme, user) => `${scheme}${user}:${mark("url_credentials")}@`,
  },
  {
    kind: "key_value",
    // A value of digits alone ("token: 123456", a count) is not a credential; "3-AAAA…" is.
    re: /\b((?:[A-Za-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|client[_-]?secret|credential)s?)("?\s*[:=]\s*"?)(?!\[redacted)(?!\d+(?:[\s"',;&}]|$))([^\s"',;&}]{6,})/gi,
    replace: (_m, key, eq) => `${key}${eq}${mark("key_value")}`,
  },
];

/** One scan: the redacted text and the kinds found (empty: nothing was found, the text is unchanged). */
export interface ScanResult {
  text: string;
  found: SecretKind[];
}

function scanOnce(text: string): ScanResult {
  const found: SecretKind[] = [];
  let out = text;
  for (const p of PATTERNS) {
    p.re.lastIndex = 0;
    out = out.replace(p.re, (...args: unknown[]) => {
      found.push(p.kind);
      const groups = args.slice(1, -2).map((g) => (typeof g === "string" ? g : ""));
      return p.replace ? p.replace(String(args[0]), ...groups) : mark(p.kind);
    });
  }
  return { text: out, found };
}

/** NFKC, without invisible format characters (zero-width spaces and joiners, soft hyphens, BOM). */
const normalize = (text: string) => text.normalize("NFKC").replace(/[\u00AD\u200B-\u200F\u2060-\u2064\uFEFF]/g, "");

/** Scans one string; secrets are replaced by `[redacted:<kind>]`. */
export function scanSecrets(text: string): ScanResult {
  const direct = scanOnce(text);
  const normalized = normalize(text);
  if (normalized === text) return direct;
  // A compatibility form (full-width letters, invisible characters) hid a marker: keep the normalized, redacted text.
  const again = scanOnce(normalize(direct.text));
  return again.found.length > 0 ? { text: again.text, found: [...direct.found, ...again.found] } : direct;
}

/** True when `text` holds anything the scanner recognizes. */
export function containsSecret(text: string): boolean {
  return scanSecrets(text).found.length > 0;
}

/** Deep copy of `value` with every string (keys included) scanned; other values are kept. */
export function redactSecrets<T>(value: T, depth = 0): T {
  if (typeof value === "string") return scanSecrets(value).text as T;
  if (value === null || typeof value !== "object") return value;
  if (depth > 16) return "[truncated]" as T;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[scanSecrets(k).text] = redactSecrets(v, depth + 1);
  return out as T;
}
