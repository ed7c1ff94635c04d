import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  batchQueries,
  FASTA_LIMITS,
  type FastaLimits,
  type FastaRecord,
  parseQueryFasta,
  toFasta,
} from "../../shared/blast/fasta.js";
import { QUERY_BATCH_LETTERS } from "../../shared/blast/programs.js";
import { type FieldIssue, ValidationError } from "../../shared/errors.js";
import { issuesOf } from "../support/helpers.js";

const nucl = (text: string, limits?: FastaLimits) => parseQueryFasta(text, "nucl", limits);
const prot = (text: string, limits?: FastaLimits) => parseQueryFasta(text, "prot", limits);
const only = (fn: () => unknown): FieldIssue => {
  const issues = issuesOf(fn);
  expect(issues).toHaveLength(1);
  return issues[0]!;
};

describe("parseQueryFasta: accepted input", () => {
  it("B-044 B-085: parses multi-line FASTA sent as one string with \\n between lines", () => {
    const text = [">seq1 first query", "ACGTACGT", "TTGG", ">seq2", "GGGCCC", ""].join("\n");
    expect(nucl(text)).toEqual([
      { id: "seq1", description: "first query", sequence: "ACGTACGTTTGG" },
      { id: "seq2", description: "", sequence: "GGGCCC" },
    ]);
  });

  it("accepts \\r\\n line endings exactly like \\n", () => {
    const lf = ">a desc\nACGT\nAC\n>b\nGG\n";
    expect(nucl(lf.replaceAll("\n", "\r\n"))).toEqual(nucl(lf));
    expect(nucl(">a desc\r\nACGT")).toEqual([{ id: "a", description: "desc", sequence: "ACGT" }]);
  });

  it("ignores blank and whitespace-only lines anywhere, and a missing final newline", () => {
    expect(nucl("\n\n>a\n\nAC\n   \n\t\nGT\n\n>b\nTT")).toEqual([
      { id: "a", description: "", sequence: "ACGT" },
      { id: "b", description: "", sequence: "TT" },
    ]);
  });

  it("strips whitespace inside sequence lines and upper-cases letters (case-insensitive)", () => {
    expect(nucl(">a\n ac gT\tn \r\nrY\f\v")).toEqual([{ id: "a", description: "", sequence: "ACGTNRY" }]);
    expect(prot(">p\nmkv LLa*")).toEqual([{ id: "p", description: "", sequence: "MKVLLA*" }]);
  });

  it("trims the id at the first whitespace like BLAST and keeps the rest, trimmed, as description", () => {
    expect(nucl(">gi|123|ref|X  some   description here  \nACGT")[0]).toEqual({
      id: "gi|123|ref|X",
      description: "some   description here",
      sequence: "ACGT",
    });
    expect(nucl(">id\tdesc with tab\nA")[0]).toMatchObject({ id: "id", description: "desc with tab" });
  });

  it("allows duplicate ids (queries are keyed by position, not id)", () => {
    const records = nucl(">dup one\nAAAA\n>dup two\nCCCC\n");
    expect(records.map((r) => [r.id, r.description])).toEqual([
      ["dup", "one"],
      ["dup", "two"],
    ]);
  });

  it("takes text with no header at all as one query named Query_1, as BLAST does", () => {
    expect(nucl("acgt\nACGT\n")).toEqual([{ id: "Query_1", description: "", sequence: "ACGTACGT" }]);
    expect(prot("\n  MKV\n")).toEqual([{ id: "Query_1", description: "", sequence: "MKV" }]);
  });

  it("allows whitespace-only text before the first header", () => {
    expect(nucl("\n  \r\n\t\n>a\nAC")).toEqual([{ id: "a", description: "", sequence: "AC" }]);
  });

  it("accepts every IUPAC nucleotide code in either case, and drops '-' gaps as BLAST does", () => {
    expect(nucl(">n\nACGTURYKMSWBDHVN\nacgturykmswbdhvn\nAC--GT")[0]!.sequence).toBe(
      "ACGTURYKMSWBDHVNACGTURYKMSWBDHVNACGT",
    );
  });

  it("accepts every protein code, including * U O J B Z X, and drops '-' gaps", () => {
    expect(prot(">p\nACDEFGHIKLMNPQRSTVWYBZXJUO*\nacdefghiklmnpqrstvwybzxjuo\nMK-V")[0]!.sequence).toBe(
      "ACDEFGHIKLMNPQRSTVWYBZXJUO*ACDEFGHIKLMNPQRSTVWYBZXJUOMKV",
    );
  });
});

describe("parseQueryFasta: refusals (B-238: a field failing validation is a 422)", () => {
  it("B-238: refuses empty or whitespace-only text", () => {
    for (const text of ["", "  \n\r\n\t"]) {
      expect(only(() => nucl(text))).toEqual({
        loc: ["body", "query_fasta"],
        msg: "query_fasta contains no sequences",
        type: "value_error",
      });
    }
  });

  it("B-238: refuses non-blank text before the first header, naming its line", () => {
    expect(only(() => nucl("\nACGT\n>a\nACGT\n"))).toEqual({
      loc: ["body", "query_fasta"],
      msg: "line 2: text before the first '>' header; start every sequence with a header line, or send one sequence with no header at all",
      type: "value_error",
    });
  });

  it("B-238: refuses a header with an empty id ('>' alone, or a space right after '>')", () => {
    expect(only(() => nucl(">a\nAC\n>\nACGT\n"))).toEqual({
      loc: ["body", "query_fasta", 1],
      msg: "record 2 ('>') has an empty id at line 3: the identifier must follow '>' directly, with no space",
      type: "value_error",
    });
    expect(only(() => nucl("> desc only\nACGT"))).toMatchObject({
      loc: ["body", "query_fasta", 0],
      msg: expect.stringMatching(/^record 1 \('> desc only'\) has an empty id at line 1/),
      type: "value_error",
    });
  });

  it("B-238: refuses a record with no sequence letters (header only, or gaps only)", () => {
    expect(only(() => nucl(">a\n>b\nACGT"))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 ('>a') has no sequence letters",
      type: "value_error",
    });
    expect(only(() => nucl(">a\nAC\n>gaps\n---\n- -\n"))).toEqual({
      loc: ["body", "query_fasta", 1],
      msg: "record 2 ('>gaps') has no sequence letters",
      type: "value_error",
    });
  });

  it("B-238: refuses digits in a sequence, naming record, header, line and column", () => {
    expect(only(() => nucl(">a\nACGT\n>seq2 kinase\nAC GT\n10 ACGT\n"))).toEqual({
      loc: ["body", "query_fasta", 1],
      msg: "record 2 ('>seq2 kinase') has an invalid character '1' at line 5, column 1: digits are not allowed in a sequence",
      type: "value_error",
    });
  });

  it("B-238: refuses a protein letter in a nucleotide query, listing the alphabet", () => {
    expect(only(() => nucl(">q\nACGTE\n"))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 ('>q') has an invalid character 'E' at line 2, column 5: a nucleotide sequence may contain only the IUPAC codes ACGTURYKMSWBDHVN and '-'",
      type: "value_error",
    });
    expect(only(() => nucl(">q\nAC*\n")).msg).toContain("invalid character '*'");
  });

  it("B-238: refuses characters outside the protein alphabet", () => {
    expect(only(() => prot(">p\nMKV.L\n"))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 ('>p') has an invalid character '.' at line 2, column 4: a protein sequence may contain only ACDEFGHIKLMNPQRSTVWYBZXJUO* and '-'",
      type: "value_error",
    });
    expect(only(() => prot(">p\nMK9\n")).msg).toContain("digits are not allowed");
  });

  it("reports only the first bad character of a record, and shows non-printable ones as U+XXXX", () => {
    expect(only(() => nucl(">a\nAC\u00e9X1\n")).msg).toBe(
      "record 1 ('>a') has an invalid character U+00E9 at line 2, column 3: a nucleotide sequence may contain only the IUPAC codes ACGTURYKMSWBDHVN and '-'",
    );
    expect(only(() => nucl(">a\nAC\u00a0GT\n")).msg).toContain("invalid character U+00A0 at line 2, column 3");
  });

  it("explains a '>' that is not in the first column", () => {
    expect(only(() => nucl(">a\nACGT\n  >b\nACGT\n")).msg).toBe(
      "record 1 ('>a') has an invalid character '>' at line 3, column 3: a header line must start with '>' in the first column",
    );
  });

  it("reports a bad character in header-less text as record 1 (Query_1)", () => {
    expect(only(() => nucl("ACGT\nAC1\n"))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 (no header, taken as 'Query_1') has an invalid character '1' at line 2, column 3: digits are not allowed in a sequence",
      type: "value_error",
    });
  });

  it("refuses control characters in a header (they would corrupt BLAST's XML), without echoing them", () => {
    expect(only(() => nucl(">a\u0001b\nACGT\n"))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 ('>a?b') has a control character U+0001 in its header at line 1",
      type: "value_error",
    });
    expect(only(() => nucl(">a\u007f\nACGT\n")).msg).toContain("U+007F");
    expect(only(() => nucl(">a\rb\nACGT\n")).msg).toContain("U+000D");
  });

  it("B-238 refuses a non-ASCII header (é, an emoji, a lone surrogate) with 422 naming the record: BLAST+ 2.12's XML writer fails on it", () => {
    expect(only(() => nucl(">ok\nACGT\n>caf\u00e9 x\nACGT\n"))).toEqual({
      loc: ["body", "query_fasta", 1],
      msg: "record 2 ('>caf? x') has a non-ASCII character U+00E9 in its header at line 3: BLAST+ writes only ASCII headers",
      type: "value_error",
    });
    expect(only(() => nucl(">seq \u{1F600}\nACGT\n")).msg).toContain("U+1F600");
    expect(only(() => nucl(">seq\ud800\nACGT\n")).msg).toContain("U+D800");
    // Printable ASCII and tabs stay accepted.
    expect(nucl(">a_b|c.d e\t~!@#$%^&*()\nACGT\n")[0]?.id).toBe("a_b|c.d");
  });

  it("reports one issue per bad record, in order, and keeps checking the others", () => {
    const issues = issuesOf(() => nucl(">ok\nAC\n>bad1\nA1\n>ok2\nGG\n>bad2\nAE\n>empty\n"));
    expect(issues.map((i) => i.loc)).toEqual([
      ["body", "query_fasta", 1],
      ["body", "query_fasta", 3],
      ["body", "query_fasta", 4],
    ]);
  });

  it("stops after 20 issues", () => {
    const text = Array.from({ length: 50 }, (_, i) => `>s${i}\nA1\n`).join("");
    expect(issuesOf(() => nucl(text))).toHaveLength(20);
  });

  it("throws only ValidationError for any input, including random bytes (and non-strings)", () => {
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed;
    };
    const pieces = [">", "\n", "\r\n", " ", "A", "c", "g", "-", "1", "*", "E", "\u0000", "é", ">x y", "\t"];
    for (let round = 0; round < 500; round++) {
      let text = "";
      for (let i = next() % 40; i > 0; i--) text += pieces[next() % pieces.length];
      for (const molecule of ["nucl", "prot"] as const) {
        try {
          const records = parseQueryFasta(text, molecule);
          for (const r of records) {
            expect(r.id.length).toBeGreaterThan(0);
            expect(r.sequence).toMatch(molecule === "nucl" ? /^[ACGTURYKMSWBDHVN]+$/ : /^[A-Z*]+$/);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(ValidationError);
        }
      }
    }
    expect(only(() => parseQueryFasta(42 as unknown as string, "nucl")).type).toBe("string_type");
  });
});

describe("parseQueryFasta: limits", () => {
  const small: FastaLimits = { maxBytes: 64, maxSequences: 2, maxSequenceLetters: 8, maxHeaderLength: 10 };

  it("exports the documented defaults", () => {
    expect(FASTA_LIMITS).toEqual({
      maxBytes: 10 * 1024 * 1024,
      maxSequences: 10_000,
      maxSequenceLetters: 1_000_000,
      maxHeaderLength: 1_000,
    });
  });

  it("B-238: refuses text over maxBytes, counting UTF-8 bytes, not characters", () => {
    const limits = { ...small, maxSequenceLetters: 100, maxHeaderLength: 100 };
    expect(nucl(`>a\n${"A".repeat(60)}`, limits)).toHaveLength(1); // exactly 64 bytes
    const text = `>${"é".repeat(31)}\nA`; // 34 characters, 65 bytes
    expect(text.length).toBeLessThan(limits.maxBytes);
    expect(only(() => nucl(text, limits))).toEqual({
      loc: ["body", "query_fasta"],
      msg: "query_fasta is 65 bytes; the limit is 64 bytes",
      type: "too_long",
    });
  });

  it("B-238: refuses more than maxSequences records", () => {
    expect(nucl(">a\nA\n>b\nC\n", small)).toHaveLength(2);
    expect(only(() => nucl(">a\nA\n>b\nC\n>c\nG\n", small))).toEqual({
      loc: ["body", "query_fasta"],
      msg: "query_fasta has more than 2 sequences (the limit); the header at line 5 starts sequence 3",
      type: "too_long",
    });
  });

  it("B-238: refuses a record with more than maxSequenceLetters letters (gaps and spaces not counted)", () => {
    expect(nucl(">a\nACGT AC-GT--\n", small)[0]!.sequence).toBe("ACGTACGT");
    expect(only(() => nucl(">a\nACGT\n>b\nACGTA\nCGTA\n", small))).toEqual({
      loc: ["body", "query_fasta", 1],
      msg: "record 2 ('>b') has more than 8 letters (the limit for one sequence)",
      type: "too_long",
    });
    expect(only(() => nucl("ACGTACGTA", small)).msg).toBe(
      "record 1 (no header, taken as 'Query_1') has more than 8 letters (the limit for one sequence)",
    );
  });

  it("B-238: refuses a header longer than maxHeaderLength", () => {
    expect(nucl(">abc def xy\nA", small)[0]!.id).toBe("abc");
    expect(only(() => nucl(">abc def xyz\nA", small))).toEqual({
      loc: ["body", "query_fasta", 0],
      msg: "record 1 ('>abc def xyz') has a header of 11 characters; the limit is 10",
      type: "too_long",
    });
  });

  it("enforces the default letter limit at exactly 1,000,000", () => {
    expect(nucl(`>a\n${"A".repeat(1_000_000)}`)[0]!.sequence).toHaveLength(1_000_000);
    expect(only(() => nucl(`>a\n${"A".repeat(1_000_001)}`)).msg).toBe(
      "record 1 ('>a') has more than 1,000,000 letters (the limit for one sequence)",
    );
  });

  it("quotes at most 60 characters of a long header in messages", () => {
    const msg = only(() => nucl(`>${"x".repeat(200)}\n1`)).msg;
    expect(msg).toContain(`'>${"x".repeat(60)}…'`);
  });

  // Their running time (linear) is measured in bench/parsers.ts, not here (no timing assertions in tests).
  it("parses large and adversarial inputs", () => {
    const cases = [
      // 9 sequences of 1,000,000 letters in 60-letter lines (~9.2 MB).
      Array.from({ length: 9 }, (_, i) => `>s${i}\n${"ACGTN".repeat(200_000).replace(/(.{60})/g, "$1\n")}`).join("\n"),
      // 10,000 records (the limit) with short sequences.
      Array.from({ length: 10_000 }, (_, i) => `>s${i} d\nACGT\n`).join(""),
      // Megabytes of whitespace-only lines and spaces inside lines.
      `>a\n${" \n".repeat(2_000_000)}A`,
      `>a\n${"A  \t".repeat(900_000)}`,
    ];
    for (const text of cases) expect(nucl(text).length).toBeGreaterThan(0);
  });
});

describe("toFasta", () => {
  const records: FastaRecord[] = [
    { id: "a", description: "first one", sequence: "ACGTACGTAC" },
    { id: "b", description: "", sequence: "GG" },
  ];

  it("renders '>id description' (just '>id' without a description) and wraps sequence lines", () => {
    expect(toFasta(records, 4)).toBe(">a first one\nACGT\nACGT\nAC\n>b\nGG\n");
    expect(toFasta([])).toBe("");
  });

  it("wraps at 80 letters by default", () => {
    const text = toFasta([{ id: "x", description: "", sequence: "A".repeat(170) }]);
    expect(text.split("\n").map((l) => l.length)).toEqual([2, 80, 80, 10, 0]);
  });

  it("round-trips through parseQueryFasta", () => {
    const parsed = nucl(">a first one\nac gt\r\nACGTAC\n\n>b\nG-G\n");
    expect(parsed).toEqual(records);
    expect(nucl(toFasta(parsed, 3))).toEqual(parsed);
  });

  it("refuses a non-positive or fractional line width (a programming error, not user input)", () => {
    expect(() => toFasta(records, 0)).toThrow(RangeError);
    expect(() => toFasta(records, 1.5)).toThrow(RangeError);
  });
});

describe("batchQueries", () => {
  const rec = (id: string, letters: number): FastaRecord => ({ id, description: "", sequence: "A".repeat(letters) });
  const shape = (batches: ReturnType<typeof batchQueries>) =>
    batches.map((b) => ({
      index: b.index,
      first: b.firstQueryIndex,
      ids: b.records.map((r) => r.id),
      letters: b.letters,
    }));

  it("groups consecutive queries up to maxLetters, in order, with 0-based batch and query indexes", () => {
    const input = [rec("q0", 4), rec("q1", 3), rec("q2", 3), rec("q3", 10), rec("q4", 1)];
    expect(shape(batchQueries(input, 10))).toEqual([
      { index: 0, first: 0, ids: ["q0", "q1", "q2"], letters: 10 },
      { index: 1, first: 3, ids: ["q3"], letters: 10 },
      { index: 2, first: 4, ids: ["q4"], letters: 1 },
    ]);
  });

  it("never splits a sequence; one longer than maxLetters forms its own batch", () => {
    const input = [rec("a", 2), rec("long", 25), rec("b", 2), rec("c", 2)];
    expect(shape(batchQueries(input, 5))).toEqual([
      { index: 0, first: 0, ids: ["a"], letters: 2 },
      { index: 1, first: 1, ids: ["long"], letters: 25 },
      { index: 2, first: 2, ids: ["b", "c"], letters: 4 },
    ]);
    expect(shape(batchQueries([rec("long", 9)], 5))).toEqual([{ index: 0, first: 0, ids: ["long"], letters: 9 }]);
  });

  it("keeps every query exactly once, so (batch, query index) recovers each query's position", () => {
    const input = Array.from({ length: 200 }, (_, i) => rec(`q${i}`, 1 + ((i * 37) % 23)));
    const batches = batchQueries(input, 50);
    expect(batches.flatMap((b) => b.records)).toEqual(input);
    for (const b of batches) {
      expect(b.letters).toBe(b.records.reduce((n, r) => n + r.sequence.length, 0));
      b.records.forEach((r, k) => {
        expect(input[b.firstQueryIndex + k]).toBe(r);
      });
      if (b.records.length > 1) expect(b.letters).toBeLessThanOrEqual(50);
    }
    expect(batches.map((b) => b.index)).toEqual(batches.map((_, i) => i));
  });

  it("returns no batches for no queries, and uses the per-program defaults", () => {
    expect(batchQueries([], 10)).toEqual([]);
    const proteins = Array.from({ length: 5 }, (_, i) => rec(`p${i}`, 3_000));
    expect(batchQueries(proteins, QUERY_BATCH_LETTERS.blastp).map((b) => b.records.length)).toEqual([3, 2]);
  });

  it("refuses a non-positive maxLetters (a programming error)", () => {
    expect(() => batchQueries([rec("a", 1)], 0)).toThrow(RangeError);
  });
});

describe("parsed queries against real BLAST+ 2.12", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "blastplane-fasta-"));
    writeFileSync(path.join(dir, "db.fa"), ">s1\nACGTTGCAACGTAGCTAGCTAGGCTAGCATCGATCGATCGTAGCTAGCTAGCATCGATCGAT\n");
    execFileSync("makeblastdb", ["-in", path.join(dir, "db.fa"), "-dbtype", "nucl", "-out", path.join(dir, "db")], {
      stdio: "pipe",
    });
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = (fasta: string): string => {
    const query = path.join(dir, "q.fa");
    const out = path.join(dir, "out.xml");
    writeFileSync(query, fasta);
    execFileSync("blastn", ["-outfmt", "5", "-query", query, "-db", path.join(dir, "db"), "-out", out], {
      stdio: "pipe",
    });
    return readFileSync(out, "utf8");
  };

  it("B-044: BLAST runs one iteration per parsed record, with the id and description we parsed", () => {
    const records = nucl(">q1 first\r\nacgttgcaac gtagctagct\n\n>q1 again\nAG-CTAGCATCGATCG\n>q3\nTAGCTAGCATCG\n");
    const xml = run(toFasta(records));
    expect(xml.match(/<Iteration>/g)).toHaveLength(3);
    expect([...xml.matchAll(/<Iteration_query-def>(.*)<\/Iteration_query-def>/g)].map((m) => m[1])).toEqual([
      "q1 first",
      "q1 again",
      "q3",
    ]);
    expect([...xml.matchAll(/<Iteration_query-len>(\d+)</g)].map((m) => Number(m[1]))).toEqual(
      records.map((r) => r.sequence.length),
    );
  });

  it("agrees with BLAST that a header-less sequence is Query_1", () => {
    const records = nucl("ACGTTGCAACGTAGCTAGCTAGG\n");
    expect(records[0]!.id).toBe("Query_1");
    expect(run("ACGTTGCAACGTAGCTAGCTAGG\n")).toContain("<Iteration_query-ID>Query_1</Iteration_query-ID>");
  });

  it("refuses a gaps-only record because BLAST fails the whole run on one", () => {
    expect(() => run(">a\n-----\n>b\nACGTTGCAACGTAG\n")).toThrow();
    expect(only(() => nucl(">a\n-----\n>b\nACGTTGCAACGTAG\n")).msg).toBe("record 1 ('>a') has no sequence letters");
  });
});
