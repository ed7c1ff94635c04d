/**
 * BLAST search options a caller may set, as an allowlist. Each key has a type and range here, a
 * per-program applicability rule, and one fixed BLAST+ flag; {@link toBlastArgs} renders values
 * itself, so nothing from a request reaches a BLAST command line except validated enum members
 * and numbers. Keys, ranges and combinations were checked against BLAST+ 2.12.
 */
import { z } from "zod";
import { type FieldIssue, ValidationError } from "../errors.js";
import { zodIssues } from "../http/validation.js";
import type { BlastProgram } from "./programs.js";

/** The `-task` values each program accepts; the first is BLAST's default. tblastx has none. */
export const BLAST_TASKS = {
  blastn: ["megablast", "blastn", "blastn-short", "dc-megablast"],
  blastp: ["blastp", "blastp-short", "blastp-fast"],
  blastx: ["blastx", "blastx-fast"],
  tblastn: ["tblastn", "tblastn-fast"],
  tblastx: [],
} as const satisfies Record<BlastProgram, readonly string[]>;

/** Every task of every program. */
export type BlastTask = (typeof BLAST_TASKS)[BlastProgram][number];

const ALL_TASKS = Object.values(BLAST_TASKS).flat() as [BlastTask, ...BlastTask[]];

/** Scoring matrices for the protein-scoring programs, in BLAST's (upper-case) spelling. */
export const SCORING_MATRICES = [
  "BLOSUM45",
  "BLOSUM50",
  "BLOSUM62",
  "BLOSUM80",
  "BLOSUM90",
  "PAM30",
  "PAM70",
  "PAM250",
] as const;

/** {@link SCORING_MATRICES} in any letter case, e.g. `[Bb][Ll][Oo]...` (JSON Schema patterns have no flags). */
const SCORING_MATRIX_PATTERN = new RegExp(
  `^(?:${SCORING_MATRICES.map((m) => [...m].map((c) => (/[A-Za-z]/.test(c) ? `[${c.toUpperCase()}${c.toLowerCase()}]` : c)).join("")).join("|")})$`,
);

/** One of {@link SCORING_MATRICES}. */
export type ScoringMatrix = (typeof SCORING_MATRICES)[number];

/** The report renderings a caller may ask for; see the `outfmt` option. */
export type OutputFormat = "xml" | "tabular" | "tabular_commented";

/** NCBI genetic code numbers BLAST+ 2.12 accepts for `query_gencode` and `db_gencode`. */
export const GENETIC_CODES = [
  1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33,
] as const;

const OUTFMT_INPUTS = [5, 6, 7, "5", "6", "7", "xml", "tabular", "tabular_commented"] as const;

function toOutputFormat(value: (typeof OUTFMT_INPUTS)[number]): OutputFormat {
  switch (value) {
    case 5:
    case "5":
    case "xml":
      return "xml";
    case 6:
    case "6":
    case "tabular":
      return "tabular";
    default:
      return "tabular_commented";
  }
}

function intIn(key: string, min: number, max: number) {
  const range = `${key} must be an integer from ${min} to ${max}`;
  return z.int({ error: range }).min(min, { error: range }).max(max, { error: range }).optional();
}

function numberIn(key: string, min: number, max: number, minInclusive = true) {
  const range = `${key} must be a number ${minInclusive ? "from" : "greater than"} ${min} ${minInclusive ? "to" : "and at most"} ${max}`;
  const base = z.number({ error: range });
  return (minInclusive ? base.min(min, { error: range }) : base.gt(min, { error: range }))
    .max(max, { error: range })
    .optional();
}

function bool(key: string) {
  return z.boolean({ error: `${key} must be true or false` }).optional();
}

/**
 * The `blast_options` object of `POST /v1/jobs`, and equally the `options` object of the facade
 * submit (same keys; the facade's integer `outfmt` is one of the accepted spellings). Strict: an
 * unknown key is a 422 `extra_forbidden` naming it. Every key is optional; absent means BLAST's
 * default. Program-specific rules are checked by {@link validateOptionsForProgram}.
 *
 * `outfmt` accepts 5, 6, 7 (integers or strings) and "xml", "tabular", "tabular_commented", and
 * is normalised to those three names. Shards always run as XML (`-outfmt 5`) so that results
 * merge exactly; `outfmt` only records the rendering the caller prefers for the merged result
 * and never becomes a BLAST flag.
 */
export const blastOptionsSchema = z.strictObject(
  {
    /** Expectation value threshold (`-evalue`). */
    evalue: numberIn("evalue", 0, 1000, false),
    /** Hits kept per query (`-max_target_seqs`). */
    max_target_seqs: intIn("max_target_seqs", 1, 5000),
    /**
     * Hits with alignments per query (`-num_alignments`). In an XML report this limits the hits
     * kept, like `max_target_seqs`; 0 is refused because BLAST then saves no hits and fails.
     */
    num_alignments: intIn("num_alignments", 1, 5000),
    outfmt: z
      .literal(OUTFMT_INPUTS, {
        error: 'outfmt must be 5, 6 or 7 (integer or string), "xml", "tabular" or "tabular_commented"',
      })
      .transform(toOutputFormat)
      .optional(),
    /** Seed word length (`-word_size`); the range depends on program and task. */
    word_size: intIn("word_size", 2, 1000),
    /** DUST low-complexity filter on the query (`-dust yes|no`); blastn only. */
    dust: bool("dust"),
    /** BLAST task (`-task`); which tasks are valid depends on the program. */
    task: z
      .enum(ALL_TASKS, { error: `task must be one of ${ALL_TASKS.join(", ")} (valid tasks depend on the program)` })
      .optional(),
    /** Minimum percent identity of an HSP (`-perc_identity`); blastn only. */
    perc_identity: numberIn("perc_identity", 0, 100),
    /** Minimum percent of the query an HSP covers (`-qcov_hsp_perc`). */
    qcov_hsp_perc: numberIn("qcov_hsp_perc", 0, 100),
    /** Gap opening cost (`-gapopen`); supported values depend on the scoring system. */
    gapopen: intIn("gapopen", 0, 100),
    /** Gap extension cost (`-gapextend`); supported values depend on the scoring system. */
    gapextend: intIn("gapextend", 0, 100),
    /** Scoring matrix (`-matrix`), case-insensitive, normalised to upper case; protein scoring only. */
    matrix: z
      .string({ error: `matrix must be one of ${SCORING_MATRICES.join(", ")}` })
      // What is accepted, for the OpenAPI document: the same set in any letter case (the pipe below
      // validates; a test checks the pattern and the validator agree).
      .meta({
        pattern: SCORING_MATRIX_PATTERN.source,
        description: `One of ${SCORING_MATRICES.join(", ")}, in any letter case (normalised to upper case).`,
        examples: [...SCORING_MATRICES],
      })
      .transform((value) => value.toUpperCase())
      .pipe(z.enum(SCORING_MATRICES, { error: `matrix must be one of ${SCORING_MATRICES.join(", ")}` }))
      .optional(),
    /** Apply filtering as soft masks (`-soft_masking true|false`). */
    soft_masking: bool("soft_masking"),
    /** Ungapped alignment only (`-ungapped` when true). */
    ungapped: bool("ungapped"),
    /** Composition-based statistics mode 0–3 (`-comp_based_stats`); blastp, blastx, tblastn. */
    comp_based_stats: intIn("comp_based_stats", 0, 3),
    /** SEG low-complexity filter on the (translated) query (`-seg yes|no`). */
    seg: bool("seg"),
    /** Multiple-hits window size, 0 for the one-hit algorithm (`-window_size`). */
    window_size: intIn("window_size", 0, 1000),
    /** HSPs kept per subject sequence (`-max_hsps`). */
    max_hsps: intIn("max_hsps", 1, 1000),
    /** Query strand(s) searched (`-strand`); nucleotide-query programs only. */
    strand: z.enum(["both", "plus", "minus"], { error: "strand must be both, plus or minus" }).optional(),
    /** Minimum word score for the lookup table (`-threshold`); protein-word programs only. */
    threshold: numberIn("threshold", 0, 1000, false),
    /** Genetic code translating the query (`-query_gencode`); blastx, tblastx. */
    query_gencode: z
      .literal(GENETIC_CODES, { error: `query_gencode must be one of ${GENETIC_CODES.join(", ")}` })
      .optional(),
    /** Genetic code translating the database (`-db_gencode`); tblastn, tblastx. */
    db_gencode: z.literal(GENETIC_CODES, { error: `db_gencode must be one of ${GENETIC_CODES.join(", ")}` }).optional(),
  },
  { error: 'BLAST options must be an object of option names and values, such as {"evalue": 0.001}' },
);

/** Validated, normalised BLAST options (every key optional). */
export type BlastOptions = z.output<typeof blastOptionsSchema>;

/** The facade's `options` object: the same allowlist as the job API's `blast_options`. */
export const facadeOptionsSchema = blastOptionsSchema;

type OptionKey = keyof BlastOptions;

const ALL_PROGRAMS: readonly BlastProgram[] = ["blastn", "blastp", "blastx", "tblastn", "tblastx"];
const GAPPED: readonly BlastProgram[] = ["blastn", "blastp", "blastx", "tblastn"];
const PROTEIN_SCORING: readonly BlastProgram[] = ["blastp", "blastx", "tblastn", "tblastx"];
const COMPOSITION: readonly BlastProgram[] = ["blastp", "blastx", "tblastn"];
const NUCLEOTIDE_QUERY: readonly BlastProgram[] = ["blastn", "blastx", "tblastx"];

/** The programs whose BLAST+ 2.12 executable has each option (read from each `-help`). */
const APPLIES_TO: Readonly<Record<OptionKey, readonly BlastProgram[]>> = {
  evalue: ALL_PROGRAMS,
  max_target_seqs: ALL_PROGRAMS,
  num_alignments: ALL_PROGRAMS,
  outfmt: ALL_PROGRAMS,
  word_size: ALL_PROGRAMS,
  dust: ["blastn"],
  task: GAPPED,
  perc_identity: ["blastn"],
  qcov_hsp_perc: ALL_PROGRAMS,
  gapopen: GAPPED,
  gapextend: GAPPED,
  matrix: PROTEIN_SCORING,
  soft_masking: ALL_PROGRAMS,
  ungapped: GAPPED,
  comp_based_stats: COMPOSITION,
  seg: PROTEIN_SCORING,
  window_size: ALL_PROGRAMS,
  max_hsps: ALL_PROGRAMS,
  strand: NUCLEOTIDE_QUERY,
  threshold: PROTEIN_SCORING,
  query_gencode: ["blastx", "tblastx"],
  db_gencode: ["tblastn", "tblastx"],
};

/** The programs each option applies to (the web app offers only these fields for a program). */
export const OPTION_PROGRAMS: Readonly<Record<OptionKey, readonly BlastProgram[]>> = APPLIES_TO;

/** Options that become flags, in the order they are emitted, with their fixed BLAST+ flag. */
const FLAGS: ReadonlyArray<readonly [Exclude<OptionKey, "outfmt">, string]> = [
  ["task", "-task"],
  ["evalue", "-evalue"],
  ["max_target_seqs", "-max_target_seqs"],
  ["num_alignments", "-num_alignments"],
  ["word_size", "-word_size"],
  ["matrix", "-matrix"],
  ["gapopen", "-gapopen"],
  ["gapextend", "-gapextend"],
  ["ungapped", "-ungapped"],
  ["comp_based_stats", "-comp_based_stats"],
  ["threshold", "-threshold"],
  ["window_size", "-window_size"],
  ["dust", "-dust"],
  ["seg", "-seg"],
  ["soft_masking", "-soft_masking"],
  ["perc_identity", "-perc_identity"],
  ["qcov_hsp_perc", "-qcov_hsp_perc"],
  ["max_hsps", "-max_hsps"],
  ["strand", "-strand"],
  ["query_gencode", "-query_gencode"],
  ["db_gencode", "-db_gencode"],
];

/** A supported (gapopen, gapextend) set: listed pairs plus every pair at least `atLeast`. */
interface GapCosts {
  readonly scoring: string;
  readonly defaults: readonly [number, number];
  readonly pairs: ReadonlyArray<readonly [number, number]>;
  readonly atLeast?: readonly [number, number];
}

// Nucleotide gap costs follow the task's reward/penalty (megablast 1/-2; blastn-short 1/-3;
// blastn and dc-megablast 2/-3). Measured against BLAST+ 2.12 on a 0–20 × 0–10 grid plus 50, 100.
const NUCLEOTIDE_GAP_COSTS: Readonly<Record<"megablast" | "blastn" | "blastn-short" | "dc-megablast", GapCosts>> = {
  megablast: {
    scoring: "task megablast (reward 1, penalty -2)",
    defaults: [0, 0],
    pairs: [
      [0, 0],
      [0, 2],
      [1, 1],
      [1, 2],
      [2, 1],
      [3, 1],
    ],
    atLeast: [2, 2],
  },
  "blastn-short": {
    scoring: "task blastn-short (reward 1, penalty -3)",
    defaults: [5, 2],
    pairs: [
      [0, 2],
      [1, 1],
      [1, 2],
      [2, 1],
    ],
    atLeast: [2, 2],
  },
  blastn: {
    scoring: "task blastn (reward 2, penalty -3)",
    defaults: [5, 2],
    pairs: [
      [0, 4],
      [2, 2],
      [2, 4],
      [3, 3],
      [4, 2],
      [4, 4],
      [5, 2],
      [6, 2],
    ],
    atLeast: [6, 4],
  },
  "dc-megablast": {
    scoring: "task dc-megablast (reward 2, penalty -3)",
    defaults: [5, 2],
    pairs: [
      [0, 4],
      [2, 2],
      [2, 4],
      [3, 3],
      [4, 2],
      [4, 4],
      [5, 2],
      [6, 2],
    ],
    atLeast: [6, 4],
  },
};

// The pairs BLAST+ 2.12 lists for each matrix (blast_stat.c), and its defaults when only the
// matrix is given. BLAST refuses any other pair at run time, so it is refused here up front.
const MATRIX_GAP_COSTS: Readonly<Record<ScoringMatrix, GapCosts>> = {
  BLOSUM45: {
    scoring: "matrix BLOSUM45",
    defaults: [14, 2],
    pairs: [
      [13, 3],
      [12, 3],
      [11, 3],
      [10, 3],
      [16, 2],
      [15, 2],
      [14, 2],
      [13, 2],
      [12, 2],
      [19, 1],
      [18, 1],
      [17, 1],
      [16, 1],
    ],
  },
  BLOSUM50: {
    scoring: "matrix BLOSUM50",
    defaults: [13, 2],
    pairs: [
      [13, 3],
      [12, 3],
      [11, 3],
      [10, 3],
      [9, 3],
      [16, 2],
      [15, 2],
      [14, 2],
      [13, 2],
      [12, 2],
      [19, 1],
      [18, 1],
      [17, 1],
      [16, 1],
      [15, 1],
    ],
  },
  BLOSUM62: {
    scoring: "matrix BLOSUM62",
    defaults: [11, 1],
    pairs: [
      [11, 2],
      [10, 2],
      [9, 2],
      [8, 2],
      [7, 2],
      [6, 2],
      [13, 1],
      [12, 1],
      [11, 1],
      [10, 1],
      [9, 1],
    ],
  },
  BLOSUM80: {
    scoring: "matrix BLOSUM80",
    defaults: [10, 1],
    pairs: [
      [25, 2],
      [13, 2],
      [9, 2],
      [8, 2],
      [7, 2],
      [6, 2],
      [11, 1],
      [10, 1],
      [9, 1],
    ],
  },
  BLOSUM90: {
    scoring: "matrix BLOSUM90",
    defaults: [10, 1],
    pairs: [
      [9, 2],
      [8, 2],
      [7, 2],
      [6, 2],
      [11, 1],
      [10, 1],
      [9, 1],
    ],
  },
  PAM30: {
    scoring: "matrix PAM30",
    defaults: [9, 1],
    pairs: [
      [7, 2],
      [6, 2],
      [5, 2],
      [10, 1],
      [9, 1],
      [8, 1],
      [15, 3],
      [14, 2],
      [14, 1],
      [13, 3],
    ],
  },
  PAM70: {
    scoring: "matrix PAM70",
    defaults: [10, 1],
    pairs: [
      [8, 2],
      [7, 2],
      [6, 2],
      [11, 1],
      [10, 1],
      [9, 1],
      [11, 2],
      [12, 3],
    ],
  },
  PAM250: {
    scoring: "matrix PAM250",
    defaults: [14, 2],
    pairs: [
      [15, 3],
      [14, 3],
      [13, 3],
      [12, 3],
      [11, 3],
      [17, 2],
      [16, 2],
      [15, 2],
      [14, 2],
      [13, 2],
      [21, 1],
      [20, 1],
      [19, 1],
      [18, 1],
      [17, 1],
    ],
  },
};

function supportsGapCosts(costs: GapCosts, open: number, extend: number): boolean {
  if (costs.pairs.some(([o, e]) => o === open && e === extend)) return true;
  return costs.atLeast !== undefined && open >= costs.atLeast[0] && extend >= costs.atLeast[1];
}

function describeGapCosts(costs: GapCosts): string {
  const listed = costs.pairs.map(([o, e]) => `${o}/${e}`).join(", ");
  const more = costs.atLeast ? `, or gapopen ≥ ${costs.atLeast[0]} with gapextend ≥ ${costs.atLeast[1]}` : "";
  return `supported gapopen/gapextend: ${listed}${more}`;
}

/** The task BLAST runs when none is given. */
function defaultTask(program: BlastProgram): BlastTask | undefined {
  return BLAST_TASKS[program][0];
}

/** The matrix BLAST uses when none is given: PAM30 for blastp-short, else BLOSUM62. */
function defaultMatrix(task: BlastTask | undefined): ScoringMatrix {
  return task === "blastp-short" ? "PAM30" : "BLOSUM62";
}

/** Where an option's issues point: `["body", field, key]`. */
export type OptionsField = "blast_options" | "options";

/**
 * Checks the options against the program, BLAST+ 2.12's rules that the schema alone cannot
 * express. Refuses, with `loc: ["body", field, key]`:
 * - an option the program does not have (type `not_applicable`), e.g. `dust` with blastp,
 *   `matrix` with blastn, `task` or gap costs with tblastx;
 * - a `task` of another program (type `enum`);
 * - `word_size` outside the program's range: blastn ≥ 4 (dc-megablast exactly 11 or 12),
 *   blastp/blastx/tblastn 2–7, tblastx 2–5 (types `greater_than_equal`, `less_than_equal`,
 *   `value_error`);
 * - `max_target_seqs` together with `num_alignments`: BLAST refuses the pair outright (type
 *   `value_error`, at `num_alignments`);
 * - `ungapped` with gap costs, or (protein scoring) with `comp_based_stats` 1–3, which BLAST
 *   refuses for an ungapped search (type `value_error`);
 * - a gap-cost pair the scoring system does not support, after filling an absent `gapopen` or
 *   `gapextend` with BLAST's default for the task and matrix (type `value_error`).
 *
 * @param field the body key holding the options: `blast_options` (job API) or `options` (facade).
 * @throws ValidationError listing every problem found.
 */
export function validateOptionsForProgram(
  program: BlastProgram,
  options: BlastOptions,
  field: OptionsField = "blast_options",
): void {
  const issues: FieldIssue[] = [];
  const at = (key: OptionKey, msg: string, type: string): void => {
    issues.push({ loc: ["body", field, key], msg, type });
  };
  const has = (key: OptionKey): boolean => options[key] !== undefined;

  for (const key of Object.keys(APPLIES_TO) as OptionKey[]) {
    if (!has(key) || APPLIES_TO[key].includes(program)) continue;
    const why = key === "task" ? "tblastx has no tasks" : `it applies to ${APPLIES_TO[key].join(", ")}`;
    at(key, `${key} does not apply to ${program}; ${why}`, "not_applicable");
  }

  const tasks: readonly string[] = BLAST_TASKS[program];
  let taskOk = true;
  if (options.task !== undefined && tasks.length > 0 && !tasks.includes(options.task)) {
    taskOk = false;
    at("task", `task '${options.task}' is not a ${program} task; ${program} accepts ${tasks.join(", ")}`, "enum");
  }
  const task = options.task !== undefined && taskOk && tasks.length > 0 ? options.task : defaultTask(program);

  const ws = options.word_size;
  if (ws !== undefined && taskOk) {
    if (program === "blastn") {
      if (task === "dc-megablast" && ws !== 11 && ws !== 12) {
        at("word_size", "word_size must be 11 or 12 for task dc-megablast", "value_error");
      } else if (ws < 4) {
        at("word_size", `word_size must be at least 4 for blastn, got ${ws}`, "greater_than_equal");
      }
    } else {
      const max = program === "tblastx" ? 5 : 7;
      if (ws > max) at("word_size", `word_size must be from 2 to ${max} for ${program}, got ${ws}`, "less_than_equal");
    }
  }

  if (has("max_target_seqs") && has("num_alignments")) {
    at(
      "num_alignments",
      "num_alignments cannot be combined with max_target_seqs (BLAST refuses the pair); in the XML report both limit the hits kept per query, so give only max_target_seqs",
      "value_error",
    );
  }

  const gapped = GAPPED.includes(program);
  if (options.ungapped === true && gapped) {
    for (const key of ["gapopen", "gapextend"] as const) {
      if (has(key))
        at(key, `${key} has no effect on an ungapped search; remove it or set ungapped to false`, "value_error");
    }
    const cbs = options.comp_based_stats;
    if (cbs !== undefined && cbs !== 0 && COMPOSITION.includes(program)) {
      at(
        "comp_based_stats",
        "comp_based_stats must be 0 (or absent) for an ungapped search; BLAST supports composition-based statistics only for gapped searches",
        "value_error",
      );
    }
  } else if (gapped && taskOk && (has("gapopen") || has("gapextend"))) {
    const costs =
      program === "blastn"
        ? NUCLEOTIDE_GAP_COSTS[task as keyof typeof NUCLEOTIDE_GAP_COSTS]
        : MATRIX_GAP_COSTS[options.matrix ?? defaultMatrix(task)];
    const open = options.gapopen ?? costs.defaults[0];
    const extend = options.gapextend ?? costs.defaults[1];
    if (!supportsGapCosts(costs, open, extend)) {
      at(
        has("gapopen") ? "gapopen" : "gapextend",
        `gapopen ${open} with gapextend ${extend} is not supported for ${program} ${costs.scoring}; ${describeGapCosts(costs)}`,
        "value_error",
      );
    }
  }

  if (issues.length > 0) throw new ValidationError(issues);
}

/**
 * Validates untrusted options for a program: the schema, then {@link validateOptionsForProgram}.
 * Absent options (`undefined` or `null`) are an empty object. Issues carry `loc: ["body", field, ...]`.
 *
 * @throws ValidationError listing every problem found.
 */
export function parseBlastOptions(
  program: BlastProgram,
  raw: unknown,
  field: OptionsField = "blast_options",
): BlastOptions {
  const input = raw ?? {};
  const parsed = blastOptionsSchema.safeParse(input);
  if (!parsed.success) {
    throw new ValidationError(
      zodIssues(parsed.error, "body", input).map((issue) => ({
        ...issue,
        loc: ["body", field, ...issue.loc.slice(1)],
      })),
    );
  }
  validateOptionsForProgram(program, parsed.data, field);
  return parsed.data;
}

/**
 * The BLAST+ arguments for the options, from a fixed key → flag map, in a fixed order. Every
 * value is rendered here: numbers with `String()`, `dust`/`seg` as `yes`/`no`, `soft_masking` as
 * `true`/`false`, `ungapped` as the bare flag, enums (task, matrix, strand) as their validated
 * member. The options are re-validated first (schema and program), so an object that did not come
 * through {@link parseBlastOptions} cannot smuggle a value in.
 *
 * Never includes `-outfmt`, `-query`, `-db` or `-out`: the executor adds those (always
 * `-outfmt 5`). For an ungapped blastp/blastx/tblastn search without `comp_based_stats` it adds
 * `-comp_based_stats 0`, the only mode BLAST accepts for an ungapped search.
 *
 * @throws ValidationError when the options are invalid for the program.
 */
export function toBlastArgs(program: BlastProgram, options: BlastOptions): string[] {
  const checked = parseBlastOptions(program, options);
  const args: string[] = [];
  for (const [key, flag] of FLAGS) {
    const value = checked[key];
    if (value === undefined) continue;
    if (key === "ungapped") {
      if (value === true) args.push(flag);
    } else if (key === "dust" || key === "seg") {
      args.push(flag, value === true ? "yes" : "no");
    } else if (key === "soft_masking") {
      args.push(flag, value === true ? "true" : "false");
    } else {
      args.push(flag, String(value));
    }
  }
  if (checked.ungapped === true && checked.comp_based_stats === undefined && COMPOSITION.includes(program)) {
    args.push("-comp_based_stats", "0");
  }
  return args;
}
