import { scanSecrets } from "../ops/secret-scanner.js";

/**
 * The last check before a message leaves the trust boundary (spec §8: "an adapter must re-scan the
 * body for secret patterns before sending"; secrets, credentials, personal data, subscription ids
 * and raw payloads never leave). The console's value-scanning secret scanner
 * (`shared/ops/secret-scanner.ts`: bearer credentials, JWTs, connection strings, SAS, the product's
 * tokens, private keys, URL credentials, secret-named pairs, behind compatibility forms too) runs
 * first; then what only an outbound message must also drop: vendor tokens, subscription ids,
 * e-mail addresses and long opaque values. Ordinary prose and the opaque ids a message is built
 * around (approval, audit, correlation ids) pass unchanged.
 */
const OUTBOUND_PATTERNS: readonly [RegExp, string][] = [
  // Bearer credentials in whitespace and common separator forms.
  [/\bbearer(?:\s+|[:=]\s*|%20)[A-Za-z0-9._~+/=-]{8,}/gi, "[redacted]"],
  // JSON Web Tokens.
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, "[redacted]"],
  // Storage connection strings and SAS signatures.
  [/\b(AccountKey|SharedAccessKey|sig)=[^\s;&"']+/gi, "$1=[redacted]"],
  // key=value / key: value credentials.
  [
    /\b(password|passwd|pwd|secret|client_secret|token|api[_-]?key|access[_-]?key)\s*[:=]\s*[^\s,;&"']+/gi,
    "$1=[redacted]",
  ],
  // Vendor tokens: Slack, Standard Webhooks secrets, GitHub, AWS access keys, private keys.
  [/\bxox[abposr]-[A-Za-z0-9-]{10,}/g, "[redacted]"],
  [/\bwhsec_[A-Za-z0-9+/=]{16,}/g, "[redacted]"],
  [/\bgh[pousr]_[A-Za-z0-9]{30,}/g, "[redacted]"],
  [/\bAKIA[0-9A-Z]{16}\b/g, "[redacted]"],
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----/g, "[redacted]"],
  // Subscription ids and resource ids.
  [/\/subscriptions\/[0-9a-f-]{36}[^\s,;)]*/gi, "[resource_id]"],
  [
    /\bsubscription(?:[ _-]?id)?\s*[:=]?\s*[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi,
    "subscription [redacted]",
  ],
  // Personal data: e-mail addresses.
  [/\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b/g, "[email]"],
  // Long opaque high-entropy values (keys, signatures).
  [/\b[A-Za-z0-9+/]{40,}={0,2}/g, "[redacted]"],
];

/** Redacts what must not leave in `text`; `redacted` counts the replacements. */
export function scanOutbound(text: string): { text: string; redacted: number } {
  const secrets = scanSecrets(text);
  let redacted = secrets.found.length;
  let out = secrets.text;
  for (const [pattern, replacement] of OUTBOUND_PATTERNS)
    out = out.replace(pattern, (...args) => {
      redacted++;
      const groups = args.slice(1, -2) as (string | undefined)[];
      return replacement.replace(/\$(\d)/g, (_, n: string) => groups[Number(n) - 1] ?? "");
    });
  return { text: out, redacted };
}
