/**
 * Query FASTA: parsing and validation of the `query_fasta` a caller submits, rendering back to
 * FASTA for the executor, and splitting into query batches (one shard per batch).
 *
 * The parser is the only place user sequence text is interpreted. It accepts what BLAST+ 2.12
 * accepts and refuses, with a 422 naming the record, what BLAST would reject or silently alter,
 * so that a job that is accepted does not fail later inside a shard.
 */
import { type FieldIssue, ValidationError } from "../errors.js";
import type { MoleculeType } from "./programs.js";

/** One query sequence as parsed from the caller's FASTA. */
export interface FastaRecord {
  /** The header text from just after `>` up to the first whitespace (BLAST's query id). */
  id: string;
  /** The rest of the header line, trimmed; empty when the header has only an id. */
  description: string;
  /** Residue letters only: upper-case, no whitespace, `-` gaps removed. */
  sequence: string;
}

/** Bounds on a query FASTA; every one is enforced with its own message. */
export interface FastaLimits {
  /** Largest `query_fasta`, in UTF-8 bytes. */
  readonly maxBytes: number;
  /** Most records (queries) in one request. */
  readonly maxSequences: number;
  /** Most residue letters in one record. */
  readonly maxSequenceLetters: number;
  /** Longest header line, in characters after the `>`. */
  readonly maxHeaderLength: number;
}

/**
 * The limits a submitted query FASTA must respect: 10 MiB of text, 10,000 queries, 1,000,000
 * letters per query and 1,000 characters per header. They bound the memory a request can make the
 * API hold and the number of shards one job can fan out to; a caller with more work submits
 * several jobs. Note the JSON body limit of the submit route must be at least `maxBytes` (plus
 * the envelope) for this limit, rather than a 413, to be what a large query meets.
 */
export const FASTA_LIMITS: Readonly<FastaLimits> = {
  maxBytes: 10 * 1024 * 1024,
  maxSequences: 10_000,
  maxSequenceLetters: 1_000_000,
  maxHeaderLength: 1_000,
};

/** Issues reported for one request at most; parsing stops once this many are collected. */
const MAX_REPORTED_ISSUES = 20;

/** The id BLAST gives a query that has no header (it prints it as `Query_1` too). */
const BARE_QUERY_ID = "Query_1";

const NUCLEOTIDE_LETTERS = "ACGTURYKMSWBDHVN";
const PROTEIN_LETTERS = "ACDEFGHIKLMNPQRSTVWYBZXJUO*";

const RESIDUE = 1;
const GAP = 2;

function alphabetTable(letters: string): Uint8Array {
  const table = new Uint8Array(128);
  for (const ch of letters) {
    table[ch.charCodeAt(0)] = RESIDUE;
    table[ch.toLowerCase().charCodeAt(0)] = RESIDUE;
  }
  table["-".charCodeAt(0)] = GAP;
  return table;
}

const ALPHABETS: Readonly<Record<MoleculeType, { table: Uint8Array; describe: string }>> = {
  nucl: {
    table: alphabetTable(NUCLEOTIDE_LETTERS),
    describe: `a nucleotide sequence may contain only the IUPAC codes ${NUCLEOTIDE_LETTERS} and '-'`,
  },
  prot: {
    table: alphabetTable(PROTEIN_LETTERS),
    describe: `a protein sequence may contain only ${PROTEIN_LETTERS} and '-'`,
  },
};

const CR = 13;
const GT = 62;

/** Whitespace stripped from sequence lines: space, tab, CR, VT, FF. */
function isSequenceWhitespace(code: number): boolean {
  return code === 32 || code === 9 || code === CR || code === 11 || code === 12;
}

/** C0 controls (except tab), DEL and C1 controls: they would make BLAST's XML report invalid. */
function isHeaderControl(code: number): boolean {
  return (code < 32 && code !== 9) || (code >= 127 && code <= 159);
}

function showChar(text: string, at: number): string {
  const code = text.codePointAt(at) ?? 0;
  if (code > 32 && code < 127) return `'${String.fromCharCode(code)}'`;
  return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
}

/**
 * Beyond ASCII: BLAST+ 2.12 accepts such a header, then its XML writer throws CStringException on
 * every attempt, so a job carrying one is certain to fail.
 */
function isNonAscii(code: number): boolean {
  return code > 126;
}

/** A header as quoted in messages: bounded length, control and non-ASCII characters replaced. */
function quoteHeader(header: string): string {
  let shown = "";
  const bounded = header.length > 60 ? header.slice(0, 60) : header;
  for (const ch of bounded) {
    const code = ch.codePointAt(0) ?? 0;
    shown += isHeaderControl(code) || isNonAscii(code) ? "?" : ch;
  }
  return `'>${shown}${bounded.length < header.length ? "…" : ""}'`;
}

/**
 * UTF-8 length of `text`. Node's global Buffer counts without copying (~1.4 ms for 10 MB, where
 * encoding takes ~11 ms); browsers, where the web app runs this parser too, encode. Not imported
 * from node:buffer, so the module bundles for the browser.
 */
function utf8ByteLength(text: string): number {
  const nodeBuffer = (globalThis as { Buffer?: { byteLength(text: string, encoding: "utf8"): number } }).Buffer;
  return nodeBuffer ? nodeBuffer.byteLength(text, "utf8") : new TextEncoder().encode(text).byteLength;
}

function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

interface Draft {
  readonly index: number;
  readonly id: string;
  readonly description: string;
  /** How the record is named in messages, e.g. `record 2 ('>seq2 kinase')`; built only for a message. */
  readonly label: () => string;
  readonly parts: string[];
  letters: number;
  /** Set once the record has an issue; its remaining lines are skipped. */
  failed: boolean;
}

class IssueLimitReached extends Error {}

/**
 * Parses and validates a query FASTA for a program whose queries are `molecule`.
 *
 * Rules (each refusal is a {@link ValidationError} issue with `loc` `["body", "query_fasta"]`, or
 * `["body", "query_fasta", i]` where `i` is the 0-based index of the offending record; messages
 * name records 1-based, e.g. "record 3 ('>seq3')"):
 * - Lines end in `\n` or `\r\n`; blank lines are ignored; whitespace inside sequence lines is
 *   removed; letters are case-insensitive and stored upper-case.
 * - A header line starts with `>` in the first column. The id is the text right after `>` up to
 *   the first whitespace (BLAST's rule); an empty id is refused. Duplicate ids are allowed: BLAST
 *   numbers queries itself and results are keyed by position, never by id.
 * - Text with no header at all is one query with id `Query_1`, as BLAST treats a bare sequence.
 *   Once any header is present, non-blank text before the first header is refused.
 * - Sequence letters must be in the molecule's alphabet (nucleotide IUPAC `ACGTURYKMSWBDHVN`,
 *   protein `ACDEFGHIKLMNPQRSTVWYBZXJUO*`), plus `-`. Gaps are accepted and dropped, exactly as
 *   BLAST 2.12 drops them (with a warning), so coordinates match what BLAST searched. Digits and
 *   every other character are refused; the first bad character of a record is reported with its
 *   line and column. A record with no letters is refused (BLAST fails the whole run on one).
 * - Headers may not contain control characters (they would corrupt BLAST's XML report) nor
 *   characters beyond ASCII (BLAST+ 2.12 accepts them, then fails writing its XML report).
 * - Every {@link FastaLimits} bound is enforced, each with its own message and type `too_long`.
 *
 * Runs in time linear in the text (a single pass, no regular expressions). At most 20 issues are
 * reported; parsing stops at the 20th, or at once when the text or the record count is too large.
 *
 * @throws ValidationError for every problem in the caller's text, and nothing else.
 */
export function parseQueryFasta(
  text: string,
  molecule: MoleculeType,
  limits: FastaLimits = FASTA_LIMITS,
): FastaRecord[] {
  const root = ["body", "query_fasta"] as const;
  if (typeof text !== "string") {
    throw new ValidationError([{ loc: root, msg: "query_fasta must be a string", type: "string_type" }]);
  }
  const bytes = utf8ByteLength(text);
  if (bytes > limits.maxBytes) {
    throw new ValidationError([
      {
        loc: root,
        msg: `query_fasta is ${formatCount(bytes)} bytes; the limit is ${formatCount(limits.maxBytes)} bytes`,
        type: "too_long",
      },
    ]);
  }

  const alphabet = ALPHABETS[molecule];
  const issues: FieldIssue[] = [];
  const records: FastaRecord[] = [];
  const report = (issue: FieldIssue): void => {
    issues.push(issue);
    if (issues.length >= MAX_REPORTED_ISSUES) throw new IssueLimitReached();
  };
  const recordIssue = (draft: Draft, msg: string, type: string): void => {
    draft.failed = true;
    report({ loc: [...root, draft.index], msg: `${draft.label()} ${msg}`, type });
  };

  // Text before any header is gathered as an implicit bare query; whether it is one (no header
  // anywhere) or an error (a header follows) is only known later.
  let current: Draft = {
    index: 0,
    id: BARE_QUERY_ID,
    description: "",
    label: () => `record 1 (no header, taken as '${BARE_QUERY_ID}')`,
    parts: [],
    letters: 0,
    failed: false,
  };
  let sawHeader = false;
  let preambleLine = 0;
  let deferredBareIssue: FieldIssue | undefined;
  let recordCount = 0;

  const finish = (draft: Draft): void => {
    if (draft.failed) return;
    if (draft.letters === 0) {
      recordIssue(draft, "has no sequence letters", "value_error");
      return;
    }
    records.push({ id: draft.id, description: draft.description, sequence: draft.parts.join("").toUpperCase() });
  };

  const startRecord = (lineStart: number, lineEnd: number, lineNo: number): void => {
    if (!sawHeader) {
      sawHeader = true;
      if (preambleLine > 0) {
        report({
          loc: root,
          msg: `line ${preambleLine}: text before the first '>' header; start every sequence with a header line, or send one sequence with no header at all`,
          type: "value_error",
        });
      }
    } else {
      finish(current);
    }
    recordCount += 1;
    const index = recordCount - 1;
    if (recordCount > limits.maxSequences) {
      issues.push({
        loc: root,
        msg: `query_fasta has more than ${formatCount(limits.maxSequences)} sequences (the limit); the header at line ${lineNo} starts sequence ${formatCount(recordCount)}`,
        type: "too_long",
      });
      throw new IssueLimitReached();
    }
    const header = text.slice(lineStart + 1, lineEnd);
    let idEnd = 0;
    while (idEnd < header.length && header.charCodeAt(idEnd) !== 32 && header.charCodeAt(idEnd) !== 9) idEnd++;
    const id = header.slice(0, idEnd);
    current = {
      index,
      id,
      description: header.slice(idEnd).trim(),
      label: () => `record ${formatCount(index + 1)} (${quoteHeader(header)})`,
      parts: [],
      letters: 0,
      failed: false,
    };
    if (header.length > limits.maxHeaderLength) {
      recordIssue(
        current,
        `has a header of ${formatCount(header.length)} characters; the limit is ${formatCount(limits.maxHeaderLength)}`,
        "too_long",
      );
      return;
    }
    for (let i = 0; i < header.length; i++) {
      if (isHeaderControl(header.charCodeAt(i))) {
        recordIssue(
          current,
          `has a control character ${showChar(header, i)} in its header at line ${lineNo}`,
          "value_error",
        );
        return;
      }
      if (isNonAscii(header.charCodeAt(i))) {
        recordIssue(
          current,
          `has a non-ASCII character ${showChar(header, i)} in its header at line ${lineNo}: BLAST+ writes only ASCII headers`,
          "value_error",
        );
        return;
      }
    }
    if (id.length === 0) {
      recordIssue(
        current,
        `has an empty id at line ${lineNo}: the identifier must follow '>' directly, with no space`,
        "value_error",
      );
    }
  };

  /** Marks the current record failed; before any header the issue waits (see the preamble rule). */
  const failCurrent = (msg: string, type: string): void => {
    if (sawHeader) {
      recordIssue(current, msg, type);
      return;
    }
    current.failed = true;
    deferredBareIssue = { loc: [...root, 0], msg: `${current.label()} ${msg}`, type };
  };

  const addSequenceLine = (lineStart: number, lineEnd: number, lineNo: number): void => {
    if (!sawHeader && preambleLine === 0) preambleLine = lineNo;
    if (current.failed) return;
    const draft = current;
    let runStart = lineStart;
    const keepRun = (runEnd: number): void => {
      if (runStart >= runEnd) return;
      draft.parts.push(text.slice(runStart, runEnd));
      draft.letters += runEnd - runStart;
    };
    for (let i = lineStart; i < lineEnd; i++) {
      const code = text.charCodeAt(i);
      const kind = code < 128 ? (alphabet.table[code] ?? 0) : 0;
      if (kind === RESIDUE) continue;
      keepRun(i);
      runStart = i + 1;
      if (kind === GAP || isSequenceWhitespace(code)) continue;
      let why: string = alphabet.describe;
      if (code >= 48 && code <= 57) why = "digits are not allowed in a sequence";
      else if (code === GT) why = "a header line must start with '>' in the first column";
      failCurrent(
        `has an invalid character ${showChar(text, i)} at line ${lineNo}, column ${i - lineStart + 1}: ${why}`,
        "value_error",
      );
      return;
    }
    keepRun(lineEnd);
    if (draft.letters > limits.maxSequenceLetters) {
      failCurrent(
        `has more than ${formatCount(limits.maxSequenceLetters)} letters (the limit for one sequence)`,
        "too_long",
      );
    }
  };

  try {
    let lineNo = 0;
    let pos = 0;
    const length = text.length;
    while (pos <= length) {
      let end = text.indexOf("\n", pos);
      if (end === -1) end = length;
      const lineEnd = end > pos && text.charCodeAt(end - 1) === CR ? end - 1 : end;
      lineNo += 1;
      if (lineEnd > pos && text.charCodeAt(pos) === GT) startRecord(pos, lineEnd, lineNo);
      else if (!isBlank(text, pos, lineEnd)) addSequenceLine(pos, lineEnd, lineNo);
      if (end === length) break;
      pos = end + 1;
    }
    if (sawHeader) finish(current);
    else if (preambleLine === 0) {
      report({ loc: root, msg: "query_fasta contains no sequences", type: "value_error" });
    } else if (deferredBareIssue !== undefined) {
      report(deferredBareIssue);
    } else {
      finish(current);
    }
  } catch (error) {
    if (!(error instanceof IssueLimitReached)) throw error;
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return records;
}

function isBlank(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (!isSequenceWhitespace(text.charCodeAt(i))) return false;
  return true;
}

/**
 * Renders records as FASTA for BLAST: a `>id description` header (just `>id` when there is no
 * description) and the sequence wrapped at `lineWidth` letters, every line ending in `\n`.
 */
export function toFasta(records: readonly FastaRecord[], lineWidth = 80): string {
  if (!Number.isSafeInteger(lineWidth) || lineWidth < 1) {
    throw new RangeError(`lineWidth must be a positive integer, got ${lineWidth}`);
  }
  const out: string[] = [];
  for (const record of records) {
    out.push(record.description ? `>${record.id} ${record.description}\n` : `>${record.id}\n`);
    for (let i = 0; i < record.sequence.length; i += lineWidth) {
      out.push(`${record.sequence.slice(i, i + lineWidth)}\n`);
    }
  }
  return out.join("");
}

/** A run of consecutive queries that one shard searches. */
export interface QueryBatch {
  /** 0-based position of the batch among the request's batches. */
  index: number;
  /**
   * 0-based index, in the whole request, of the batch's first query. The merge keys results by
   * (batch, query index), never by BLAST's per-run `Query_N`.
   */
  firstQueryIndex: number;
  records: FastaRecord[];
  /** Total sequence letters in the batch. */
  letters: number;
}

/**
 * Splits queries, in order, into batches of at most `maxLetters` letters (see
 * `QUERY_BATCH_LETTERS`). A sequence is never split; one longer than `maxLetters` forms a batch
 * of its own. Every query lands in exactly one batch, and concatenating the batches' records
 * gives back the input order.
 */
export function batchQueries(records: readonly FastaRecord[], maxLetters: number): QueryBatch[] {
  if (!Number.isSafeInteger(maxLetters) || maxLetters < 1) {
    throw new RangeError(`maxLetters must be a positive integer, got ${maxLetters}`);
  }
  const batches: QueryBatch[] = [];
  let current: QueryBatch | undefined;
  records.forEach((record, queryIndex) => {
    const letters = record.sequence.length;
    if (current !== undefined && current.letters + letters > maxLetters) {
      batches.push(current);
      current = undefined;
    }
    current ??= { index: batches.length, firstQueryIndex: queryIndex, records: [], letters: 0 };
    current.records.push(record);
    current.letters += letters;
  });
  if (current !== undefined) batches.push(current);
  return batches;
}
