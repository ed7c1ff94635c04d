import type { HitDetail } from "../api.js";

/*
 * The alignment text of one HSP as NCBI BLAST and SequenceServer print it: query, match line and
 * subject in blocks of 60 columns, each line with the coordinates of its first and last letter;
 * and the aligned regions of chosen hits as FASTA. Pure functions (unit-tested).
 */

type Hsp = HitDetail["hsp_list"][number];

/** Columns per block, as NCBI's pairwise view. */
export const BLOCK_WIDTH = 60;

/** Letters of sequence each aligned letter spans: 3 on a translated side (blastx query, tblastn subject). */
export function letterSteps(program: string): { query: number; hit: number } {
  switch (program.toLowerCase()) {
    case "blastx":
      return { query: 3, hit: 1 };
    case "tblastn":
      return { query: 1, hit: 3 };
    case "tblastx":
      return { query: 3, hit: 3 };
    default:
      return { query: 1, hit: 1 };
  }
}

/** One line of a block: its first and last coordinate (equal and unchanged when the line holds only gaps). */
export interface AlignedLine {
  text: string;
  start: number;
  end: number;
}

/** Three lines shown together: query, match line, subject. */
export interface AlignmentBlock {
  query: AlignedLine;
  midline: string;
  hit: AlignedLine;
}

/**
 * Walks one side of an alignment: a side on the minus strand or a negative frame reads from its
 * larger coordinate down; otherwise from the smaller one up. A gap (`-`) takes a column but no
 * coordinate; each other letter advances by `step` (3 for a translated side).
 */
function side(seq: string, from: number, to: number, reverse: boolean, step: number, width: number): AlignedLine[] {
  const dir = reverse ? -1 : 1;
  let next = reverse ? Math.max(from, to) : Math.min(from, to);
  const lines: AlignedLine[] = [];
  for (let at = 0; at < seq.length; at += width) {
    const text = seq.slice(at, at + width);
    const letters = text.replace(/[-/\\]/g, "").length;
    if (letters === 0) {
      const last = next - dir;
      lines.push({ text, start: last, end: last });
      continue;
    }
    const start = next;
    const end = start + dir * (letters * step - 1);
    lines.push({ text, start, end });
    next = end + dir;
  }
  return lines;
}

function reversed(strand: Hsp["query_strand"], frame: number | null, from: number, to: number): boolean {
  if (strand === "minus") return true;
  if (frame !== null && frame < 0) return true;
  return from > to;
}

/** The HSP's alignment cut into blocks of `width` columns, with coordinates. */
export function alignmentBlocks(program: string, hsp: Hsp, width = BLOCK_WIDTH): AlignmentBlock[] {
  const steps = letterSteps(program);
  const query = side(
    hsp.qseq,
    hsp.query_from,
    hsp.query_to,
    reversed(hsp.query_strand, hsp.query_frame, hsp.query_from, hsp.query_to),
    steps.query,
    width,
  );
  const hit = side(
    hsp.hseq,
    hsp.hit_from,
    hsp.hit_to,
    reversed(hsp.hit_strand, hsp.hit_frame, hsp.hit_from, hsp.hit_to),
    steps.hit,
    width,
  );
  return query.map((q, i) => ({
    query: q,
    midline: hsp.midline.slice(i * width, (i + 1) * width),
    hit: hit[i] ?? { text: "", start: 0, end: 0 },
  }));
}

/** The three lines of a block as fixed-width text: labels and start coordinates padded to line up. */
export function blockText(block: AlignmentBlock): string {
  const pad = Math.max(String(block.query.start).length, String(block.hit.start).length);
  const left = (label: string, n: number | "") => `${label.padEnd(7)}${String(n).padEnd(pad)}  `;
  return [
    `${left("Query", block.query.start)}${block.query.text}  ${block.query.end}`,
    `${" ".repeat(7 + pad + 2)}${block.midline}`,
    `${left("Sbjct", block.hit.start)}${block.hit.text}  ${block.hit.end}`,
  ].join("\n");
}

function percent(part: number, whole: number): string {
  return whole > 0 ? `${Math.round((100 * part) / whole)}%` : "0%";
}

function capital(word: string): string {
  return word.charAt(0).toUpperCase() + word.slice(1);
}

function signed(frame: number): string {
  return frame > 0 ? `+${frame}` : String(frame);
}

/** NCBI's statistics line of an HSP: identities, positives (protein sides), gaps. */
export function hspStatistics(program: string, hsp: Hsp): string[] {
  const n = hsp.align_len;
  const parts = [`Identities ${hsp.identity}/${n} (${percent(hsp.identity, n)})`];
  if (!["blastn", "megablast"].includes(program.toLowerCase()))
    parts.push(`Positives ${hsp.positive}/${n} (${percent(hsp.positive, n)})`);
  parts.push(`Gaps ${hsp.gaps}/${n} (${percent(hsp.gaps, n)})`);
  return parts;
}

/** "Strand Plus/Minus" for nucleotide sides, "Frame +2" (or "+1/-3") for translated ones; empty for blastp. */
export function hspOrientation(hsp: Hsp): string {
  if (hsp.query_frame !== null || hsp.hit_frame !== null) {
    const frames = [hsp.query_frame, hsp.hit_frame].filter((f): f is number => f !== null).map(signed);
    return `Frame ${frames.join("/")}`;
  }
  if (hsp.query_strand && hsp.hit_strand) return `Strand ${capital(hsp.query_strand)}/${capital(hsp.hit_strand)}`;
  return "";
}

/**
 * The aligned regions of chosen hits as FASTA, one record per HSP: the subject's letters as they
 * align (gaps removed), named `accession:from-to` (`accession:cfrom-to` on the minus strand, as
 * NCBI names a region on the complementary strand) followed by the subject's title. The whole
 * subject sequences are not available to the web app: the database lives with the job API.
 */
export function alignedRegionsFasta(hits: readonly Pick<HitDetail, "hit" | "hsp_list">[]): string {
  const records: string[] = [];
  for (const { hit, hsp_list } of hits) {
    const name = hit.accession || hit.id;
    for (const hsp of hsp_list) {
      const minus = hsp.hit_strand === "minus" || (hsp.hit_frame !== null && hsp.hit_frame < 0);
      const range = `${minus ? "c" : ""}${hsp.hit_from}-${hsp.hit_to}`;
      const letters = hsp.hseq.replace(/[-/\\]/g, "");
      const wrapped = letters.match(/.{1,60}/g) ?? [];
      records.push([`>${name}:${range} ${hit.title}`.trimEnd(), ...wrapped].join("\n"));
    }
  }
  return records.length > 0 ? `${records.join("\n")}\n` : "";
}
