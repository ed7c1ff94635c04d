import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { blastOptionsSchema } from "../../shared/blast/options.js";
import { canonicalJson, requestFingerprint } from "../../shared/http/idempotency.js";

/** The canonical JSON fingerprints were computed with before: keys sorted by `localeCompare`. */
function localeCanonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(localeCanonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, field]) => field !== undefined)
    .sort(([left], [right]) => left.localeCompare(right));
  return `{${entries.map(([key, field]) => `${JSON.stringify(key)}:${localeCanonicalJson(field)}`).join(",")}}`;
}

/** The fields each fingerprint covers (shared/dashboard/dashboard-job-service.ts, jobapi/jobs/job-service.ts). */
const DASHBOARD_FIELDS = ["program", "db", "query_fasta", "options", "execution_profile", "priority"];
const JOB_API_FIELDS = [
  "program",
  "db",
  "query_fasta",
  "blast_options",
  "execution_profile",
  "resource_profile",
  "priority",
];
const OPTION_KEYS = Object.keys(blastOptionsSchema.shape);

describe("canonical JSON of request fingerprints (RFC 8785 key order)", () => {
  it("sorts keys by UTF-16 code unit where the locale's order differs: 'B' before 'a', 'z' before 'é'", () => {
    // The locale puts them the other way round: this is the difference the change is about.
    expect(["B", "a"].sort((left, right) => left.localeCompare(right))).toEqual(["a", "B"]);
    expect(["z", "é"].sort((left, right) => left.localeCompare(right))).toEqual(["é", "z"]);

    expect(canonicalJson({ a: 1, B: 2 })).toBe('{"B":2,"a":1}');
    expect(canonicalJson({ é: 1, z: 2 })).toBe('{"z":2,"é":1}');
    expect(canonicalJson({ outer: { é: [{ z: 1, B: 2 }], a: null } })).toBe('{"outer":{"a":null,"é":[{"B":2,"z":1}]}}');
  });

  it("orders the keys of RFC 8785's sorting example as the RFC does (surrogate pairs by code unit)", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    };
    const rfcOrder = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\ud83d\ude00", "\ufb33"];
    const expected = `{${rfcOrder.map((key) => `${JSON.stringify(key)}:${JSON.stringify(input[key as keyof typeof input])}`).join(",")}}`;
    expect(canonicalJson(input)).toBe(expected);
  });

  it("leaves undefined fields out and does not depend on insertion order", () => {
    expect(canonicalJson({ b: 1, a: undefined, c: [1, "x"] })).toBe('{"b":1,"c":[1,"x"]}');
    expect(requestFingerprint({ program: "blastn", db: "nt", options: { evalue: 1, dust: true } })).toBe(
      requestFingerprint({ options: { dust: true, evalue: 1 }, db: "nt", program: "blastn" }),
    );
    expect(requestFingerprint({ db: "nt" })).not.toBe(requestFingerprint({ db: "nr" }));
  });

  it("gives every request the fingerprints it had before: all keys a fingerprint covers are lower-case ASCII and '_'", () => {
    const keys = [...DASHBOARD_FIELDS, ...JOB_API_FIELDS, ...OPTION_KEYS];
    for (const key of keys) expect(key).toMatch(/^[a-z_]+$/);
    // Over these keys the two orders agree (both put '_' before letters and a prefix first)...
    const unique = [...new Set(keys)];
    expect([...unique].sort()).toEqual([...unique].sort((left, right) => left.localeCompare(right)));
    // ...so a request with every field and every option canonicalizes to the same text as before.
    const options = Object.fromEntries(OPTION_KEYS.map((key, index) => [key, index % 3 === 0 ? true : index]));
    for (const fields of [DASHBOARD_FIELDS, JOB_API_FIELDS]) {
      const request = Object.fromEntries(
        fields.map((field) => [field, field.endsWith("options") ? options : `${field} value`]),
      );
      expect(canonicalJson(request)).toBe(localeCanonicalJson(request));
      expect(requestFingerprint(request)).toBe(createHash("sha256").update(localeCanonicalJson(request)).digest("hex"));
    }
  });
});
