import { readLines } from "./lines.js";

/** One HSP's span on the query and its score (enough to draw it). */
export interface SpanHsp {
  queryFrom: number;
  queryTo: number;
  bitScore: number;
  evalue: number;
}

/** One subject sequence hit by a query. */
export interface SpanHit {
  id: string;
  def: string;
  hsps: SpanHsp[];
}

/** One query of the report: its name, length and best hits in report order. */
export interface QuerySummary {
  index: number;
  id: string;
  def: string;
  length: number;
  hits: SpanHit[];
  /** Hits in the report beyond those kept. */
  moreHits: number;
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function decode(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return String.fromCodePoint(Number.parseInt(ref.slice(2), 16));
    if (ref.startsWith("#")) return String.fromCodePoint(Number.parseInt(ref.slice(1), 10));
    return ENTITIES[ref] ?? whole;
  });
}

const LEAF = /^\s*<([A-Za-z_-]+)>([^<]*)<\/\1>\s*$/;
const OPEN_CLOSE = /^\s*<(\/?)(Iteration|Hit|Hsp)>\s*$/;

/**
 * Reads what the graphic overview needs from a BLAST XML report, line by line (BLAST and the
 * merge write one element per line): per query its definition and length, and for its first
 * `maxHits` hits each HSP's query span and score. Stops after `maxQueries` queries.
 */
export async function readXmlSummary(
  body: ReadableStream<Uint8Array>,
  limits: { maxQueries: number; maxHits: number },
): Promise<{ queries: QuerySummary[]; truncated: boolean }> {
  const queries: QuerySummary[] = [];
  let query: QuerySummary | undefined;
  let hit: SpanHit | undefined;
  let hsp: Partial<SpanHsp> | undefined;
  for await (const line of readLines(body)) {
    const tag = OPEN_CLOSE.exec(line);
    if (tag) {
      const closing = tag[1] === "/";
      switch (tag[2]) {
        case "Iteration":
          if (!closing) {
            if (queries.length >= limits.maxQueries) return { queries, truncated: true };
            query = { index: queries.length, id: "", def: "", length: 0, hits: [], moreHits: 0 };
          } else if (query) {
            queries.push(query);
            query = undefined;
          }
          break;
        case "Hit":
          if (!closing) hit = { id: "", def: "", hsps: [] };
          else if (hit && query) {
            if (query.hits.length < limits.maxHits) query.hits.push(hit);
            else query.moreHits += 1;
            hit = undefined;
          }
          break;
        case "Hsp":
          if (!closing) hsp = {};
          else if (hsp && hit && hsp.queryFrom !== undefined && hsp.queryTo !== undefined) {
            hit.hsps.push({
              queryFrom: hsp.queryFrom,
              queryTo: hsp.queryTo,
              bitScore: hsp.bitScore ?? 0,
              evalue: hsp.evalue ?? 0,
            });
            hsp = undefined;
          }
          break;
      }
      continue;
    }
    const leaf = LEAF.exec(line);
    if (!leaf || !query) continue;
    const [, name, raw = ""] = leaf;
    switch (name) {
      case "Iteration_query-ID":
        query.id = decode(raw);
        break;
      case "Iteration_query-def":
        query.def = decode(raw);
        break;
      case "Iteration_query-len":
        query.length = Number(raw);
        break;
      case "Hit_id":
        if (hit) hit.id = decode(raw);
        break;
      case "Hit_def":
        if (hit) hit.def = decode(raw);
        break;
      case "Hsp_bit-score":
        if (hsp) hsp.bitScore = Number(raw);
        break;
      case "Hsp_evalue":
        if (hsp) hsp.evalue = Number(raw);
        break;
      case "Hsp_query-from":
        if (hsp) hsp.queryFrom = Number(raw);
        break;
      case "Hsp_query-to":
        if (hsp) hsp.queryTo = Number(raw);
        break;
    }
  }
  return { queries, truncated: false };
}
