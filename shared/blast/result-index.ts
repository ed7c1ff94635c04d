import { z } from "zod";
import { decodeXml } from "./tabular.js";

/*
 * The index of a merged BLAST XML result (issue 23 item 2): per query, the byte range of its
 * `<Iteration>` in the uncompressed XML and a summary (id, definition, length, hit count, best
 * e-value and bit score); per gzip member of the stored file, where it starts compressed and
 * uncompressed. A page of one query then reads only the members that cover its range (a range
 * GET of a few hundred KB from Blob storage) instead of the whole multi-GB file.
 *
 * The builder sees the XML bytes once, as they stream to the gzip, and keeps only the summaries
 * and the text of the iteration head it is in (bounded), never the document.
 */

/** One query (iteration) of a result. Text is decoded (entities, UTF-8). */
export const queryIndexEntrySchema = z.object({
  /** 1-based position of the query in the result. */
  n: z.number().int().positive(),
  id: z.string(),
  def: z.string(),
  len: z.number().int().nonnegative(),
  hits: z.number().int().nonnegative(),
  best_evalue: z.number().nullable(),
  best_bits: z.number().nullable(),
  /** [start, end) of `<Iteration>…</Iteration>` in the uncompressed XML. */
  range: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});
export type QueryIndexEntry = z.infer<typeof queryIndexEntrySchema>;

export const RESULT_INDEX_VERSION = 1;

export const resultIndexSchema = z.object({
  version: z.literal(RESULT_INDEX_VERSION),
  xml_bytes: z.number().int().nonnegative(),
  program: z.string(),
  database: z.string(),
  /** [compressed offset, uncompressed offset] of each gzip member, in order. */
  members: z.array(z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()])),
  queries: z.array(queryIndexEntrySchema),
});
export type ResultIndex = z.infer<typeof resultIndexSchema>;

const ITERATION_OPEN = "<Iteration>";
const ITERATION_CLOSE = "</Iteration>";
const HITS_OPEN = "<Iteration_hits";
const HIT_OPEN = "<Hit>";
const HSP_CLOSE = "</Hsp>";
/** The longest marker searched for, less one: that many bytes stay for the next chunk. */
const KEEP = Math.max(ITERATION_OPEN.length, ITERATION_CLOSE.length, HITS_OPEN.length, HSP_CLOSE.length) - 1;
/** An iteration head (id, definition, length) or a first HSP larger than this is not indexed. */
const HELD_LIMIT = 16 * 1024 * 1024;

/** Text of `<tag>…</tag>` in a binary string, or undefined. */
function leaf(text: string, tag: string): string | undefined {
  const open = text.indexOf(`<${tag}>`);
  if (open < 0) return undefined;
  const start = open + tag.length + 2;
  const end = text.indexOf(`</${tag}>`, start);
  return end < 0 ? undefined : text.slice(start, end);
}

/** Decoded text of an XML value held as a binary string (entities, then UTF-8). */
export function xmlText(raw: string | undefined): string {
  return Buffer.from(decodeXml(raw ?? ""), "latin1").toString("utf8");
}

function numberOf(raw: string | undefined): number | null {
  if (raw === undefined || raw.trim() === "") return null;
  const value = Number(raw.trim());
  return Number.isFinite(value) ? value : null;
}

interface OpenIteration {
  start: number;
  /** The head (before `<Iteration_hits`), while it is read. */
  head: string | undefined;
  n: number;
  id: string;
  def: string;
  len: number;
  hits: number;
  /** Text of the first hit up to its first `</Hsp>`, while it is read. */
  firstHsp: string | undefined;
  bestEvalue: number | null;
  bestBits: number | null;
}

/**
 * Builds a {@link ResultIndex} from the bytes of a BLAST XML document as they stream past
 * (`write` each chunk in order, then `finish`). Memory: the current iteration's head and first
 * HSP, plus the summaries. Markers split across chunks are found (the last few bytes of a chunk
 * are kept for the next). It does not validate the document (the merge does).
 */
export class ResultIndexBuilder {
  private consumed = 0;
  private carry = "";
  private current: OpenIteration | undefined;
  private readonly queries: QueryIndexEntry[] = [];
  private header = "";
  private headerDone = false;
  private failure: Error | undefined;

  /** Why the index cannot be built (an oversized head), or undefined. */
  get error(): Error | undefined {
    return this.failure;
  }

  /** Bytes seen so far. */
  get bytes(): number {
    return this.consumed;
  }

  write(chunk: Buffer): void {
    if (this.failure || chunk.length === 0) return;
    const text = this.carry + chunk.toString("latin1");
    const base = this.consumed - this.carry.length;
    this.consumed += chunk.length;
    try {
      this.carry = text.slice(this.scan(text, base));
    } catch (error) {
      this.failure = error as Error;
      this.carry = "";
    }
  }

  /** Scans `text` (starting at absolute offset `base`); returns where the unscanned rest begins. */
  private scan(text: string, base: number): number {
    // A marker may start only before `safe` unless the text holds it whole.
    const safe = Math.max(0, text.length - KEEP);
    let p = 0;
    if (!this.headerDone) {
      const at = text.indexOf(ITERATION_OPEN);
      const upTo = at < 0 ? safe : at;
      if (this.header.length < 64 * 1024) this.header += text.slice(0, upTo);
      if (at < 0) return upTo;
      this.headerDone = true;
    }
    for (;;) {
      const it = this.current;
      if (!it) {
        const at = text.indexOf(ITERATION_OPEN, p);
        if (at < 0) return Math.max(p, safe);
        this.current = {
          start: base + at,
          head: "",
          n: this.queries.length + 1,
          id: "",
          def: "",
          len: 0,
          hits: 0,
          firstHsp: undefined,
          bestEvalue: null,
          bestBits: null,
        };
        p = at + ITERATION_OPEN.length;
        continue;
      }
      if (it.head !== undefined) {
        const hits = text.indexOf(HITS_OPEN, p);
        const close = text.indexOf(ITERATION_CLOSE, p);
        const end = hits < 0 ? close : close < 0 ? hits : Math.min(hits, close);
        if (end < 0) {
          it.head += text.slice(p, Math.max(p, safe));
          if (it.head.length > HELD_LIMIT) throw new Error(`query ${it.n}: iteration head over ${HELD_LIMIT} bytes`);
          return Math.max(p, safe);
        }
        const head = it.head + text.slice(p, end);
        it.head = undefined;
        it.id = xmlText(leaf(head, "Iteration_query-ID"));
        it.def = xmlText(leaf(head, "Iteration_query-def"));
        it.len = numberOf(leaf(head, "Iteration_query-len")) ?? 0;
        p = end;
        continue;
      }
      if (it.firstHsp !== undefined) {
        const close = text.indexOf(HSP_CLOSE, p);
        if (close < 0) {
          it.firstHsp += text.slice(p, Math.max(p, safe));
          if (it.firstHsp.length > HELD_LIMIT) throw new Error(`query ${it.n}: first HSP over ${HELD_LIMIT} bytes`);
          return Math.max(p, safe);
        }
        const hsp = it.firstHsp + text.slice(p, close);
        it.firstHsp = undefined;
        it.bestEvalue = numberOf(leaf(hsp, "Hsp_evalue"));
        it.bestBits = numberOf(leaf(hsp, "Hsp_bit-score"));
        p = close + HSP_CLOSE.length;
        continue;
      }
      const close = text.indexOf(ITERATION_CLOSE, p);
      const limit = close < 0 ? safe : close;
      // Hits before the end of the iteration (or of what is safely held).
      for (let at = text.indexOf(HIT_OPEN, p); at >= 0 && at < limit; at = text.indexOf(HIT_OPEN, p)) {
        it.hits++;
        p = at + HIT_OPEN.length;
        if (it.hits === 1) {
          it.firstHsp = "";
          break;
        }
      }
      if (it.firstHsp !== undefined) continue;
      if (close < 0) return Math.max(p, safe);
      const end = close + ITERATION_CLOSE.length;
      this.queries.push({
        n: it.n,
        id: it.id,
        def: it.def,
        len: it.len,
        hits: it.hits,
        best_evalue: it.bestEvalue,
        best_bits: it.bestBits,
        range: [it.start, base + end],
      });
      this.current = undefined;
      p = end;
    }
  }

  /**
   * The index of everything written. `members` is the gzip member table of the stored file
   * (see `createParallelGzip`'s `onMember`). Throws when the document could not be indexed.
   */
  finish(members: ReadonlyArray<readonly [number, number]>, database?: string): ResultIndex {
    if (this.failure) throw this.failure;
    if (this.current) throw new Error(`query ${this.current.n} has no </Iteration>`);
    return {
      version: RESULT_INDEX_VERSION,
      xml_bytes: this.consumed,
      program: xmlText(leaf(this.header, "BlastOutput_program")),
      database: database ?? xmlText(leaf(this.header, "BlastOutput_db")),
      members: members.map(([c, u]) => [c, u] as [number, number]),
      queries: this.queries,
    };
  }
}

/**
 * Which stored bytes hold `[start, end)` of the XML: the compressed byte range to read (whole
 * members) and where the range begins in their gunzipped bytes. `compressedBytes` is the stored
 * file's size (the end of its last member).
 */
export function memberSpan(
  index: Pick<ResultIndex, "members" | "xml_bytes">,
  range: readonly [number, number],
  compressedBytes: number,
): { offset: number; count: number; skip: number } {
  const [start, end] = range;
  const { members } = index;
  let first = 0;
  // The last member starting at or before `start` (binary search: 3,300 members for 3.3 GB).
  let lo = 0;
  let hi = members.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((members[mid]?.[1] ?? 0) <= start) {
      first = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  // Members that start at `start` but hold nothing (an empty member) are skipped by gunzip anyway.
  let last = first;
  while (last + 1 < members.length && (members[last + 1]?.[1] ?? 0) < end) last++;
  const from = members[first]?.[0] ?? 0;
  const to = last + 1 < members.length ? (members[last + 1]?.[0] ?? compressedBytes) : compressedBytes;
  return { offset: from, count: to - from, skip: start - (members[first]?.[1] ?? 0) };
}
