import { promisify } from "node:util";
import { gunzip } from "node:zlib";
import {
  memberSpan,
  type QueryIndexEntry,
  type ResultIndex,
  resultIndexSchema,
  xmlText,
} from "../../shared/blast/result-index.js";
import { type BlastHit, type BlastHsp, type BlastIteration, readBlastXml } from "../../shared/blast/xml-merge.js";
import { NotFoundError } from "../../shared/errors.js";
import type {
  HitDetail,
  HitPage,
  HitSummary,
  Hsp,
  QueryPage,
  QuerySummary,
} from "../../shared/jobs/result-page-schemas.js";
import { type ArtifactStore, MERGED_ARTIFACT, RESULT_INDEX_ARTIFACT } from "./artifact-store.js";

const gunzipAsync = promisify(gunzip);

/** Indexes kept in memory (~100 bytes per query: 1,440 queries ≈ 150 KB). */
const CACHED_INDEXES = 16;

/** A result stored before result indexes existed (or whose index failed to store). */
export class ResultIndexMissingError extends NotFoundError {}

type Artifacts = Pick<ArtifactStore, "getBytes" | "readRange" | "size">;

interface LoadedIndex {
  index: ResultIndex;
  storedBytes: number | null;
}

function nullableNumber(raw: string | undefined): number | null {
  if (raw === undefined) return null;
  const value = Number(raw.trim());
  return Number.isFinite(value) ? value : null;
}

function num(raw: string | undefined): number {
  return nullableNumber(raw) ?? 0;
}

function querySummary(q: QueryIndexEntry): QuerySummary {
  return {
    n: q.n,
    query_id: q.id,
    query_def: q.def,
    query_len: q.len,
    hits: q.hits,
    best_evalue: q.best_evalue,
    best_bit_score: q.best_bits,
  };
}

/** Which sides of an alignment are nucleotide (strands) and translated (frames), by program. */
const SIDES: Readonly<
  Record<string, { queryNucl: boolean; hitNucl: boolean; queryFrame: boolean; hitFrame: boolean }>
> = {
  blastn: { queryNucl: true, hitNucl: true, queryFrame: false, hitFrame: false },
  megablast: { queryNucl: true, hitNucl: true, queryFrame: false, hitFrame: false },
  blastp: { queryNucl: false, hitNucl: false, queryFrame: false, hitFrame: false },
  blastx: { queryNucl: true, hitNucl: false, queryFrame: true, hitFrame: false },
  tblastn: { queryNucl: false, hitNucl: true, queryFrame: false, hitFrame: true },
  tblastx: { queryNucl: true, hitNucl: true, queryFrame: true, hitFrame: true },
};

function strand(frame: number | null): "plus" | "minus" | null {
  if (frame === null) return "plus";
  return frame < 0 ? "minus" : "plus";
}

function hspView(program: string, h: BlastHsp): Hsp {
  const sides = SIDES[program.toLowerCase()] ?? SIDES.blastp;
  const queryFrame = nullableNumber(h["Hsp_query-frame"]);
  const hitFrame = nullableNumber(h["Hsp_hit-frame"]);
  const queryFrom = num(h["Hsp_query-from"]);
  const queryTo = num(h["Hsp_query-to"]);
  const hitFrom = num(h["Hsp_hit-from"]);
  const hitTo = num(h["Hsp_hit-to"]);
  return {
    num: num(h.Hsp_num),
    bit_score: num(h["Hsp_bit-score"]),
    score: num(h.Hsp_score),
    evalue: num(h.Hsp_evalue),
    query_from: queryFrom,
    query_to: queryTo,
    hit_from: hitFrom,
    hit_to: hitTo,
    query_frame: sides?.queryFrame ? queryFrame : null,
    hit_frame: sides?.hitFrame ? hitFrame : null,
    // blastn reports a minus-strand subject as hit-frame -1 (its coordinates then run down).
    query_strand: sides?.queryNucl ? strand(queryFrame) : null,
    hit_strand: sides?.hitNucl ? strand(hitFrame ?? (hitFrom > hitTo ? -1 : 1)) : null,
    identity: num(h.Hsp_identity),
    positive: num(h.Hsp_positive),
    gaps: num(h.Hsp_gaps),
    align_len: num(h["Hsp_align-len"]),
    qseq: xmlText(h.Hsp_qseq),
    hseq: xmlText(h.Hsp_hseq),
    midline: xmlText(h.Hsp_midline),
  };
}

/** Percent of `queryLen` covered by the union of the HSPs' query ranges. */
function queryCover(hsps: readonly Hsp[], queryLen: number): number {
  if (queryLen <= 0) return 0;
  const spans = hsps
    .map((h) => [Math.min(h.query_from, h.query_to), Math.max(h.query_from, h.query_to)] as const)
    .sort((a, b) => a[0] - b[0]);
  let covered = 0;
  let until = 0;
  for (const [from, to] of spans) {
    if (to <= until) continue;
    covered += to - Math.max(from, until + 1) + 1;
    until = to;
  }
  return Math.round((1000 * covered) / queryLen) / 10;
}

function hitSummary(hit: BlastHit, hsps: readonly Hsp[], queryLen: number): HitSummary {
  const f = hit.fields;
  const first = hsps[0];
  return {
    num: num(f.Hit_num),
    id: xmlText(f.Hit_id),
    accession: xmlText(f.Hit_accession),
    title: xmlText(f.Hit_def),
    len: num(f.Hit_len),
    hsps: hsps.length,
    evalue: hit.bestEvalue,
    bit_score: Math.max(0, ...hsps.map((h) => h.bit_score)),
    total_bit_score: Math.round(10 * hsps.reduce((sum, h) => sum + h.bit_score, 0)) / 10,
    query_cover: queryCover(hsps, queryLen),
    identity: first && first.align_len > 0 ? Math.round((1000 * first.identity) / first.align_len) / 10 : 0,
    hsp_spans: hsps.map((h) => ({ query_from: h.query_from, query_to: h.query_to, bit_score: h.bit_score })),
  };
}

function page(total: number, offset: number, limit: number) {
  const end = Math.min(total, offset + limit);
  return { total, offset, limit, ...(end < total && { next_offset: end }) };
}

/**
 * Pages of a completed job's result, read through its index: summaries from the index alone, a
 * query's hits and a hit's HSPs from a ranged read of the gzip members that hold the query's
 * iteration (never the whole file).
 */
export class ResultPages {
  private readonly cache = new Map<string, LoadedIndex>();

  constructor(private readonly artifacts: Artifacts) {}

  /** The job's index; {@link ResultIndexMissingError} when it has none. */
  async load(jobId: string, signal?: AbortSignal): Promise<LoadedIndex> {
    const cached = this.cache.get(jobId);
    if (cached) return cached;
    const stored = await this.artifacts.getBytes(jobId, RESULT_INDEX_ARTIFACT, signal);
    if (!stored)
      throw new ResultIndexMissingError(
        "this result has no index for paged reading (it was stored before result pages existed); download the XML instead",
      );
    const index = resultIndexSchema.parse(JSON.parse((await gunzipAsync(stored)).toString("utf8")));
    const loaded = { index, storedBytes: (await this.artifacts.size(jobId, MERGED_ARTIFACT)) ?? null };
    this.cache.set(jobId, loaded);
    if (this.cache.size > CACHED_INDEXES) this.cache.delete(this.cache.keys().next().value as string);
    return loaded;
  }

  /** Forgets a job's index (its result was deleted). */
  forget(jobId: string): void {
    this.cache.delete(jobId);
  }

  async queries(jobId: string, offset: number, limit: number, signal?: AbortSignal): Promise<QueryPage> {
    const { index, storedBytes } = await this.load(jobId, signal);
    return {
      job_id: jobId,
      program: index.program,
      database: index.database,
      xml_bytes: index.xml_bytes,
      stored_bytes: storedBytes,
      ...page(index.queries.length, offset, limit),
      queries: index.queries.slice(offset, offset + limit).map(querySummary),
    };
  }

  private async iteration(
    jobId: string,
    n: number,
    signal?: AbortSignal,
  ): Promise<{ index: ResultIndex; entry: QueryIndexEntry; iteration: BlastIteration }> {
    const { index, storedBytes } = await this.load(jobId, signal);
    const entry = index.queries[n - 1];
    if (!entry) throw new NotFoundError(`query ${n} does not exist: the result has ${index.queries.length} queries`);
    const [start, end] = entry.range;
    const span = memberSpan(index, entry.range, storedBytes ?? Number.MAX_SAFE_INTEGER);
    const stored = await this.artifacts.readRange(jobId, MERGED_ARTIFACT, span.offset, span.count, signal);
    if (!stored) throw new NotFoundError("the merged result is missing");
    const text = (await gunzipAsync(stored)).subarray(span.skip, span.skip + (end - start));
    async function* document() {
      yield Buffer.from("<BlastOutput>\n<BlastOutput_iterations>\n");
      yield text;
      yield Buffer.from("\n</BlastOutput_iterations>\n</BlastOutput>\n");
    }
    for await (const event of readBlastXml(document())) {
      if (event.type === "iteration") return { index, entry, iteration: event.iteration };
    }
    throw new Error(`query ${n}: its range holds no iteration`);
  }

  async hits(jobId: string, n: number, offset: number, limit: number, signal?: AbortSignal): Promise<HitPage> {
    const { index, entry, iteration } = await this.iteration(jobId, n, signal);
    const hits = iteration.hits.slice(offset, offset + limit).map((hit) =>
      hitSummary(
        hit,
        hit.hsps.map((h) => hspView(index.program, h)),
        entry.len,
      ),
    );
    return {
      job_id: jobId,
      program: index.program,
      query: querySummary(entry),
      ...page(iteration.hits.length, offset, limit),
      hits,
    };
  }

  async hit(jobId: string, n: number, k: number, signal?: AbortSignal): Promise<HitDetail> {
    const { index, entry, iteration } = await this.iteration(jobId, n, signal);
    const hit = iteration.hits[k - 1];
    if (!hit)
      throw new NotFoundError(`hit ${k} of query ${n} does not exist: the query has ${iteration.hits.length} hits`);
    const hsps = hit.hsps.map((h) => hspView(index.program, h));
    return {
      job_id: jobId,
      program: index.program,
      query: querySummary(entry),
      hit: hitSummary(hit, hsps, entry.len),
      hsp_list: hsps,
    };
  }
}
