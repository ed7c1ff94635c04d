import { readLines } from "./lines.js";

/** One HSP row of BLAST's tabular output (`-outfmt 6`, the standard twelve columns). */
export interface HitRow {
  qseqid: string;
  sseqid: string;
  pident: number;
  length: number;
  mismatch: number;
  gapopen: number;
  qstart: number;
  qend: number;
  sstart: number;
  send: number;
  evalue: number;
  bitscore: number;
}

/** The result of reading a tabular stream: its rows, and whether reading stopped at the cap. */
export interface TabularRead {
  rows: HitRow[];
  truncated: boolean;
}

/**
 * Reads tabular rows from a stream, at most `maxRows` (then the download is cancelled: the page
 * shows those and offers the whole file as a download). Comment and blank lines are skipped; a
 * malformed line is an error naming its line number.
 */
export async function readTabular(
  body: ReadableStream<Uint8Array>,
  maxRows: number,
  onProgress?: (rows: number) => void,
): Promise<TabularRead> {
  const rows: HitRow[] = [];
  let lineNo = 0;
  for await (const line of readLines(body)) {
    lineNo += 1;
    if (line.length === 0 || line.startsWith("#")) continue;
    if (rows.length >= maxRows) return { rows, truncated: true };
    const f = line.split("\t");
    if (f.length < 12) throw new Error(`tabular result line ${lineNo} has ${f.length} fields, not 12`);
    const n = (i: number) => Number((f[i] ?? "").trim());
    rows.push({
      qseqid: f[0] ?? "",
      sseqid: f[1] ?? "",
      pident: n(2),
      length: n(3),
      mismatch: n(4),
      gapopen: n(5),
      qstart: n(6),
      qend: n(7),
      sstart: n(8),
      send: n(9),
      evalue: n(10),
      bitscore: n(11),
    });
    if (onProgress && rows.length % 5000 === 0) onProgress(rows.length);
  }
  return { rows, truncated: false };
}
