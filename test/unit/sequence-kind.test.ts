import { describe, expect, it } from "vitest";
import {
  detectMolecule,
  estimateBytesToCache,
  programsForQuery,
  queryProgramHint,
  sizeFromSample,
  suggestPartitions,
} from "../../shared/blast/sequence-kind.js";
import { FastaUploadCheck, UploadTooLargeError } from "../../shared/databases/fasta-upload.js";
import { PayloadTooLargeError, ValidationError } from "../../shared/errors.js";
import { dashboardSubmitSchema } from "../../shared/dashboard/schemas.js";
import { zodIssues } from "../../shared/http/validation.js";
import { EXAMPLE_QUERY } from "../../web/src/example-query.js";

const PROTEIN =
  ">sp|P69905|HBA_HUMAN Hemoglobin subunit alpha\nMVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF\nDLSHGSAQVKGHGKKVADALTNAVAHVDDMPNALSALSDLHAHKL\n";

describe("query help: nucleotide or protein, and the programs that fit (issue 23, item 6)", () => {
  it("reads the molecule from the sequence letters, not the headers; IUPAC ambiguity codes stay nucleotide", () => {
    expect(detectMolecule(EXAMPLE_QUERY)).toBe("nucl");
    expect(detectMolecule(PROTEIN)).toBe("prot");
    // A header full of protein-looking words does not make a nucleotide record protein.
    expect(detectMolecule(">EFILPQ kinase MKTAYIAKQR\nacgtacgtnnacgtRYacgtacgtacgtacgtacgt\n")).toBe("nucl");
    // A bare sequence (no header) is read too.
    expect(detectMolecule("MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ")).toBe("prot");
    expect(detectMolecule("")).toBeUndefined();
    expect(detectMolecule(">only a header\n\n")).toBeUndefined();
  });

  it("suggests blastp or tblastn for a protein under blastn, and blastn, blastx or tblastx for a nucleotide query under blastp", () => {
    expect(queryProgramHint("blastn", PROTEIN)).toEqual({
      molecule: "prot",
      programs: ["blastp", "tblastn"],
      message: "This query looks like protein — use blastp or tblastn; blastn expects a nucleotide query.",
    });
    expect(queryProgramHint("blastx", PROTEIN)?.programs).toEqual(["blastp", "tblastn"]);
    // ACGT are valid protein letters too: only the composition tells a DNA query under blastp.
    expect(queryProgramHint("blastp", EXAMPLE_QUERY)).toEqual({
      molecule: "nucl",
      programs: ["blastn", "blastx", "tblastx"],
      message: "This query looks like nucleotide — use blastn, blastx or tblastx; blastp expects a protein query.",
    });
    for (const program of ["blastn", "blastx", "tblastx"] as const)
      expect(queryProgramHint(program, EXAMPLE_QUERY)).toBeUndefined();
    for (const program of ["blastp", "tblastn"] as const) expect(queryProgramHint(program, PROTEIN)).toBeUndefined();
    expect(queryProgramHint("blastn", "")).toBeUndefined();
    expect(programsForQuery("prot")).toEqual(["blastp", "tblastn"]);
  });
});

describe("partitions suggested from the database's size and the nodes' memory (issue 23, item 5)", () => {
  const nucl = { molecule: "nucl" as const, letters: 4_000_000, sequences: 1000, headerBytes: 50_000 };

  it("estimates the bytes BLAST caches: bases packed four to a byte, residues one to a byte", () => {
    expect(estimateBytesToCache(nucl)).toBe(1_000_000 + 50_000 + 12_000);
    expect(estimateBytesToCache({ ...nucl, molecule: "prot" })).toBe(4_001_000 + 50_000 + 8000);
  });

  it("suggests none when the database fits a node, else enough partitions that each fits, between 2 and 64", () => {
    expect(suggestPartitions(nucl, 2_000_000).partitions).toBe(0);
    expect(suggestPartitions(nucl, 2_000_000).reason).toBe(
      "about 1.1 MB to cache fits in a node's 2.0 MB of usable memory: no partitions needed",
    );
    expect(suggestPartitions({ ...nucl, letters: 400, sequences: 2, headerBytes: 20 }, 180_000).reason).toBe(
      "about 144 bytes to cache fits in a node's 180 KB of usable memory: no partitions needed",
    );
    const split = suggestPartitions(nucl, 400_000);
    expect(split.partitions).toBe(3);
    expect(split.bytesToCache / split.partitions).toBeLessThanOrEqual(400_000);
    expect(split.reason).toContain("sharded");
    // Just over a node: two partitions, never one.
    expect(suggestPartitions(nucl, 1_062_000 - 1).partitions).toBe(2);
    // Never more partitions than sequences, never more than 64.
    expect(suggestPartitions({ ...nucl, sequences: 3 }, 1000).partitions).toBe(3);
    const huge = suggestPartitions(nucl, 1000);
    expect(huge.partitions).toBe(64);
    expect(huge.reason).toContain("larger nodes");
    // Unknown node memory: none, and it says why.
    expect(suggestPartitions(nucl, null)).toMatchObject({ partitions: 0 });
    expect(suggestPartitions(nucl, null).reason).toContain("not known");
  });
});

describe("the submit form's refusals read as sentences, not validator texts (issue 23, item 6)", () => {
  const base = { program: "blastn", db: "16s_rrna_demo", query_fasta: ">q\nACGT\n" };
  const messages = (body: Record<string, unknown>) => {
    const parsed = dashboardSubmitSchema.safeParse(body);
    return parsed.success ? [] : zodIssues(parsed.error, "body", body).map((i) => i.msg);
  };

  it("words an empty query, an unknown program, priority or profile, a long title and options that are not an object", () => {
    expect(messages({ ...base, query_fasta: "" })).toEqual([
      "Paste a query sequence or upload a FASTA file: the query is empty.",
    ]);
    expect(messages({ ...base, program: "blastz" })).toEqual([
      "Choose one of the programs blastn, blastp, blastx, tblastn, tblastx.",
    ]);
    expect(messages({ ...base, priority: "asap" })).toEqual([
      "Priority must be low, normal, high or urgent, or a whole number from 0 to 100.",
    ]);
    expect(messages({ ...base, execution_profile: "turbo" })).toEqual([
      "The execution profile must be standard or sharded.",
    ]);
    expect(messages({ ...base, title: "t".repeat(201) })).toEqual(["The title can be at most 200 characters long."]);
    expect(messages({ ...base, options: "fast" })).toEqual([
      'BLAST options must be an object of option names and values, such as {"evalue": 0.001}',
    ]);
    // The options' own rules keep their messages; unknown keys still name the key.
    expect(messages({ ...base, options: { evalue: -1, nope: 1 } })).toEqual([
      "evalue must be a number greater than 0 and at most 1000",
      "unknown field 'nope'",
    ]);
  });

  it("leaves no zod default text in any refusal of a field the form sends", () => {
    const bodies = [
      { ...base, query_fasta: "" },
      { ...base, query_fasta: 5 },
      { ...base, program: 5 },
      { ...base, db: "" },
      { ...base, db: 7 },
      { ...base, priority: 500 },
      { ...base, priority: 1.5 },
      { ...base, execution_profile: 1 },
      { ...base, title: 1 },
      { ...base, options: [] },
    ];
    for (const body of bodies)
      for (const msg of messages(body)) expect(msg).not.toMatch(/^(Too small|Too big|Invalid input|Invalid option)/);
  });
});

describe("the database FASTA check while it uploads (issue 23, item 5)", () => {
  const run = (type: "nucl" | "prot", parts: (string | Uint8Array)[], maxBytes = 1_000_000) => {
    const check = new FastaUploadCheck(type, maxBytes);
    for (const part of parts) check.push(typeof part === "string" ? new TextEncoder().encode(part) : part);
    return check.finish();
  };
  const refusal = (fn: () => unknown) => {
    try {
      fn();
    } catch (error) {
      if (error instanceof ValidationError) return error.issues;
      throw error;
    }
    throw new Error("not refused");
  };

  it("counts sequences, letters and header bytes across chunk boundaries that cut lines anywhere, and detects the molecule", () => {
    const text = ">s1 first\nACGTACGTNN\nACGT\r\n>s2\nAC-GT\n";
    const whole = run("nucl", [text]);
    expect(whole).toEqual({ bytes: text.length, sequences: 2, letters: 18, header_bytes: 14, detected_type: "nucl" });
    for (let cut = 1; cut < text.length; cut++)
      expect(run("nucl", [text.slice(0, cut), text.slice(cut)])).toEqual(whole);
    expect(run("prot", [PROTEIN]).detected_type).toBe("prot");
    // A nucleotide file confirmed as protein passes (the researcher chose), and says what it looks like.
    expect(run("prot", [">n\nACGTACGT\n"]).detected_type).toBe("nucl");
  });

  it("refuses what is not a FASTA: empty, no header, binary, gzip, an empty id, protein letters as nucleotide, digits, a record without letters (422 at body)", () => {
    const cases: [string, "nucl" | "prot", (string | Uint8Array)[], RegExp][] = [
      ["empty", "nucl", [], /the file is empty/],
      ["blank lines only", "nucl", ["\n\n  \n"], /no FASTA records/],
      ["not FASTA", "nucl", ["name,sequence\nq1,ACGT\n"], /line 1 is not a FASTA header/],
      ["binary", "nucl", [new Uint8Array([62, 113, 10, 0, 1, 2, 3])], /binary data \(byte 0x00 at line 2, column 1\)/],
      ["gzip", "nucl", [new Uint8Array([0x1f, 0x8b, 8, 0])], /gzip-compressed/],
      ["empty id", "nucl", ["> spaced\nACGT\n"], /empty id/],
      ["bare '>'", "nucl", [">\nACGT\n"], /empty id/],
      [
        "protein as nucleotide",
        "nucl",
        [PROTEIN],
        /invalid character 'L' at line 2, column 3: .*looks like a protein FASTA/,
      ],
      ["digits", "prot", [">p\nMKT1A\n"], /digits are not allowed/],
      ["no letters", "nucl", [">a\n\n>b\nACGT\n"], /sequence 1 \(header at line 1\) has no sequence letters/],
      [
        "last record without letters",
        "nucl",
        [">a\nACGT\n>b\n"],
        /sequence 2 \(header at line 3\) has no sequence letters/,
      ],
      ["non-ASCII header", "nucl", [">a café\nACGT\n"], /non-ASCII/],
    ];
    for (const [name, type, parts, message] of cases) {
      const issues = refusal(() => run(type, parts));
      expect(issues, name).toHaveLength(1);
      expect(issues[0]?.loc, name).toEqual(["body"]);
      expect(issues[0]?.msg, name).toMatch(message);
    }
  });

  it("refuses a file past the limit while it streams (413), whatever the framing", () => {
    const check = new FastaUploadCheck("nucl", 20);
    check.push(new TextEncoder().encode(">a\nACGTACGT\n"));
    expect(() => check.push(new TextEncoder().encode("ACGTACGTACGT\n"))).toThrow(UploadTooLargeError);
    expect(new UploadTooLargeError(20)).toBeInstanceOf(PayloadTooLargeError);
    expect(new UploadTooLargeError(20).message).toContain("upload limit of 20 bytes");
  });

  it("reads a file's size from its first MiB, exact when that is the whole file", () => {
    const text = ">a x\nACGTACGT\n>b\nACGT\n";
    expect(sizeFromSample(text, text.length)).toEqual({
      molecule: "nucl",
      letters: 12,
      sequences: 2,
      headerBytes: 8,
      exact: true,
    });
    // A 10× larger file of the same records: scaled.
    expect(sizeFromSample(text, text.length * 10)).toMatchObject({ letters: 120, sequences: 20, exact: false });
  });
});
