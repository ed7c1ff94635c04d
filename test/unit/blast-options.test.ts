import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseQueryFasta, toFasta } from "../../shared/blast/fasta.js";
import {
  BLAST_TASKS,
  type BlastOptions,
  blastOptionsSchema,
  facadeOptionsSchema,
  GENETIC_CODES,
  parseBlastOptions,
  SCORING_MATRICES,
  toBlastArgs,
  validateOptionsForProgram,
} from "../../shared/blast/options.js";
import {
  BLAST_PROGRAMS,
  type BlastProgram,
  databaseMolecule,
  isBlastProgram,
  QUERY_BATCH_LETTERS,
  queryMolecule,
} from "../../shared/blast/programs.js";
import { ValidationError } from "../../shared/errors.js";
import { issuesOf, prng } from "../support/helpers.js";

/** Issues for raw options parsed for `program` (schema, then program rules). */
const refuse = (program: BlastProgram, raw: unknown) => issuesOf(() => parseBlastOptions(program, raw));
const accepts = (program: BlastProgram, options: BlastOptions): boolean => {
  try {
    validateOptionsForProgram(program, options);
    return true;
  } catch (error) {
    if (error instanceof ValidationError) return false;
    throw error;
  }
};

describe("programs", () => {
  it("B-040: lists the five search programs; blastn (a nucleotide program) is one", () => {
    expect(BLAST_PROGRAMS).toEqual(["blastn", "blastp", "blastx", "tblastn", "tblastx"]);
    expect(isBlastProgram("blastn")).toBe(true);
    for (const bad of ["BLASTN", "megablast", "psiblast", "blastn ", 5, null]) expect(isBlastProgram(bad)).toBe(false);
  });

  it("maps each program to its query and database molecule", () => {
    const table = BLAST_PROGRAMS.map((p) => [p, queryMolecule(p), databaseMolecule(p)]);
    expect(table).toEqual([
      ["blastn", "nucl", "nucl"],
      ["blastp", "prot", "prot"],
      ["blastx", "nucl", "prot"],
      ["tblastn", "prot", "nucl"],
      ["tblastx", "nucl", "nucl"],
    ]);
  });

  it("uses ElasticBLAST's query batch sizes (tblastx: ElasticBLAST's 100,000)", () => {
    expect(QUERY_BATCH_LETTERS).toEqual({
      blastn: 5_000_000,
      blastp: 10_000,
      blastx: 20_004,
      tblastn: 20_000,
      tblastx: 100_000,
    });
  });
});

describe("blastOptionsSchema: keys, types and ranges", () => {
  it("B-046 B-086: options are optional; absent or empty options produce no arguments", () => {
    expect(parseBlastOptions("blastn", undefined)).toEqual({});
    expect(parseBlastOptions("blastp", {})).toEqual({});
    expect(toBlastArgs("blastx", {})).toEqual([]);
  });

  it("B-047 B-048 B-049: accepts evalue (number), max_target_seqs (integer) and outfmt (string)", () => {
    expect(parseBlastOptions("blastn", { evalue: 1e-5, max_target_seqs: 10, outfmt: "5" })).toEqual({
      evalue: 1e-5,
      max_target_seqs: 10,
      outfmt: "xml",
    });
  });

  it("B-087: the facade options accept outfmt (integer), word_size, dust, evalue, max_target_seqs", () => {
    expect(facadeOptionsSchema).toBe(blastOptionsSchema);
    const options = { outfmt: 5, word_size: 11, dust: true, evalue: 0.001, max_target_seqs: 10 };
    expect(parseBlastOptions("blastn", options, "options")).toEqual({ ...options, outfmt: "xml" });
  });

  it("normalises every accepted outfmt spelling", () => {
    const cases: [unknown, string][] = [
      [5, "xml"],
      ["5", "xml"],
      ["xml", "xml"],
      [6, "tabular"],
      ["6", "tabular"],
      ["tabular", "tabular"],
      [7, "tabular_commented"],
      ["7", "tabular_commented"],
      ["tabular_commented", "tabular_commented"],
    ];
    for (const [input, output] of cases) expect(blastOptionsSchema.parse({ outfmt: input }).outfmt).toBe(output);
  });

  it("B-238: refuses any other outfmt as a 422 enum issue", () => {
    for (const bad of [0, 1, 4, 8, 11, "0", "XML", " 5", "5 6", 5.5, true, null, [5]]) {
      expect(refuse("blastn", { outfmt: bad })).toEqual([
        {
          loc: ["body", "blast_options", "outfmt"],
          msg: 'outfmt must be 5, 6 or 7 (integer or string), "xml", "tabular" or "tabular_commented"',
          type: "enum",
        },
      ]);
    }
  });

  it("B-238: refuses an unknown key as extra_forbidden naming the key (no pass-through)", () => {
    const raw = JSON.parse('{"evalue": 1, "outfmt": 5, "query": "/etc/passwd", "-out": "x", "__proto__": {}}');
    expect(refuse("blastn", raw)).toEqual([
      { loc: ["body", "blast_options", "query"], msg: "unknown field 'query'", type: "extra_forbidden" },
      { loc: ["body", "blast_options", "-out"], msg: "unknown field '-out'", type: "extra_forbidden" },
      { loc: ["body", "blast_options", "__proto__"], msg: "unknown field '__proto__'", type: "extra_forbidden" },
    ]);
    for (const key of ["db", "out", "num_threads", "subject", "import_search_strategy", "num_descriptions", "remote"]) {
      expect(refuse("blastn", { [key]: 1 })[0]).toMatchObject({
        loc: ["body", "blast_options", key],
        type: "extra_forbidden",
      });
    }
  });

  it("B-238: puts facade issues under body.options", () => {
    expect(issuesOf(() => parseBlastOptions("blastn", { nope: 1 }, "options"))[0]!.loc).toEqual([
      "body",
      "options",
      "nope",
    ]);
    expect(issuesOf(() => parseBlastOptions("blastp", { dust: true }, "options"))[0]!.loc).toEqual([
      "body",
      "options",
      "dust",
    ]);
  });

  it("B-238: refuses options that are not an object", () => {
    for (const bad of [[], "evalue=1", 5, true]) {
      expect(refuse("blastn", bad)).toEqual([
        { loc: ["body", "blast_options"], msg: expect.any(String), type: "object_type" },
      ]);
    }
  });

  // key → [accepted values, [refused value, expected type][]]
  const ranges: Record<string, [unknown[], [unknown, string][]]> = {
    evalue: [
      [1e-300, 5e-324, 0.5, 10, 1000],
      [
        [0, "greater_than_equal"],
        [-1, "greater_than_equal"],
        [1000.5, "less_than_equal"],
        ["1e-5", "number_type"],
        [null, "number_type"],
      ],
    ],
    max_target_seqs: [
      [1, 500, 5000],
      [
        [0, "greater_than_equal"],
        [5001, "less_than_equal"],
        [1.5, "int_type"],
        ["10", "number_type"],
      ],
    ],
    num_alignments: [
      [1, 5000],
      [
        [0, "greater_than_equal"],
        [5001, "less_than_equal"],
        [2.5, "int_type"],
      ],
    ],
    word_size: [
      [2, 11, 1000],
      [
        [1, "greater_than_equal"],
        [1001, "less_than_equal"],
        [11.5, "int_type"],
      ],
    ],
    dust: [
      [true, false],
      [
        ["yes", "boolean_type"],
        [1, "boolean_type"],
      ],
    ],
    task: [
      ["megablast", "blastp-fast", "tblastn-fast"],
      [
        ["rmblastn", "enum"],
        ["BLASTN", "enum"],
        [1, "enum"],
      ],
    ],
    perc_identity: [
      [0, 50.5, 100],
      [
        [-0.1, "greater_than_equal"],
        [100.1, "less_than_equal"],
      ],
    ],
    qcov_hsp_perc: [
      [0, 100],
      [
        [-1, "greater_than_equal"],
        [101, "less_than_equal"],
      ],
    ],
    gapopen: [
      [0, 100],
      [
        [-1, "greater_than_equal"],
        [101, "less_than_equal"],
        [1.5, "int_type"],
      ],
    ],
    gapextend: [
      [0, 100],
      [
        [-1, "greater_than_equal"],
        [101, "less_than_equal"],
      ],
    ],
    matrix: [
      ["BLOSUM62", "pam30"],
      [
        ["BLOSUM100", "enum"],
        ["", "enum"],
        [62, "string_type"],
      ],
    ],
    soft_masking: [[true, false], [["true", "boolean_type"]]],
    ungapped: [[true, false], [[0, "boolean_type"]]],
    comp_based_stats: [
      [0, 1, 2, 3],
      [
        [4, "less_than_equal"],
        [-1, "greater_than_equal"],
        ["D", "number_type"],
      ],
    ],
    seg: [[true, false], [["no", "boolean_type"]]],
    window_size: [
      [0, 40, 1000],
      [
        [-1, "greater_than_equal"],
        [1001, "less_than_equal"],
      ],
    ],
    max_hsps: [
      [1, 1000],
      [
        [0, "greater_than_equal"],
        [1001, "less_than_equal"],
      ],
    ],
    strand: [
      ["both", "plus", "minus"],
      [
        ["forward", "enum"],
        ["PLUS", "enum"],
      ],
    ],
    threshold: [
      [0.5, 11, 1000],
      [
        [0, "greater_than_equal"],
        [1001, "less_than_equal"],
      ],
    ],
    query_gencode: [
      [1, 6, 9, 33],
      [
        [7, "enum"],
        [0, "enum"],
        [34, "enum"],
        ["1", "enum"],
      ],
    ],
    db_gencode: [
      [1, 11, 31],
      [
        [8, "enum"],
        [32, "enum"],
      ],
    ],
  };

  it("covers every key of the schema in the range table below", () => {
    expect(Object.keys(ranges).sort()).toEqual(
      Object.keys(blastOptionsSchema.shape)
        .filter((k) => k !== "outfmt")
        .sort(),
    );
  });

  for (const [key, [good, bad]] of Object.entries(ranges)) {
    it(`B-238: ${key}: accepts ${good.map((v) => JSON.stringify(v)).join(", ")}; refuses out-of-range and mistyped values`, () => {
      for (const value of good) expect(blastOptionsSchema.safeParse({ [key]: value }).success).toBe(true);
      for (const [value, type] of bad) {
        const issues = issuesOf(() => parseBlastOptions("blastn", { [key]: value }));
        expect(issues[0]).toEqual({ loc: ["body", "blast_options", key], msg: expect.stringContaining(key), type });
      }
    });
  }

  it("normalises matrix to upper case", () => {
    expect(parseBlastOptions("blastp", { matrix: "blosum45" })).toEqual({ matrix: "BLOSUM45" });
    expect(parseBlastOptions("tblastx", { matrix: "Pam250" })).toEqual({ matrix: "PAM250" });
  });

  it("lists the matrices, tasks and genetic codes BLAST+ 2.12 documents", () => {
    expect(SCORING_MATRICES).toEqual([
      "BLOSUM45",
      "BLOSUM50",
      "BLOSUM62",
      "BLOSUM80",
      "BLOSUM90",
      "PAM30",
      "PAM70",
      "PAM250",
    ]);
    expect(BLAST_TASKS).toEqual({
      blastn: ["megablast", "blastn", "blastn-short", "dc-megablast"],
      blastp: ["blastp", "blastp-short", "blastp-fast"],
      blastx: ["blastx", "blastx-fast"],
      tblastn: ["tblastn", "tblastn-fast"],
      tblastx: [],
    });
    expect(GENETIC_CODES).toHaveLength(26);
  });
});

describe("validateOptionsForProgram", () => {
  const applies: Record<string, readonly BlastProgram[]> = {
    dust: ["blastn"],
    perc_identity: ["blastn"],
    matrix: ["blastp", "blastx", "tblastn", "tblastx"],
    threshold: ["blastp", "blastx", "tblastn", "tblastx"],
    seg: ["blastp", "blastx", "tblastn", "tblastx"],
    comp_based_stats: ["blastp", "blastx", "tblastn"],
    task: ["blastn", "blastp", "blastx", "tblastn"],
    gapopen: ["blastn", "blastp", "blastx", "tblastn"],
    gapextend: ["blastn", "blastp", "blastx", "tblastn"],
    ungapped: ["blastn", "blastp", "blastx", "tblastn"],
    strand: ["blastn", "blastx", "tblastx"],
    query_gencode: ["blastx", "tblastx"],
    db_gencode: ["tblastn", "tblastx"],
  };
  const sample: Record<string, unknown> = {
    dust: true,
    perc_identity: 90,
    matrix: "BLOSUM62",
    threshold: 11,
    seg: true,
    comp_based_stats: 2,
    task: "megablast",
    gapopen: 11,
    gapextend: 1,
    ungapped: false,
    strand: "plus",
    query_gencode: 2,
    db_gencode: 2,
  };

  it("B-238: refuses an option the program does not have, as not_applicable naming the programs it applies to", () => {
    expect(refuse("blastp", { dust: true })).toEqual([
      {
        loc: ["body", "blast_options", "dust"],
        msg: "dust does not apply to blastp; it applies to blastn",
        type: "not_applicable",
      },
    ]);
    expect(refuse("blastn", { matrix: "BLOSUM62" })).toEqual([
      {
        loc: ["body", "blast_options", "matrix"],
        msg: "matrix does not apply to blastn; it applies to blastp, blastx, tblastn, tblastx",
        type: "not_applicable",
      },
    ]);
    expect(refuse("tblastx", { task: "megablast" })).toEqual([
      {
        loc: ["body", "blast_options", "task"],
        msg: "task does not apply to tblastx; tblastx has no tasks",
        type: "not_applicable",
      },
    ]);
    for (const [key, programs] of Object.entries(applies)) {
      for (const program of BLAST_PROGRAMS) {
        const options = blastOptionsSchema.parse({ [key]: sample[key] });
        const notApplicable = (() => {
          try {
            validateOptionsForProgram(program, options);
            return false;
          } catch (error) {
            return (error as ValidationError).issues.some((i) => i.type === "not_applicable" && i.loc[2] === key);
          }
        })();
        expect([key, program, notApplicable]).toEqual([key, program, !programs.includes(program)]);
      }
    }
  });

  it("B-238: refuses a task of another program as enum, listing the program's tasks", () => {
    expect(refuse("blastn", { task: "blastp" })).toEqual([
      {
        loc: ["body", "blast_options", "task"],
        msg: "task 'blastp' is not a blastn task; blastn accepts megablast, blastn, blastn-short, dc-megablast",
        type: "enum",
      },
    ]);
    expect(refuse("blastx", { task: "tblastn-fast" })[0]!.msg).toBe(
      "task 'tblastn-fast' is not a blastx task; blastx accepts blastx, blastx-fast",
    );
    for (const program of BLAST_PROGRAMS) {
      for (const task of BLAST_TASKS[program]) expect(accepts(program, { task })).toBe(true);
    }
  });

  it("B-238: checks word_size per program and task (blastn ≥ 4, dc-megablast 11|12, protein 2–7, tblastx 2–5)", () => {
    expect(refuse("blastn", { word_size: 3 })).toEqual([
      {
        loc: ["body", "blast_options", "word_size"],
        msg: "word_size must be at least 4 for blastn, got 3",
        type: "greater_than_equal",
      },
    ]);
    expect(refuse("blastn", { task: "dc-megablast", word_size: 16 })).toEqual([
      {
        loc: ["body", "blast_options", "word_size"],
        msg: "word_size must be 11 or 12 for task dc-megablast",
        type: "value_error",
      },
    ]);
    expect(refuse("blastp", { word_size: 8 })).toEqual([
      {
        loc: ["body", "blast_options", "word_size"],
        msg: "word_size must be from 2 to 7 for blastp, got 8",
        type: "less_than_equal",
      },
    ]);
    expect(refuse("tblastx", { word_size: 6 })[0]!.msg).toBe("word_size must be from 2 to 5 for tblastx, got 6");
    expect(accepts("blastn", { word_size: 4 })).toBe(true);
    expect(accepts("blastn", { word_size: 1000 })).toBe(true);
    expect(accepts("blastx", { word_size: 7 })).toBe(true);
    expect(accepts("tblastn", { word_size: 2 })).toBe(true);
    expect(accepts("tblastx", { word_size: 5 })).toBe(true);
  });

  it("B-238: refuses max_target_seqs together with num_alignments (BLAST refuses the pair)", () => {
    expect(refuse("blastn", { max_target_seqs: 10, num_alignments: 10 })).toEqual([
      {
        loc: ["body", "blast_options", "num_alignments"],
        msg: "num_alignments cannot be combined with max_target_seqs (BLAST refuses the pair); in the XML report both limit the hits kept per query, so give only max_target_seqs",
        type: "value_error",
      },
    ]);
    expect(accepts("blastn", { num_alignments: 10 })).toBe(true);
  });

  it("B-238: refuses gap costs and composition-based statistics 1–3 on an ungapped search", () => {
    expect(refuse("blastn", { ungapped: true, gapopen: 5, gapextend: 2 })).toEqual([
      {
        loc: ["body", "blast_options", "gapopen"],
        msg: "gapopen has no effect on an ungapped search; remove it or set ungapped to false",
        type: "value_error",
      },
      {
        loc: ["body", "blast_options", "gapextend"],
        msg: "gapextend has no effect on an ungapped search; remove it or set ungapped to false",
        type: "value_error",
      },
    ]);
    expect(refuse("blastp", { ungapped: true, comp_based_stats: 2 })).toEqual([
      {
        loc: ["body", "blast_options", "comp_based_stats"],
        msg: "comp_based_stats must be 0 (or absent) for an ungapped search; BLAST supports composition-based statistics only for gapped searches",
        type: "value_error",
      },
    ]);
    expect(accepts("tblastn", { ungapped: true, comp_based_stats: 0 })).toBe(true);
  });

  it("B-238: refuses a gap-cost pair the matrix does not support, filling the other from the defaults", () => {
    expect(refuse("blastp", { gapopen: 12, gapextend: 2 })).toEqual([
      {
        loc: ["body", "blast_options", "gapopen"],
        msg: "gapopen 12 with gapextend 2 is not supported for blastp matrix BLOSUM62; supported gapopen/gapextend: 11/2, 10/2, 9/2, 8/2, 7/2, 6/2, 13/1, 12/1, 11/1, 10/1, 9/1",
        type: "value_error",
      },
    ]);
    // BLOSUM45 defaults to 14/2, so gapopen 13 alone means 13/2 (supported) and gapextend 3 alone 14/3 (not).
    expect(accepts("blastp", { matrix: "BLOSUM45", gapopen: 13 })).toBe(true);
    expect(refuse("blastp", { matrix: "BLOSUM45", gapextend: 3 })[0]).toMatchObject({
      loc: ["body", "blast_options", "gapextend"],
      msg: expect.stringContaining("gapopen 14 with gapextend 3 is not supported for blastp matrix BLOSUM45"),
    });
    // blastp-short defaults to PAM30 (9/1): gapopen 11 alone is 11/1, which PAM30 lacks.
    expect(refuse("blastp", { task: "blastp-short", gapopen: 11 })[0]!.msg).toContain("matrix PAM30");
    expect(accepts("blastx", { matrix: "PAM70", gapopen: 12, gapextend: 3 })).toBe(true);
  });

  it("B-238: refuses nucleotide gap costs the task's reward/penalty does not support", () => {
    expect(refuse("blastn", { task: "blastn", gapopen: 7, gapextend: 3 })).toEqual([
      {
        loc: ["body", "blast_options", "gapopen"],
        msg: "gapopen 7 with gapextend 3 is not supported for blastn task blastn (reward 2, penalty -3); supported gapopen/gapextend: 0/4, 2/2, 2/4, 3/3, 4/2, 4/4, 5/2, 6/2, or gapopen ≥ 6 with gapextend ≥ 4",
        type: "value_error",
      },
    ]);
    expect(accepts("blastn", { gapopen: 7, gapextend: 3 })).toBe(true); // megablast
    expect(accepts("blastn", { gapopen: 0, gapextend: 0 })).toBe(true); // megablast's linear default
    expect(accepts("blastn", { task: "blastn-short", gapopen: 0, gapextend: 0 })).toBe(false);
  });

  it("reports every problem at once", () => {
    const issues = refuse("blastp", { dust: true, perc_identity: 5, task: "megablast", word_size: 9 });
    expect(issues.map((i) => [i.loc[2], i.type])).toEqual([
      ["dust", "not_applicable"],
      ["perc_identity", "not_applicable"],
      ["task", "enum"],
    ]);
  });
});

describe("toBlastArgs", () => {
  it("maps each key to its fixed flag and renders every value itself, in a fixed order", () => {
    const options = parseBlastOptions("blastn", {
      outfmt: 5,
      strand: "plus",
      soft_masking: false,
      dust: false,
      evalue: 1e-5,
      task: "blastn",
      word_size: 11,
      gapopen: 5,
      gapextend: 2,
      perc_identity: 97.5,
      qcov_hsp_perc: 50,
      max_hsps: 1,
      window_size: 0,
      max_target_seqs: 10,
    });
    expect(toBlastArgs("blastn", options)).toEqual([
      "-task",
      "blastn",
      "-evalue",
      "0.00001",
      "-max_target_seqs",
      "10",
      "-word_size",
      "11",
      "-gapopen",
      "5",
      "-gapextend",
      "2",
      "-window_size",
      "0",
      "-dust",
      "no",
      "-soft_masking",
      "false",
      "-perc_identity",
      "97.5",
      "-qcov_hsp_perc",
      "50",
      "-max_hsps",
      "1",
      "-strand",
      "plus",
    ]);
    expect(
      toBlastArgs("tblastx", {
        matrix: "PAM30",
        seg: true,
        soft_masking: true,
        query_gencode: 2,
        db_gencode: 11,
        threshold: 12.5,
      }),
    ).toEqual([
      "-matrix",
      "PAM30",
      "-threshold",
      "12.5",
      "-seg",
      "yes",
      "-soft_masking",
      "true",
      "-query_gencode",
      "2",
      "-db_gencode",
      "11",
    ]);
  });

  it("emits ungapped as a bare flag, adds -comp_based_stats 0 where BLAST needs it, omits ungapped=false", () => {
    expect(toBlastArgs("blastp", { ungapped: true })).toEqual(["-ungapped", "-comp_based_stats", "0"]);
    expect(toBlastArgs("blastp", { ungapped: true, comp_based_stats: 0 })).toEqual([
      "-ungapped",
      "-comp_based_stats",
      "0",
    ]);
    expect(toBlastArgs("blastn", { ungapped: true })).toEqual(["-ungapped"]);
    expect(toBlastArgs("blastp", { ungapped: false, comp_based_stats: 3 })).toEqual(["-comp_based_stats", "3"]);
  });

  it("never emits -outfmt, -query, -db or -out (the executor owns them): shards always run as XML", () => {
    for (const outfmt of [5, 6, 7, "tabular"] as const) {
      const args = toBlastArgs("blastn", parseBlastOptions("blastn", { outfmt, evalue: 1 }));
      expect(args).toEqual(["-evalue", "1"]);
    }
  });

  it("B-238: re-validates its input, so an object that skipped the schema cannot smuggle a value in", () => {
    const smuggled = [
      { task: "blastn -out /tmp/x" },
      { matrix: "BLOSUM62; rm -rf /" },
      { evalue: "1 -remote" },
      { strand: "plus\n-out" },
      { outfmt: "11" },
      { num_threads: 64 },
      { evalue: Number.POSITIVE_INFINITY },
      { word_size: Number.NaN },
    ];
    for (const options of smuggled) {
      expect(() => toBlastArgs("blastn", options as unknown as BlastOptions)).toThrow(ValidationError);
    }
    expect(() => toBlastArgs("blastp", { dust: true })).toThrow(ValidationError);
  });

  it("renders only validated enum members and numbers: every value is a flag or matches a safe pattern", () => {
    const options = parseBlastOptions("blastp", {
      task: "blastp-short",
      matrix: "pam30",
      evalue: 2e-10,
      word_size: 2,
      comp_based_stats: 1,
      seg: false,
      window_size: 15,
    });
    const args = toBlastArgs("blastp", options);
    expect(args).toContain("PAM30");
    for (const arg of args) expect(arg).toMatch(/^(-[a-z_]+|[A-Za-z0-9.+-]+)$/);
  });
});

// ---------------------------------------------------------------------------------------------
// Real BLAST+ 2.12: every flag we emit is one BLAST accepts, and our refusals match BLAST's.
//
// The gap-cost grids and the word_size cells: BLAST's own verdict on each cell (does it run with
// that gapopen/gapextend, that word_size?) is recorded in the tables below, and our verdict is
// checked against the table on every cell (~750 cells, no process). BLAST itself then runs on a
// seeded sample and must give the recorded verdict (= ours) on each cell of it: in every task or
// matrix (for word_size, every program), `BLAST_GRID_SAMPLE` (0.2 in `npm test`) of the cells
// BLAST accepts and of those it refuses, at least one of each (for the matrices, drawn from the
// pairs BLAST accepts and the spread of probes, the ~300 cells this test ran BLAST on before it
// sampled). A run costs ~0.2 CPU-s, nearly all of it BLAST's process start; a protein word of 7
// (tblastx: 5) costs seconds more, for its lookup table.
// `BLAST_GRID_SEED` replays a run's sample (the test titles name it; a fresh one each run, so runs
// cover different cells). `BLAST_GRID_SAMPLE=1` runs BLAST on every cell of the grids and prints
// its verdicts in the tables' format: the way to re-record them (e.g. after a BLAST+ upgrade).
// ---------------------------------------------------------------------------------------------

const GRID_SAMPLE = Math.min(1, Math.max(0, Number(process.env.BLAST_GRID_SAMPLE ?? 0.2)));
const GRID_SEED = Number(process.env.BLAST_GRID_SEED ?? Date.now() % 1_000_000);
/** The sampled grids run ~40 BLAST processes each; every cell, ~170 and ~540 (the word_size cells: ~12 of 44). */
const GRID_TIMEOUT = GRID_SAMPLE === 1 ? 1_800_000 : 120_000;
const sampleWords = GRID_SAMPLE === 1 ? "every cell" : `a ${GRID_SAMPLE} sample (by verdict, per task or matrix)`;

/** The gap-cost pairs BLAST+ 2.12 ran with, per blastn task, among 0–7 × 0–4, 20/1 and 100/100 (recorded, BLAST_GRID_SAMPLE=1). */
const NUCLEOTIDE_GAP_GRID = {
  megablast: {
    accepted: "0/0 0/2 1/1 1/2 2/1 2/2 2/3 2/4 3/1 3/2 3/3 3/4 4/2 4/3 4/4 5/2 5/3 5/4 6/2 6/3 6/4 7/2 7/3 7/4 100/100",
  },
  blastn: { accepted: "0/4 2/2 2/4 3/3 4/2 4/4 5/2 6/2 6/4 7/4 100/100" },
  "blastn-short": {
    accepted: "0/2 1/1 1/2 2/1 2/2 2/3 2/4 3/2 3/3 3/4 4/2 4/3 4/4 5/2 5/3 5/4 6/2 6/3 6/4 7/2 7/3 7/4 100/100",
  },
  "dc-megablast": { accepted: "0/4 2/2 2/4 3/3 4/2 4/4 5/2 6/2 6/4 7/4 100/100" },
};

/** The gap-cost pairs blastp (BLAST+ 2.12) ran with, per matrix, among 5–25 × 1–3 and the spread of probes (recorded, BLAST_GRID_SAMPLE=1). */
const PROTEIN_GAP_GRID = {
  BLOSUM45: { accepted: "12/2 10/3 11/3 12/3 13/2 13/3 14/2 15/2 16/1 16/2 17/1 18/1 19/1" },
  BLOSUM50: { accepted: "12/2 9/3 10/3 11/3 12/3 13/2 13/3 14/2 15/1 15/2 16/1 16/2 17/1 18/1 19/1" },
  BLOSUM62: { accepted: "6/2 7/2 8/2 9/1 9/2 10/1 10/2 11/1 11/2 12/1 13/1" },
  BLOSUM80: { accepted: "25/2 6/2 7/2 8/2 9/1 9/2 10/1 11/1 13/2" },
  BLOSUM90: { accepted: "6/2 7/2 8/2 9/1 9/2 10/1 11/1" },
  PAM30: { accepted: "8/1 5/2 6/2 7/2 9/1 10/1 13/3 14/1 14/2 15/3" },
  PAM70: { accepted: "6/2 7/2 8/2 9/1 10/1 11/1 11/2 12/3" },
  PAM250: { accepted: "14/3 11/3 12/3 13/2 13/3 14/2 15/2 15/3 16/2 17/1 17/2 18/1 19/1 20/1 21/1" },
};

/**
 * The word sizes and option pairs BLAST+ 2.12 ran with, among the cells of the word_size test
 * (recorded, BLAST_GRID_SAMPLE=1); it refused every other cell there.
 */
const WORD_SIZE_ACCEPTED = {
  blastn: [
    '{"task":"megablast","word_size":4}',
    '{"task":"megablast","word_size":64}',
    '{"task":"blastn","word_size":4}',
    '{"task":"blastn","word_size":64}',
    '{"task":"blastn-short","word_size":4}',
    '{"task":"blastn-short","word_size":64}',
    '{"task":"dc-megablast","word_size":11}',
    '{"task":"dc-megablast","word_size":12}',
  ],
  blastp: [
    '{"word_size":7}',
    '{"task":"blastp","word_size":2}',
    '{"task":"blastp-short","word_size":2}',
    '{"task":"blastp-fast","word_size":2}',
    '{"ungapped":true,"comp_based_stats":0}',
  ],
  blastx: [
    '{"word_size":7}',
    '{"task":"blastx","word_size":2}',
    '{"task":"blastx-fast","word_size":2}',
    '{"ungapped":true,"comp_based_stats":0}',
  ],
  tblastn: [
    '{"word_size":7}',
    '{"task":"tblastn","word_size":2}',
    '{"task":"tblastn-fast","word_size":2}',
    '{"ungapped":true,"comp_based_stats":0}',
  ],
  tblastx: ['{"word_size":2}', '{"word_size":3}', '{"word_size":4}', '{"word_size":5}'],
};

type Cell = [BlastProgram, BlastOptions];
const cellName = ([program, options]: Cell) => `${program} ${JSON.stringify(options)}`;

/** The cells where our verdict differs from the recorded one. */
function againstTable(cases: Cell[], recorded: (cell: Cell) => boolean): string[] {
  return cases
    .filter((cell) => accepts(...cell) !== recorded(cell))
    .map((cell) => `${cellName(cell)}: ours=${accepts(...cell)} recorded=${recorded(cell)}`);
}

/**
 * The cells BLAST runs: all at `BLAST_GRID_SAMPLE=1`; otherwise, in each group (a task or a
 * matrix), that fraction of the `eligible` cells it accepts and of those it refuses (at least one
 * of each), drawn with the seed.
 */
function gridSample(
  cases: Cell[],
  group: (cell: Cell) => string,
  recorded: (cell: Cell) => boolean,
  eligible: (cell: Cell) => boolean = () => true,
): Cell[] {
  if (GRID_SAMPLE === 1) return cases;
  const random = prng(GRID_SEED);
  const strata = new Map<string, Cell[]>();
  for (const cell of cases.filter(eligible)) {
    const key = `${group(cell)} ${recorded(cell)}`;
    strata.set(key, [...(strata.get(key) ?? []), cell]);
  }
  const chosen = new Set<Cell>();
  for (const cells of strata.values()) {
    const pool = [...cells];
    const n = Math.max(1, Math.ceil(pool.length * GRID_SAMPLE));
    for (let i = 0; i < n; i++) {
      const j = i + Math.floor(random() * (pool.length - i));
      [pool[i], pool[j]] = [pool[j] as Cell, pool[i] as Cell];
      chosen.add(pool[i] as Cell);
    }
  }
  return cases.filter((cell) => chosen.has(cell));
}

/** The table rows of BLAST's verdicts on `ran` (every cell of a grid), in the format above. */
function recordedTable(ran: Cell[], blast: boolean[], group: (cell: Cell) => string): string {
  const rows = new Map<string, string[]>();
  ran.forEach((cell, i) => {
    const pairs = rows.get(group(cell)) ?? [];
    rows.set(group(cell), pairs);
    if (blast[i]) pairs.push(`${cell[1].gapopen}/${cell[1].gapextend}`);
  });
  return [...rows].map(([key, pairs]) => `  ${JSON.stringify(key)}: { accepted: "${pairs.join(" ")}" },\n`).join("");
}

const execFileAsync = promisify(execFile);

/** BLAST's exit code for argv (no shell). A missing executable fails the test instead. */
async function exitCode(program: string, args: readonly string[]): Promise<number> {
  try {
    await execFileAsync(program, [...args], { maxBuffer: 16 * 1024 * 1024 });
    return 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== "number") throw error;
    return code;
  }
}

/** Runs `jobs` with at most `limit` in flight, preserving order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, job: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await job(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

describe("BLAST+ 2.12 accepts every flag toBlastArgs emits", () => {
  let dir = "";
  const file = (name: string) => path.join(dir, name);
  const db = { nucl: "", prot: "" };
  const query = { nucl: "", prot: "" };

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "blastplane-options-"));
    let seed = 20_240_601;
    const rand = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return Math.floor((seed / 2_147_483_648) * n);
    };
    const aa = "ACDEFGHIKLMNPQRSTVWY";
    const codon: Record<string, string> = {
      A: "GCT",
      C: "TGT",
      D: "GAT",
      E: "GAA",
      F: "TTT",
      G: "GGT",
      H: "CAT",
      I: "ATT",
      K: "AAA",
      L: "CTG",
      M: "ATG",
      N: "AAT",
      P: "CCG",
      Q: "CAG",
      R: "CGT",
      S: "TCT",
      T: "ACC",
      V: "GTT",
      W: "TGG",
      Y: "TAT",
    };
    const mutate = (seq: string, n: number, alphabet: string) => {
      const out = seq.split("");
      for (let i = 0; i < n; i++) out[rand(out.length)] = alphabet[rand(alphabet.length)]!;
      return out.join("");
    };
    const protein = Array.from({ length: 240 }, () => aa[rand(20)]).join("");
    const variants = Array.from({ length: 6 }, (_, i) => mutate(protein, i * 12, aa));
    const coding = (p: string) =>
      p
        .split("")
        .map((c) => codon[c])
        .join("");
    const records = (seqs: string[], prefix: string) =>
      seqs.map((s, i) => `>${prefix}${i} variant ${i}\n${s}\n`).join("");
    writeFileSync(file("prot.fa"), records(variants, "p"));
    writeFileSync(file("nucl.fa"), records([...variants.map(coding), mutate(coding(protein), 90, "ACGT")], "n"));
    for (const molecule of ["nucl", "prot"] as const) {
      db[molecule] = file(`${molecule}db`);
      execFileSync("makeblastdb", ["-in", file(`${molecule}.fa`), "-dbtype", molecule, "-out", db[molecule]], {
        stdio: "pipe",
      });
    }
    // The queries go through our own parser and renderer, as a job's would.
    query.nucl = file("query-nucl.fa");
    query.prot = file("query-prot.fa");
    writeFileSync(
      query.nucl,
      toFasta(parseQueryFasta(`>qn1 coding\n${coding(protein.slice(30, 150)).toLowerCase()}\n`, "nucl")),
    );
    writeFileSync(
      query.prot,
      toFasta(parseQueryFasta(`>qp1 protein\n${protein.slice(20, 180)}\n>qp2\n${variants[3]}\n`, "prot")),
    );
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const dbFor = (program: BlastProgram) =>
    db[program === "blastn" || program === "tblastn" || program === "tblastx" ? "nucl" : "prot"];
  const queryFor = (program: BlastProgram) => query[queryMolecule(program)];
  const fixedArgs = (program: BlastProgram, out: string) => [
    "-outfmt",
    "5",
    "-query",
    queryFor(program),
    "-db",
    dbFor(program),
    "-out",
    out,
  ];

  const runs: [BlastProgram, Record<string, unknown>][] = [
    [
      "blastn",
      {
        task: "megablast",
        evalue: 10,
        max_target_seqs: 50,
        word_size: 28,
        dust: true,
        perc_identity: 80,
        soft_masking: true,
        strand: "both",
        outfmt: "xml",
      },
    ],
    [
      "blastn",
      {
        task: "blastn",
        evalue: 1e-5,
        num_alignments: 20,
        word_size: 11,
        dust: false,
        gapopen: 5,
        gapextend: 2,
        qcov_hsp_perc: 50,
        max_hsps: 1,
        window_size: 0,
        soft_masking: false,
        strand: "plus",
        outfmt: 5,
      },
    ],
    ["blastn", { task: "blastn-short", word_size: 7, gapopen: 2, gapextend: 2, outfmt: "6" }],
    ["blastn", { task: "dc-megablast", word_size: 12, ungapped: true, strand: "minus", outfmt: 7 }],
    [
      "blastp",
      {
        task: "blastp",
        matrix: "blosum45",
        gapopen: 15,
        gapextend: 2,
        comp_based_stats: 1,
        seg: true,
        threshold: 11,
        word_size: 3,
        window_size: 40,
        max_target_seqs: 5,
        outfmt: "tabular",
      },
    ],
    ["blastp", { task: "blastp-short", word_size: 2, comp_based_stats: 3, evalue: 200 }],
    ["blastp", { task: "blastp-fast", ungapped: true, seg: false, evalue: 1000, qcov_hsp_perc: 20, max_hsps: 3 }],
    [
      "blastx",
      {
        task: "blastx",
        matrix: "PAM70",
        gapopen: 10,
        gapextend: 1,
        query_gencode: 2,
        strand: "plus",
        comp_based_stats: 2,
        seg: true,
        soft_masking: false,
      },
    ],
    [
      "blastx",
      { task: "blastx-fast", matrix: "BLOSUM62", word_size: 7, ungapped: true, comp_based_stats: 0, num_alignments: 3 },
    ],
    [
      "tblastn",
      {
        task: "tblastn",
        matrix: "BLOSUM80",
        db_gencode: 11,
        comp_based_stats: 0,
        seg: false,
        gapopen: 9,
        gapextend: 2,
        threshold: 13.5,
      },
    ],
    [
      "tblastn",
      {
        task: "tblastn-fast",
        matrix: "blosum50",
        gapopen: 13,
        word_size: 5,
        max_hsps: 2,
        window_size: 30,
        outfmt: "tabular_commented",
      },
    ],
    ["tblastn", { matrix: "BLOSUM90", ungapped: true, evalue: 1e-30 }],
    [
      "tblastx",
      {
        matrix: "PAM250",
        word_size: 3,
        query_gencode: 4,
        db_gencode: 5,
        strand: "both",
        seg: true,
        threshold: 13,
        evalue: 1,
        max_target_seqs: 100,
        soft_masking: true,
        qcov_hsp_perc: 10,
        window_size: 40,
      },
    ],
    ["tblastx", { matrix: "PAM30", word_size: 2, num_alignments: 7 }],
  ];

  it("covers every option key, task, matrix and program across the runs", () => {
    const keys = new Set(runs.flatMap(([, o]) => Object.keys(o)));
    expect([...keys].sort()).toEqual(Object.keys(blastOptionsSchema.shape).sort());
    const tasks = new Set(runs.map(([, o]) => o.task).filter((t) => t !== undefined));
    expect(tasks).toEqual(new Set(Object.values(BLAST_TASKS).flat()));
    const matrices = new Set(runs.map(([, o]) => String(o.matrix ?? "").toUpperCase()).filter(Boolean));
    expect(matrices).toEqual(new Set(SCORING_MATRICES));
    expect(new Set(runs.map(([p]) => p))).toEqual(new Set(BLAST_PROGRAMS));
  });

  runs.forEach(([program, raw], i) => {
    it(`run ${i + 1}: ${program} ${JSON.stringify(raw)} exits 0 with -outfmt 5`, () => {
      const options = parseBlastOptions(program, raw);
      const out = file(`run-${i}.xml`);
      // execFileSync throws (failing the test, with BLAST's stderr) on a non-zero exit.
      execFileSync(program, [...toBlastArgs(program, options), ...fixedArgs(program, out)], { stdio: "pipe" });
      const xml = readFileSync(out, "utf8");
      expect(xml).toContain(`<BlastOutput_program>${program}</BlastOutput_program>`);
      if (options.evalue !== undefined) {
        expect(Number(/<Parameters_expect>([^<]+)</.exec(xml)?.[1])).toBe(options.evalue);
      }
      if (options.matrix !== undefined)
        expect(xml).toContain(`<Parameters_matrix>${options.matrix}</Parameters_matrix>`);
      if (options.gapopen !== undefined)
        expect(xml).toContain(`<Parameters_gap-open>${options.gapopen}</Parameters_gap-open>`);
    });
  });

  it("finds hits for every program on the test databases (the searches are real, not vacuous)", () => {
    for (const program of BLAST_PROGRAMS) {
      const out = file(`hits-${program}.xml`);
      execFileSync(program, fixedArgs(program, out), { stdio: "pipe" });
      expect(readFileSync(out, "utf8")).toContain("<Hit>");
    }
  });

  it("applicability matches each program's -help: a key applies exactly when BLAST has the flag", () => {
    for (const program of BLAST_PROGRAMS) {
      const help = execFileSync(program, ["-help"], { encoding: "utf8" });
      for (const key of Object.keys(blastOptionsSchema.shape)) {
        if (key === "outfmt") continue; // never a flag: shards always run -outfmt 5
        const hasFlag = new RegExp(`^ -${key}\\b`, "m").test(help);
        const sample: Record<string, unknown> = {
          evalue: 1,
          max_target_seqs: 5,
          num_alignments: 5,
          word_size: 4,
          dust: true,
          task: "megablast",
          perc_identity: 90,
          qcov_hsp_perc: 50,
          gapopen: 11,
          gapextend: 1,
          matrix: "BLOSUM62",
          soft_masking: true,
          ungapped: false,
          comp_based_stats: 2,
          seg: true,
          window_size: 40,
          max_hsps: 1,
          strand: "plus",
          threshold: 11,
          query_gencode: 1,
          db_gencode: 1,
        };
        let notApplicable = false;
        try {
          validateOptionsForProgram(program, blastOptionsSchema.parse({ [key]: sample[key] }));
        } catch (error) {
          notApplicable = (error as ValidationError).issues.some((i) => i.type === "not_applicable");
        }
        expect([program, key, !notApplicable]).toEqual([program, key, hasFlag]);
      }
    }
  });

  /** BLAST's verdict on each case: does it run (exit code 0)? */
  let gridRun = 0;
  async function blastRuns(cases: Cell[]): Promise<boolean[]> {
    const codes = await mapLimit(cases, 2, ([program, options]) => {
      // Raw flags, deliberately without our validation, to see what BLAST itself does.
      const args: string[] = [];
      for (const [key, value] of Object.entries(options)) {
        if (value === true && key === "ungapped") args.push("-ungapped");
        else args.push(`-${key}`, String(value));
      }
      return exitCode(program, [...args, ...fixedArgs(program, file(`grid-${gridRun++}.xml`))]);
    });
    return codes.map((code) => code === 0);
  }

  /** The cases where our verdict (validateOptionsForProgram) differs from BLAST's. */
  const mismatches = (cases: Cell[], blast: boolean[]): string[] =>
    cases.flatMap((cell, i) =>
      accepts(...cell) === blast[i] ? [] : [`${cellName(cell)}: ours=${accepts(...cell)} blast=${blast[i]}`],
    );

  /**
   * Our verdict against the recorded table on every cell, then against BLAST's on the sample (at
   * BLAST_GRID_SAMPLE=1 on every cell, printing BLAST's table first).
   */
  async function checkGrid(
    name: string,
    cases: Cell[],
    group: (cell: Cell) => string,
    recorded: (cell: Cell) => boolean,
    always: Cell[] = [],
    eligible?: (cell: Cell) => boolean,
    table: (ran: Cell[], blast: boolean[]) => string = (ran, blast) => recordedTable(ran, blast, group),
  ) {
    const probed = [...gridSample(cases, group, recorded, eligible), ...always];
    process.stdout.write(
      `${name}: BLAST runs ${probed.length} of ${cases.length + always.length} cells (seed ${GRID_SEED})\n`,
    );
    const blast = await blastRuns(probed);
    if (GRID_SAMPLE === 1) process.stdout.write(table(cases, blast));
    expect(againstTable(cases, recorded)).toEqual([]);
    expect(mismatches(probed, blast)).toEqual([]);
  }

  it(
    `nucleotide gap costs: for every task on a 0–7 × 0–4 grid, our verdict equals BLAST's recorded one on every cell and BLAST's own on ${sampleWords} (seed ${GRID_SEED})`,
    async () => {
      const cases: [BlastProgram, BlastOptions][] = [];
      for (const task of BLAST_TASKS.blastn) {
        for (let gapopen = 0; gapopen <= 7; gapopen++) {
          for (let gapextend = 0; gapextend <= 4; gapextend++) cases.push(["blastn", { task, gapopen, gapextend }]);
        }
        cases.push(["blastn", { task, gapopen: 20, gapextend: 1 }], ["blastn", { task, gapopen: 100, gapextend: 100 }]);
      }
      const recorded = ([, o]: [BlastProgram, BlastOptions]) =>
        NUCLEOTIDE_GAP_GRID[o.task as keyof typeof NUCLEOTIDE_GAP_GRID].accepted
          .split(" ")
          .includes(`${o.gapopen}/${o.gapextend}`);
      await checkGrid("nucleotide gap costs", cases, ([, o]) => String(o.task), recorded);
    },
    GRID_TIMEOUT,
  );

  it(
    `protein gap costs: for every matrix, our verdict equals BLAST's recorded one on every pair of 5–25 × 1–3 and a spread of others, and BLAST's own on ${sampleWords} (seed ${GRID_SEED})`,
    async () => {
      const cases: [BlastProgram, BlastOptions][] = [];
      const probes: [number, number][] = [
        [0, 0],
        [8, 1],
        [12, 2],
        [14, 3],
        [25, 2],
        [11, 4],
        [100, 100],
      ];
      for (const matrix of SCORING_MATRICES) {
        const pairs = new Set(probes.map(([o, e]) => `${o}/${e}`));
        for (let gapopen = 5; gapopen <= 25; gapopen++) {
          for (let gapextend = 1; gapextend <= 3; gapextend++) pairs.add(`${gapopen}/${gapextend}`);
        }
        for (const pair of pairs) {
          const [gapopen, gapextend] = pair.split("/").map(Number) as [number, number];
          cases.push(["blastp", { matrix, gapopen, gapextend }]);
        }
      }
      const recorded = ([, o]: [BlastProgram, BlastOptions]) =>
        PROTEIN_GAP_GRID[o.matrix as keyof typeof PROTEIN_GAP_GRID].accepted
          .split(" ")
          .includes(`${o.gapopen}/${o.gapextend}`);
      // Other programs, and a gap cost alone (the other filled from the task's or matrix's default): always run.
      const always: Cell[] = [
        ["blastx", { gapopen: 12, gapextend: 2 }],
        ["tblastn", { matrix: "PAM30", gapopen: 13, gapextend: 3 }],
        ["blastp", { task: "blastp-short", gapopen: 11 }],
        ["blastp", { matrix: "BLOSUM45", gapextend: 3 }],
      ];
      // Sampled from the probes and the pairs BLAST accepts (the rest of the grid: every cell at BLAST_GRID_SAMPLE=1).
      const spread = new Set(probes.map(([o, e]) => `${o}/${e}`));
      const eligible = (cell: Cell) => recorded(cell) || spread.has(`${cell[1].gapopen}/${cell[1].gapextend}`);
      await checkGrid("protein gap costs", cases, ([, o]) => String(o.matrix), recorded, always, eligible);
    },
    GRID_TIMEOUT,
  );

  it(
    `word_size ranges and the incompatible combinations: our verdict equals BLAST's recorded one on every cell and BLAST's own on ${sampleWords} (seed ${GRID_SEED})`,
    async () => {
      const cases: Cell[] = [];
      for (const task of ["megablast", "blastn", "blastn-short"] as const) {
        for (const word_size of [3, 4, 64]) cases.push(["blastn", { task, word_size }]);
      }
      for (const word_size of [4, 10, 11, 12, 13]) cases.push(["blastn", { task: "dc-megablast", word_size }]);
      // The largest protein words build big lookup tables (seconds each, most of this test's time
      // when BLAST runs them), so the upper bound is probed once per program; every task at 2 and 8.
      for (const program of ["blastp", "blastx", "tblastn"] as const) {
        cases.push([program, { word_size: 7 }]);
        for (const task of BLAST_TASKS[program]) {
          for (const word_size of [2, 8]) cases.push([program, { task, word_size }]);
        }
      }
      for (const word_size of [2, 3, 4, 5, 6, 7]) cases.push(["tblastx", { word_size }]);
      cases.push(["blastn", { max_target_seqs: 10, num_alignments: 10 }]);
      for (const program of ["blastp", "blastx", "tblastn"] as const) {
        cases.push(
          [program, { ungapped: true, comp_based_stats: 2 }],
          [program, { ungapped: true, comp_based_stats: 0 }],
        );
      }
      const recorded = ([program, options]: Cell) =>
        (WORD_SIZE_ACCEPTED[program] as readonly string[]).includes(JSON.stringify(options));
      // Sampled per program and verdict: each draw of an upper bound is one of four or five cells.
      const table = (ran: Cell[], blast: boolean[]) =>
        BLAST_PROGRAMS.map(
          (program) =>
            `  ${program}: [${ran
              .filter((cell, i) => cell[0] === program && blast[i])
              .map(([, o]) => `'${JSON.stringify(o)}'`)
              .join(", ")}],\n`,
        ).join("");
      await checkGrid("word_size and option pairs", cases, ([program]) => program, recorded, [], undefined, table);
    },
    GRID_TIMEOUT,
  );

  it("BLAST itself fails on what the schema refuses or normalises: num_alignments 0, a lower-case matrix, ungapped without comp_based_stats 0", async () => {
    const nucl = fixedArgs("blastn", file("x0.xml"));
    const prot = fixedArgs("blastp", file("x1.xml"));
    expect(await exitCode("blastn", ["-num_alignments", "0", ...nucl])).not.toBe(0);
    expect(refuse("blastn", { num_alignments: 0 })[0]!.type).toBe("greater_than_equal");
    expect(await exitCode("blastp", ["-matrix", "blosum62", ...prot])).not.toBe(0);
    expect(
      await exitCode("blastp", [
        ...toBlastArgs("blastp", parseBlastOptions("blastp", { matrix: "blosum62" })),
        ...prot,
      ]),
    ).toBe(0);
    expect(await exitCode("blastp", ["-ungapped", ...prot])).not.toBe(0);
    expect(await exitCode("blastp", [...toBlastArgs("blastp", { ungapped: true }), ...prot])).toBe(0);
  });
});
