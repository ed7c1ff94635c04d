/**
 * Issue 21 item 3: the value-scanning secret redactor. A property test puts secrets of every kind,
 * in whitespace, separator and Unicode disguises, at random positions in random nested values,
 * and asserts none survives `redactSecrets`; prose and identifiers the console needs are kept.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { sanitizeReason } from "../../shared/console/break-glass/break-glass.js";
import { redactLogCell } from "../../shared/console/tools/provider-tools.js";
import { containsSecret, redactSecrets, scanSecrets } from "../../shared/ops/secret-scanner.js";

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const chars = (alphabet: string, min: number, max: number) =>
  fc.array(fc.constantFrom(...alphabet.split("")), { minLength: min, maxLength: max }).map((a) => a.join(""));
/** A random credential: long, with a digit (as real ones are), so it cannot occur by chance in the filler. */
const credential = (alphabet = B64URL) =>
  fc.tuple(chars(alphabet, 20, 60), fc.integer({ min: 0, max: 9 })).map(([s, d]) => `${s}${d}`);

/** One secret in one written form; `core` is what must not survive. */
interface Planted {
  text: string;
  core: string;
}

const separators = fc.constantFrom(" ", "  ", "\t", ":", ": ", "=", "%20", "+", "_", "\\t", ",", " = ");
const bearerWord = fc.constantFrom("Bearer", "bearer", "BEARER", "Basic", "Ｂｅａｒｅｒ", "Bear\u200Ber");

const secrets: fc.Arbitrary<Planted>[] = [
  // Bearer and basic credentials in whitespace and separator forms.
  fc
    .tuple(
      fc.constantFrom("", "Authorization: ", "authorization=", "-H 'Authorization: "),
      bearerWord,
      separators,
      credential(),
    )
    .map(([lead, word, sep, core]) => ({ text: `${lead}${word}${sep}${core}`, core })),
  // JWTs (three parts, or two with an empty signature).
  fc
    .tuple(credential(), credential(), fc.option(credential(), { nil: "" }))
    .map(([h, p, s]) => ({ text: `eyJ${h}.${p}.${s}`, core: `${h}.${p}` })),
  // Storage connection strings and their key parts.
  fc
    .tuple(
      fc.constantFrom("AccountKey", "accountkey", "SharedAccessKey", "SharedAccessSignature", "Password", "Pwd"),
      credential(B64),
      fc.constantFrom("==", "=", ""),
    )
    .map(([key, k, pad]) => ({
      text: `DefaultEndpointsProtocol=https;AccountName=acct;${key}=${k}${pad};EndpointSuffix=core.windows.net`,
      core: k,
    })),
  // SAS query strings.
  fc.tuple(credential(), fc.constantFrom("?", "&")).map(([sig, lead]) => ({
    text: `https://acct.blob.core.windows.net/c/b${lead === "?" ? "?" : "?sv=2024-01-01&"}sig=${encodeURIComponent(sig)}&se=2030-01-01`,
    core: encodeURIComponent(sig),
  })),
  // The product's own job-API token.
  credential().map((c) => ({ text: `bpt_${c}`, core: c })),
  // PEM private keys, whole or cut off.
  fc
    .tuple(fc.constantFrom("RSA ", "EC ", "", "OPENSSH "), credential(B64), fc.boolean())
    .map(([kind, body, ended]) => ({
      text: `-----BEGIN ${kind}PRIVATE KEY-----\n${body}\n${ended ? `-----END ${kind}PRIVATE KEY-----` : ""}`,
      core: body,
    })),
  // key=value credentials and credentials in URLs.
  fc
    .tuple(fc.constantFrom("password", "client_secret", "api_key", "ACCESS_KEY", "token"), separators, credential())
    .filter(([, sep]) => /[:=]/.test(sep))
    .map(([key, sep, core]) => ({ text: `${key}${sep}${core}`, core })),
  credential().map((c) => ({ text: `postgres://svc:${c}@db.internal:5432/blast`, core: c })),
];

/** Filler that cannot itself form a secret. */
const filler = fc.array(fc.constantFrom("job", "failed", "on", "nt", "retry", "the", "cluster", "42", "é", "✓"), {
  maxLength: 6,
});
const gap = fc.constantFrom(" ", "\n", ", ", "; ", " (", ") ", '"', "'", "|", "\t");

/** A string with the secret at a random position. */
const textWith = (planted: fc.Arbitrary<Planted>) =>
  fc.tuple(filler, gap, planted, gap, filler).map(([before, g1, p, g2, after]) => ({
    text: `${before.join(" ")}${g1}${p.text}${g2}${after.join(" ")}`,
    core: p.core,
  }));

/** A nested value with the string at a random path, and the string as a key too sometimes. */
const nested = (planted: fc.Arbitrary<Planted>) =>
  fc
    .tuple(textWith(planted), fc.array(fc.constantFrom("args", "params", "reason", "0", "details"), { maxLength: 4 }))
    .map(([{ text, core }, path]) => {
      let value: unknown = text;
      for (const key of path.reverse()) value = key === "0" ? [value, "kept"] : { [key]: value, other: 1 };
      return { value, core };
    });

describe("secret scanner", () => {
  it("C-236 C-534: no secret of any kind survives, in any form or position", () => {
    fc.assert(
      fc.property(fc.oneof(...secrets.map(nested)), ({ value, core }) => {
        const out = JSON.stringify(redactSecrets(value));
        expect(out).not.toContain(core);
        expect(out).toContain("[redacted:");
      }),
      { numRuns: 2000 },
    );
  });

  it("C-236: text sinks that rewrite text keep no secret either: the break-glass reason, a log cell (CI counterexample: `bpt_…` lost its underscore to markup stripping first)", () => {
    expect(sanitizeReason("bpt_uun9rSm-kw98tANb8FhjmN5sxxx9")).not.toContain("uun9rSm-kw98tANb8FhjmN5sxxx9");
    fc.assert(
      fc.property(fc.oneof(...secrets.map(textWith)), ({ text, core }) => {
        expect(sanitizeReason(text)).not.toContain(core);
        expect(String(redactLogCell(text))).not.toContain(core);
      }),
      { numRuns: 2000 },
    );
  });

  it("a secret-named value that starts with digits is redacted (fast-check counterexample, seed 1372510602)", () => {
    expect(redactSecrets(" password:3-AAAAAAAAAAAAAAAAAAAA0 ")).toBe(" password:[redacted:key_value] ");
    expect(redactSecrets("token: 123456 ok")).toBe("token: 123456 ok");
  });

  it("a secret used as an object key does not survive either", () => {
    fc.assert(
      fc.property(fc.oneof(...secrets), ({ text, core }) => {
        expect(JSON.stringify(redactSecrets({ [text]: 1 }))).not.toContain(core);
      }),
    );
  });

  it("keeps what is not a secret: prose about bearer tokens, ids, counts, hashes the console needs", () => {
    for (const text of [
      "basic search with defaults",
      "the bearer token is rejected when expired",
      "max_tokens=4096 token_count: 12",
      "apr_0123456789abcdef01234567",
      "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
      "action_hash=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
      "https://status.example.org/page?x=1",
    ])
      expect(scanSecrets(text), text).toEqual({ text, found: [] });
    expect(containsSecret("Bearer abc123def456")).toBe(true);
  });
});
