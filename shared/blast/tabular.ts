import { once } from "node:events";
import { type BlastHit, type BlastHsp, type BlastIteration, readBlastXml } from "./xml-merge.js";

/*
 * Text is handled as binary strings (one character per byte, see xml-merge.ts) so identifiers
 * and definition lines reach the output with the bytes BLAST wrote.
 */

const FIELDS_LINE =
  "# Fields: query acc.ver, subject acc.ver, % identity, alignment length, mismatches, gap opens, " +
  "q. start, q. end, s. start, s. end, evalue, bit score";

/** Number of fields after the type tag of each FASTA-style Seq-id (NCBI "FASTA defline" syntax). */
const SEQ_ID_FIELDS: Readonly<Record<string, number>> = {
  lcl: 1,
  bbs: 1,
  bbm: 1,
  gim: 1,
  gi: 1,
  gb: 2,
  emb: 2,
  dbj: 2,
  pir: 2,
  prf: 2,
  sp: 2,
  tr: 2,
  ref: 2,
  tpg: 2,
  tpe: 2,
  tpd: 2,
  gpp: 2,
  nat: 2,
  gnl: 2,
  pdb: 2,
  pat: 3,
  pgp: 3,
};

const NAMED_ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Decodes XML entities of a binary string; characters beyond latin1 become their UTF-8 bytes. */
export function decodeXml(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#")) {
      const code = ref[1] === "x" ? Number.parseInt(ref.slice(2), 16) : Number.parseInt(ref.slice(1), 10);
      if (!Number.isFinite(code) || code > 0x10ffff) return whole;
      return Buffer.from(String.fromCodePoint(code), "utf8").toString("latin1");
    }
    return NAMED_ENTITIES[ref] ?? whole;
  });
}

function firstWord(text: string): string {
  return text.trim().split(/\s+/)[0] ?? "";
}

/** printf("%.<digits>f") for a non-negative finite number below 1e21. */
export function formatFixed(value: number, digits: number): string {
  const rounded = value.toFixed(digits);
  const exact = value.toFixed(100);
  const dot = exact.indexOf(".");
  const rest = exact.slice(dot + 1 + digits);
  if (!/^50*$/.test(rest)) return rounded;
  // An exact binary tie: printf rounds to even, toFixed rounds up.
  const truncated = digits === 0 ? exact.slice(0, dot) : exact.slice(0, dot + 1 + digits);
  const lastDigit = Number(truncated.at(-1));
  return lastDigit % 2 === 0 ? truncated : rounded;
}

/** printf("%.<digits>e") for a positive finite number: two-digit exponent at least, ties to even. */
export function formatExponential(value: number, digits: number): string {
  let text = value.toExponential(digits);
  const exact = value.toExponential(100);
  const [exactMantissa = "", exactExponent = ""] = exact.split("e");
  const rest = exactMantissa.slice(2 + digits);
  if (/^50*$/.test(rest)) {
    const truncated = exactMantissa.slice(0, digits === 0 ? 1 : 2 + digits);
    if (Number(truncated.at(-1)) % 2 === 0) text = `${truncated}e${exactExponent}`;
  }
  return text.replace(/e([+-])(\d)$/, "e$10$2");
}

/** An e-value as BLAST's tabular output prints it (align_format GetScoreString + tabular override). */
export function formatEvalue(evalue: number): string {
  if (evalue < 1.0e-180) return "0.0";
  if (evalue < 0.0009) return formatExponential(evalue, 2);
  if (evalue < 0.1) return formatFixed(evalue, 3);
  if (evalue < 1.0) return formatFixed(evalue, 2);
  if (evalue < 10.0) return formatFixed(evalue, 1);
  return formatFixed(evalue, 0);
}

/** A bit score as BLAST's tabular output prints it (truncated to an integer above 99.9). */
export function formatBitScore(bits: number): string {
  if (bits > 99999) return formatExponential(bits, 3);
  if (bits > 99.9) return String(Math.trunc(bits)).padStart(3, " ");
  return formatFixed(bits, 1);
}

/**
 * The subject's "acc.ver" as outfmt 6 prints it: the first non-gi Seq-id of `Hit_id` (gnl as
 * `db:tag`, pdb as `entry_chain`, others their accession), the id itself when BLAST stripped
 * `lcl|`, and the first word of the definition line for databases built without -parse_seqids.
 */
function subjectId(hit: BlastHit): string {
  const id = decodeXml(hit.fields.Hit_id ?? "");
  if (id.startsWith("gnl|BL_ORD_ID|")) return firstWord(decodeXml(hit.fields.Hit_def ?? ""));
  if (!id.includes("|")) return id;
  const tokens = id.split("|");
  const ids: { type: string; values: string[] }[] = [];
  for (let i = 0; i < tokens.length; ) {
    const type = tokens[i] ?? "";
    const count = SEQ_ID_FIELDS[type];
    if (count === undefined) return ids.length === 0 ? id : formatSeqId(ids);
    ids.push({ type, values: tokens.slice(i + 1, i + 1 + count) });
    i += 1 + count;
  }
  return formatSeqId(ids);
}

function formatSeqId(ids: { type: string; values: string[] }[]): string {
  const best = ids.find((s) => s.type !== "gi") ?? ids[0];
  if (!best) return "";
  const [a = "", b = ""] = best.values;
  if (best.type === "gnl") return `${a}:${b}`;
  if (best.type === "pdb") return b === "" ? a : `${a}_${b}`;
  // pir/prf ids may have an empty accession and only a name ("pir||S12345").
  return a === "" ? b : a;
}

function countGapOpens(aligned: string): number {
  let opens = 0;
  let inGap = false;
  for (let i = 0; i < aligned.length; i++) {
    const gap = aligned.charCodeAt(i) === 0x2d;
    if (gap && !inGap) opens++;
    inGap = gap;
  }
  return opens;
}

function integer(hsp: BlastHsp, field: string): number {
  const value = Number(hsp[field]);
  if (!Number.isFinite(value)) throw new Error(`HSP field ${field} is missing or not a number`);
  return value;
}

function hspRow(queryId: string, subject: string, hsp: BlastHsp): string {
  const alignLength = integer(hsp, "Hsp_align-len");
  const identity = integer(hsp, "Hsp_identity");
  const qseq = hsp.Hsp_qseq ?? "";
  const hseq = hsp.Hsp_hseq ?? "";
  const gaps =
    hsp.Hsp_gaps !== undefined
      ? integer(hsp, "Hsp_gaps")
      : (qseq.match(/-/g)?.length ?? 0) + (hseq.match(/-/g)?.length ?? 0);
  return [
    queryId,
    subject,
    formatFixed(alignLength > 0 ? (100 * identity) / alignLength : 0, 3),
    String(alignLength),
    String(alignLength - identity - gaps),
    String(countGapOpens(qseq) + countGapOpens(hseq)),
    hsp["Hsp_query-from"] ?? "",
    hsp["Hsp_query-to"] ?? "",
    hsp["Hsp_hit-from"] ?? "",
    hsp["Hsp_hit-to"] ?? "",
    formatEvalue(integer(hsp, "Hsp_evalue")),
    formatBitScore(integer(hsp, "Hsp_bit-score")),
  ].join("\t");
}

function iterationRows(iteration: BlastIteration): string[] {
  const queryId = firstWord(decodeXml(iteration.queryDef)) || decodeXml(iteration.queryId);
  const rows: string[] = [];
  for (const hit of iteration.hits) {
    const subject = subjectId(hit);
    for (const hsp of hit.hsps) rows.push(hspRow(queryId, subject, hsp));
  }
  return rows;
}

async function write(output: NodeJS.WritableStream, text: string): Promise<void> {
  if (text.length === 0) return;
  if (!output.write(Buffer.from(text, "latin1"))) await once(output, "drain");
}

/** Options of {@link renderTabular}. */
export interface RenderTabularOptions {
  /** The outfmt 7 layout, with comment lines; otherwise outfmt 6. */
  commented?: boolean;
}

/**
 * Renders BLAST XML (typically the merged result) as tabular output, one iteration at a time:
 * outfmt 6 with the standard columns `qaccver saccver pident length mismatch gapopen qstart qend
 * sstart send evalue bitscore`, or with `commented` the outfmt 7 layout (version, query,
 * database, fields and hit-count comment lines per query, and a final "BLAST processed" line).
 *
 * Values are formatted as BLAST formats them, from the XML's values: BLAST prints e-values and
 * bit scores to 6 significant digits in XML, so a tabular value whose true value lies within
 * rounding distance of a display boundary can differ in the last digit from `blastn -outfmt 6`.
 * The output stream is not ended.
 */
export async function renderTabular(
  xml: AsyncIterable<string | Uint8Array> | NodeJS.ReadableStream,
  output: NodeJS.WritableStream,
  options: RenderTabularOptions = {},
): Promise<void> {
  const commented = options.commented === true;
  let version = "";
  let database = "";
  let queries = 0;
  for await (const event of readBlastXml(xml)) {
    if (event.type === "header") {
      version = decodeXml(event.header.fields.BlastOutput_version ?? "");
      database = decodeXml(event.header.fields.BlastOutput_db ?? "");
    } else if (event.type === "iteration") {
      queries++;
      const rows = iterationRows(event.iteration);
      const lines: string[] = [];
      if (commented) {
        lines.push(`# ${version}`, `# Query: ${decodeXml(event.iteration.queryDef)}`, `# Database: ${database}`);
        if (rows.length > 0) lines.push(FIELDS_LINE);
        lines.push(`# ${rows.length} hits found`);
      }
      lines.push(...rows);
      if (lines.length > 0) await write(output, `${lines.join("\n")}\n`);
    }
  }
  if (commented) await write(output, `# BLAST processed ${queries} queries\n`);
}
