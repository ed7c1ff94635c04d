import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream";
import { createGunzip } from "node:zlib";

/*
 * BLAST XML (-outfmt 5) is read as a "binary string": each byte becomes one UTF-16 code unit
 * (latin1 decoding) and is written back with latin1 encoding. Every structural marker is ASCII, so
 * scanning works on any input, and text the merge does not change (definition lines in any
 * encoding, entity escapes) is copied byte for byte without a decode/re-encode round trip.
 */

/** One shard's BLAST XML result: query batch `batchIndex` searched against partition `partitionIndex`. */
export interface ShardOutput {
  batchIndex: number;
  partitionIndex: number;
  /** BLAST XML (-outfmt 5), plain or gzip (detected from the content, not the name). Absolute path. */
  path: string;
}

/** The document prologue: everything from the first byte through `<BlastOutput_iterations>`. */
export interface BlastXmlHeader {
  /** Raw text (binary string) of the prologue, ending with `<BlastOutput_iterations>`. */
  raw: string;
  /** Leaf `BlastOutput_*` values (still XML-escaped), e.g. `BlastOutput_program`, `BlastOutput_db`. */
  fields: Readonly<Record<string, string>>;
}

/** One `<Hsp>`: its leaf children (`Hsp_evalue`, `Hsp_qseq`, ...), values still XML-escaped. */
export type BlastHsp = Readonly<Record<string, string>>;

/** One `<Hit>` of an iteration. */
export interface BlastHit {
  /** Inner text of the `<Hit>` element, exactly as read. */
  raw: string;
  /** Leaf `Hit_*` children before `Hit_hsps` (`Hit_id`, `Hit_def`, ...), still XML-escaped. */
  fields: Readonly<Record<string, string>>;
  hsps: BlastHsp[];
  /** Smallest `Hsp_evalue` of the hit (BLAST ranks subjects by their best e-value). */
  bestEvalue: number;
  /** `Hsp_score` of the hit's first HSP (BLAST's second ranking key). */
  topScore: number;
}

/** One `<Iteration>` (one query of a run). Text values are still XML-escaped. */
export interface BlastIteration {
  iterNum: string;
  queryId: string;
  queryDef: string;
  queryLen: string;
  hits: BlastHit[];
  /** Inner text of `<Iteration_stat>`, exactly as read, or undefined when absent. */
  statRaw: string | undefined;
  /** Leaf `Statistics_*` values in document order. */
  statistics: ReadonlyArray<readonly [string, string]>;
  message: string | undefined;
}

/** Events of {@link readBlastXml}: one header, then each iteration in order, then the end. */
export type BlastXmlEvent =
  | { type: "header"; header: BlastXmlHeader }
  | { type: "iteration"; iteration: BlastIteration }
  | { type: "end"; trailer: string };

/** The input is not a well-formed BLAST XML document as BLAST+ writes it. */
export class BlastXmlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BlastXmlError";
  }
}

/** Shards cannot be merged (missing partitions, different queries, inconsistent statistics). */
export class BlastMergeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BlastMergeError";
  }
}

const ITERATIONS_OPEN = "<BlastOutput_iterations>";
const ITERATIONS_CLOSE = "</BlastOutput_iterations>";
const ITERATION_OPEN = "<Iteration>";
const ITERATION_CLOSE = "</Iteration>";
const HEADER_LIMIT = 16 * 1024 * 1024;
const TRAILER_LIMIT = 1024 * 1024;
/** V8 strings top out near 2^29 code units; fail clearly before that. */
const ITERATION_LIMIT = 500 * 1024 * 1024;
/** BLAST treats e-values below this as equal when ranking hits (blast_hits.c, s_EvalueComp). */
const EVALUE_EPSILON = 1.0e-180;
const LEAF = /<([A-Za-z][\w.-]*)>([^<]*)<\/\1>/g;

function toBinary(chunk: string | Uint8Array): string {
  if (typeof chunk === "string") return Buffer.from(chunk, "utf8").toString("latin1");
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString("latin1");
}

function leaves(text: string): [string, string][] {
  const out: [string, string][] = [];
  for (const match of text.matchAll(LEAF)) out.push([match[1] ?? "", match[2] ?? ""]);
  return out;
}

/** Text of the first `<tag>…</tag>` in `text` (no nesting), or undefined. */
function leafText(text: string, tag: string, from = 0, to = text.length): string | undefined {
  const open = text.indexOf(`<${tag}>`, from);
  if (open < 0 || open >= to) return undefined;
  const start = open + tag.length + 2;
  const end = text.indexOf(`</${tag}>`, start);
  return end < 0 ? undefined : text.slice(start, end);
}

/** Where the text of the first `<tag>…</tag>` is ([start, end)), or undefined. */
function leafSpan(text: string, tag: string): [number, number] | undefined {
  const open = text.indexOf(`<${tag}>`);
  if (open < 0) return undefined;
  const start = open + tag.length + 2;
  const end = text.indexOf(`</${tag}>`, start);
  return end < 0 ? undefined : [start, end];
}

/** Replaces the text of the first `<tag>…</tag>` found before `limit`; unchanged when absent. */
function replaceLeaf(text: string, tag: string, value: string, limit = text.length): string {
  const open = text.indexOf(`<${tag}>`);
  if (open < 0 || open >= limit) return text;
  const start = open + tag.length + 2;
  const end = text.indexOf(`</${tag}>`, start);
  if (end < 0) return text;
  return text.slice(0, start) + value + text.slice(end);
}

function parseNumber(value: string | undefined, what: string): number {
  const number = value === undefined ? Number.NaN : Number(value.trim());
  if (value === undefined || value.trim() === "" || Number.isNaN(number)) {
    throw new BlastXmlError(`${what} is missing or not a number: ${JSON.stringify(value?.slice(0, 40))}`);
  }
  return number;
}

/** The leaf fields and HSPs of a hit, parsed in full (the merge never needs them; tabular does). */
function parseHitDetail(raw: string): { fields: Record<string, string>; hsps: BlastHsp[] } {
  const hspsAt = raw.indexOf("<Hit_hsps>");
  const fields = Object.fromEntries(leaves(hspsAt < 0 ? raw : raw.slice(0, hspsAt)));
  const hsps: BlastHsp[] = [];
  let from = hspsAt < 0 ? raw.length : hspsAt;
  for (;;) {
    const open = raw.indexOf("<Hsp>", from);
    if (open < 0) break;
    const close = raw.indexOf("</Hsp>", open);
    if (close < 0) throw new BlastXmlError(`unterminated <Hsp> in hit ${fields.Hit_id ?? "?"}`);
    hsps.push(Object.fromEntries(leaves(raw.slice(open + 5, close))));
    from = close + 6;
  }
  return { fields, hsps };
}

/**
 * A hit with its ranking keys read directly (every `Hsp_evalue`, the first `Hsp_score`); its
 * fields and HSPs are parsed on first use, since merging only ranks and copies hits.
 */
function parseHit(raw: string): BlastHit {
  const id = () => leafText(raw, "Hit_id") ?? "?";
  if (raw.indexOf("<Hsp>") < 0) throw new BlastXmlError(`hit ${id()} has no <Hsp>`);
  let bestEvalue = Number.POSITIVE_INFINITY;
  for (let at = raw.indexOf("<Hsp_evalue>"); at >= 0; at = raw.indexOf("<Hsp_evalue>", at + 1)) {
    const value = leafText(raw, "Hsp_evalue", at);
    bestEvalue = Math.min(bestEvalue, parseNumber(value, `Hsp_evalue of hit ${id()}`));
  }
  if (bestEvalue === Number.POSITIVE_INFINITY) parseNumber(undefined, `Hsp_evalue of hit ${id()}`);
  const topScore = parseNumber(leafText(raw, "Hsp_score"), `Hsp_score of hit ${id()}`);
  let detail: ReturnType<typeof parseHitDetail> | undefined;
  return {
    raw,
    get fields() {
      detail ??= parseHitDetail(raw);
      return detail.fields;
    },
    get hsps() {
      detail ??= parseHitDetail(raw);
      return detail.hsps;
    },
    bestEvalue,
    topScore,
  };
}

function parseIteration(inner: string): BlastIteration {
  const hitsOpen = inner.indexOf("<Iteration_hits>");
  const headEnd = hitsOpen < 0 ? inner.length : hitsOpen;
  const hitsClose = hitsOpen < 0 ? -1 : inner.indexOf("</Iteration_hits>", hitsOpen);
  if (hitsOpen >= 0 && hitsClose < 0) throw new BlastXmlError("unterminated <Iteration_hits>");
  const hits: BlastHit[] = [];
  if (hitsOpen >= 0) {
    let from = hitsOpen;
    for (;;) {
      const open = inner.indexOf("<Hit>", from);
      if (open < 0 || open > hitsClose) break;
      const close = inner.indexOf("</Hit>", open);
      if (close < 0 || close > hitsClose) throw new BlastXmlError("unterminated <Hit>");
      hits.push(parseHit(inner.slice(open + 5, close)));
      from = close + 6;
    }
  }
  const tailFrom = hitsClose < 0 ? headEnd : hitsClose;
  const statRaw = leafStatRaw(inner, tailFrom);
  const iterNum = leafText(inner, "Iteration_iter-num", 0, headEnd);
  if (iterNum === undefined) throw new BlastXmlError("iteration without <Iteration_iter-num>");
  return {
    iterNum,
    queryId: leafText(inner, "Iteration_query-ID", 0, headEnd) ?? "",
    queryDef: leafText(inner, "Iteration_query-def", 0, headEnd) ?? "",
    queryLen: leafText(inner, "Iteration_query-len", 0, headEnd) ?? "",
    hits,
    statRaw,
    statistics: statRaw === undefined ? [] : leaves(statRaw),
    message: leafText(inner, "Iteration_message", tailFrom),
  };
}

function leafStatRaw(inner: string, from: number): string | undefined {
  const open = inner.indexOf("<Iteration_stat>", from);
  if (open < 0) return undefined;
  const close = inner.indexOf("</Iteration_stat>", open);
  if (close < 0) throw new BlastXmlError("unterminated <Iteration_stat>");
  return inner.slice(open + "<Iteration_stat>".length, close);
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/**
 * Streams a BLAST XML document one iteration at a time: a `header` event, one `iteration`
 * event per `<Iteration>`, then `end`. Only the current iteration is held in memory, so results
 * of hundreds of MB are fine. Throws {@link BlastXmlError} on anything that is not BLAST XML or
 * is truncated. Returning early (break) releases the source.
 */
export async function* readBlastXml(source: AsyncIterable<string | Uint8Array>): AsyncGenerator<BlastXmlEvent> {
  const iterator = source[Symbol.asyncIterator]();
  let buf = "";
  let eof = false;

  const nextChunk = async (): Promise<string | undefined> => {
    while (!eof) {
      const result = await iterator.next();
      if (result.done) {
        eof = true;
        break;
      }
      const text = toBinary(result.value);
      if (text.length > 0) return text;
    }
    return undefined;
  };

  /**
   * Index of `tag` at or after `from` in `buf`, reading more input as needed; -1 at end of input.
   * New chunks are searched with an overlap and joined once, so a large iteration costs linear time.
   */
  const findTag = async (tag: string, from: number, limit: number, what: string): Promise<number> => {
    const direct = buf.indexOf(tag, from);
    if (direct >= 0) return direct;
    const parts = [buf];
    let length = buf.length;
    let overlap = buf.slice(Math.max(from, buf.length - tag.length + 1));
    for (;;) {
      const chunk = await nextChunk();
      if (chunk === undefined) {
        buf = parts.join("");
        return -1;
      }
      // Only the seam needs the overlap: searching `overlap + chunk` would copy every chunk into a
      // new string first (a third of a 10 MB output's parse time went to those copies).
      const seam = overlap + chunk.slice(0, tag.length - 1);
      const across = seam.indexOf(tag);
      const within = across >= 0 ? -1 : chunk.indexOf(tag);
      parts.push(chunk);
      if (across >= 0 || within >= 0) {
        buf = parts.join("");
        return across >= 0 ? length - overlap.length + across : length + within;
      }
      length += chunk.length;
      if (length > limit) throw new BlastXmlError(`${what} is larger than ${limit} bytes`);
      overlap = (chunk.length >= tag.length - 1 ? chunk : seam).slice(-(tag.length - 1));
    }
  };

  try {
    const headerAt = await findTag(ITERATIONS_OPEN, 0, HEADER_LIMIT, "the BLAST XML header");
    if (headerAt < 0 || !buf.slice(0, headerAt).includes("<BlastOutput>")) {
      throw new BlastXmlError("not a BLAST XML document (no <BlastOutput> with <BlastOutput_iterations>)");
    }
    const headerEnd = headerAt + ITERATIONS_OPEN.length;
    const headerRaw = buf.slice(0, headerEnd);
    const paramAt = headerRaw.indexOf("<BlastOutput_param>");
    const fields = Object.fromEntries(
      leaves(paramAt < 0 ? headerRaw : headerRaw.slice(0, paramAt)).filter(([name]) => name.startsWith("BlastOutput_")),
    );
    yield { type: "header", header: { raw: headerRaw, fields } };
    buf = buf.slice(headerEnd);

    for (;;) {
      let pos = 0;
      for (;;) {
        while (pos < buf.length && isSpace(buf.charCodeAt(pos))) pos++;
        if (buf.length - pos >= ITERATIONS_CLOSE.length) break;
        const chunk = await nextChunk();
        if (chunk === undefined) break;
        buf = buf.slice(pos) + chunk;
        pos = 0;
      }
      if (buf.startsWith(ITERATION_OPEN, pos)) {
        const start = pos + ITERATION_OPEN.length;
        const end = await findTag(ITERATION_CLOSE, start, ITERATION_LIMIT, "an <Iteration>");
        if (end < 0) throw new BlastXmlError("truncated BLAST XML: unterminated <Iteration>");
        const inner = buf.slice(start, end);
        buf = buf.slice(end + ITERATION_CLOSE.length);
        yield { type: "iteration", iteration: parseIteration(inner) };
      } else if (buf.startsWith(ITERATIONS_CLOSE, pos)) {
        let trailer = buf.slice(pos + ITERATIONS_CLOSE.length);
        for (let chunk = await nextChunk(); chunk !== undefined; chunk = await nextChunk()) {
          trailer += chunk;
          if (trailer.length > TRAILER_LIMIT)
            throw new BlastXmlError("unexpected data after </BlastOutput_iterations>");
        }
        if (trailer.trim() !== "</BlastOutput>") {
          throw new BlastXmlError("truncated or malformed BLAST XML after </BlastOutput_iterations>");
        }
        buf = "";
        yield { type: "end", trailer };
        return;
      } else if (pos >= buf.length) {
        throw new BlastXmlError("truncated BLAST XML: missing </BlastOutput_iterations>");
      } else {
        throw new BlastXmlError(
          `unexpected content in <BlastOutput_iterations>: ${JSON.stringify(buf.slice(pos, pos + 40))}`,
        );
      }
    }
  } finally {
    await iterator.return?.();
  }
}

async function isGzip(file: string): Promise<boolean> {
  const handle = await open(file, "r");
  try {
    const magic = Buffer.alloc(2);
    const { bytesRead } = await handle.read(magic, 0, 2, 0);
    return bytesRead === 2 && magic[0] === 0x1f && magic[1] === 0x8b;
  } finally {
    await handle.close();
  }
}

function checkPath(file: string): void {
  if (typeof file !== "string" || !path.isAbsolute(file) || file.includes("\0")) {
    throw new TypeError(`shard path must be an absolute file path: ${JSON.stringify(file)}`);
  }
}

/**
 * Streams the BLAST XML file at `file` (absolute path; plain or gzip, detected from its first
 * bytes) as {@link readBlastXml} events, one iteration at a time.
 */
export async function* readIterations(file: string): AsyncGenerator<BlastXmlEvent> {
  checkPath(file);
  const gz = await isGzip(file);
  const raw = createReadStream(file, { highWaterMark: 1024 * 1024 });
  // pipeline destroys both streams on failure; the error then surfaces through the iterator.
  const source = gz ? pipeline(raw, createGunzip(), () => {}) : raw;
  try {
    yield* readBlastXml(source);
  } finally {
    source.destroy();
    raw.destroy();
  }
}

const XML_ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

/** Escapes text for XML and returns it as a binary (UTF-8 bytes as latin1) string like the rest. */
function escapeXml(text: string): string {
  return toBinary(text.replace(/[&<>"']/g, (c) => XML_ESCAPES[c] ?? c));
}

/**
 * The bytes of binary strings written one after another. Each part is copied once into the buffer:
 * joining them into one string first would copy an iteration (hundreds of KB) one more time.
 */
function latin1Bytes(parts: readonly string[]): Buffer {
  let length = 0;
  for (const part of parts) length += part.length;
  const bytes = Buffer.allocUnsafe(length);
  let at = 0;
  for (const part of parts) at += bytes.write(part, at, "latin1");
  return bytes;
}

/**
 * Writes with back-pressure. A destroyed output (its consumer failed) ends the merge with an error
 * instead of a wait for a 'drain' that will never come.
 */
async function write(output: NodeJS.WritableStream, text: string | readonly string[]): Promise<void> {
  const bytes = typeof text === "string" ? Buffer.from(text, "latin1") : latin1Bytes(text);
  if (bytes.length === 0) return;
  const stream = output as NodeJS.WritableStream & { destroyed?: boolean };
  if (stream.destroyed) throw new BlastMergeError("the merged output was closed before the merge finished");
  if (stream.write(bytes)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (error?: Error) => {
      stream.off("drain", onDrain);
      stream.off("close", onClose);
      stream.off("error", onError);
      if (error) reject(error);
      else resolve();
    };
    const onDrain = () => done();
    const onClose = () => done(new BlastMergeError("the merged output was closed before the merge finished"));
    const onError = (error: Error) => done(error);
    stream.on("drain", onDrain);
    stream.on("close", onClose);
    stream.on("error", onError);
  });
}

interface Candidate {
  hit: BlastHit;
  partitionIndex: number;
  order: number;
}

/**
 * BLAST's ranking (blast_hits.c, s_EvalueCompareHSPLists): best e-value ascending (all values
 * below 1e-180 equal), then the first HSP's raw score descending, then subject OID descending.
 * Partitions hold contiguous OID ranges in partition order, so "OID descending" across shards is
 * "higher partition first", and within one shard BLAST's own order already encodes it.
 */
function compareCandidates(a: Candidate, b: Candidate): number {
  const ea = a.hit.bestEvalue;
  const eb = b.hit.bestEvalue;
  if (!(ea < EVALUE_EPSILON && eb < EVALUE_EPSILON)) {
    if (ea < eb) return -1;
    if (ea > eb) return 1;
  }
  if (a.hit.topScore !== b.hit.topScore) return b.hit.topScore - a.hit.topScore;
  if (a.partitionIndex !== b.partitionIndex) return b.partitionIndex - a.partitionIndex;
  return a.order - b.order;
}

/** Statistics fields that every partition must report identically for e-values to be exact. */
function mergeStatistics(
  iterations: readonly BlastIteration[],
  partitionIndexes: readonly number[],
  where: string,
  totals: { sequences: number; letters: number } | undefined,
): string | undefined {
  const first = iterations[0];
  if (first?.statRaw === undefined) return undefined;
  const firstValues = new Map(first.statistics);
  const sums = { "Statistics_db-num": 0n, "Statistics_db-len": 0n };
  const perPartition: { "Statistics_db-num": bigint; "Statistics_db-len": bigint }[] = [];
  for (const [i, iteration] of iterations.entries()) {
    const values = new Map(iteration.statistics);
    const own = { "Statistics_db-num": 0n, "Statistics_db-len": 0n };
    for (const key of ["Statistics_db-num", "Statistics_db-len"] as const) {
      const value = values.get(key);
      if (value === undefined || !/^\d+$/.test(value.trim())) {
        throw new BlastMergeError(`${where}, partition ${partitionIndexes[i]}: ${key} is missing or not an integer`);
      }
      own[key] = BigInt(value.trim());
      sums[key] += own[key];
    }
    perPartition.push(own);
    for (const [key, value] of firstValues) {
      if (key === "Statistics_db-num" || key === "Statistics_db-len") continue;
      if (values.get(key) !== value) {
        throw new BlastMergeError(
          `${where}: partitions ${partitionIndexes[0]} and ${partitionIndexes[i]} disagree on ${key} ` +
            `(${value} vs ${values.get(key) ?? "missing"}); do the partition aliases carry the whole database's STATS_NSEQ/STATS_TOTLEN?`,
        );
      }
    }
  }
  let num = sums["Statistics_db-num"];
  let len = sums["Statistics_db-len"];
  if (totals) {
    const wantNum = BigInt(totals.sequences);
    const wantLen = BigInt(totals.letters);
    const eachWhole = perPartition.every(
      (p) => p["Statistics_db-num"] === wantNum && p["Statistics_db-len"] === wantLen,
    );
    if (!eachWhole && (num !== wantNum || len !== wantLen)) {
      throw new BlastMergeError(
        `${where}: partitions report ${num} sequences / ${len} letters in total, the database has ${wantNum} / ${wantLen}`,
      );
    }
    num = wantNum;
    len = wantLen;
  }
  let raw = replaceLeaf(first.statRaw, "Statistics_db-num", num.toString());
  raw = replaceLeaf(raw, "Statistics_db-len", len.toString());
  return raw;
}

const QUERY_ID = /^Query_\d+$/;

/** Options for {@link mergeBlastXml}. */
export interface MergeBlastXmlOptions {
  /** Every shard of the job: each batch must have the same set of partitions. */
  shards: ShardOutput[];
  /** The search's `-max_target_seqs`: hits kept per query after pooling partitions. */
  maxTargetSeqs: number;
  /** Receives the merged document as plain XML bytes; not ended here (the caller gzips and ends it). */
  output: NodeJS.WritableStream;
  /** Text for `BlastOutput_db` (e.g. the database name); by default the first shard's value is kept. */
  database?: string;
  /**
   * The whole database's sequence and letter counts (from the manifest). When given they become
   * `Statistics_db-num`/`-len`, after checking the partitions' numbers sum to them (or each equal
   * them). Without it the partitions' numbers are summed, which is exact for BLAST+ 2.12: each
   * partition reports its own counts there even with whole-database STATS in its alias.
   */
  totals?: { sequences: number; letters: number };
}

/**
 * A BLAST XML header (as {@link BlastXmlHeader.raw}, binary string) with `BlastOutput_db` set to
 * `database` (escaped; e.g. the database's name instead of the path BLAST was given), or unchanged
 * without one.
 */
export function namedDatabaseHeader(header: string, database: string | undefined): string {
  if (database === undefined) return header;
  const paramAt = header.indexOf("<BlastOutput_param>");
  return replaceLeaf(header, "BlastOutput_db", escapeXml(database), paramAt < 0 ? header.length : paramAt);
}

/**
 * Merges sharded BLAST XML results into one document identical to what an unsharded search
 * writes.
 *
 * Batches are concatenated in ascending `batchIndex`; within a batch the partitions' iterations
 * are read in lockstep (one iteration per partition in memory) and must describe the same query
 * (else {@link BlastMergeError}). Per query, hits from all partitions are pooled, ranked like
 * BLAST (best e-value, then first-HSP raw score, then the subject's position in the database:
 * later partition first, then the shard's own order — deterministic, and equal to BLAST's
 * OID-descending tie order when partitions hold contiguous OID ranges in partition order), cut to
 * `maxTargetSeqs`, and renumbered. Iterations are renumbered 1..Q with `Query_<n>` ids, since
 * BLAST numbers queries per run. `Iteration_stat` keeps the partitions' common search-space
 * values and sums `Statistics_db-num`/`-len` (see `totals`). `<Hit>` contents are copied byte
 * for byte apart from `Hit_num`. Returns the number of queries and hits written.
 */
export async function mergeBlastXml(options: MergeBlastXmlOptions): Promise<{ queries: number; hits: number }> {
  const { shards, maxTargetSeqs, output } = options;
  if (!Number.isSafeInteger(maxTargetSeqs) || maxTargetSeqs < 1) {
    throw new RangeError(`maxTargetSeqs must be a positive integer, got ${maxTargetSeqs}`);
  }
  if (shards.length === 0) throw new BlastMergeError("no shard outputs to merge");
  const batches = new Map<number, ShardOutput[]>();
  for (const shard of shards) {
    for (const key of ["batchIndex", "partitionIndex"] as const) {
      if (!Number.isSafeInteger(shard[key]) || shard[key] < 0) {
        throw new RangeError(`${key} must be a non-negative integer, got ${shard[key]}`);
      }
    }
    checkPath(shard.path);
    const list = batches.get(shard.batchIndex) ?? [];
    if (list.some((s) => s.partitionIndex === shard.partitionIndex)) {
      throw new BlastMergeError(`batch ${shard.batchIndex} has partition ${shard.partitionIndex} twice`);
    }
    list.push(shard);
    batches.set(shard.batchIndex, list);
  }
  const batchOrder = [...batches.keys()].sort((a, b) => a - b);
  for (const list of batches.values()) list.sort((a, b) => a.partitionIndex - b.partitionIndex);
  const partitionSet = (list: ShardOutput[]): string => list.map((s) => s.partitionIndex).join(",");
  const expected = partitionSet(batches.get(batchOrder[0] ?? 0) ?? []);
  for (const batch of batchOrder) {
    const got = partitionSet(batches.get(batch) ?? []);
    if (got !== expected) {
      throw new BlastMergeError(`batch ${batch} has partitions [${got}] but batch ${batchOrder[0]} has [${expected}]`);
    }
  }

  let header: string | undefined;
  let trailer: string | undefined;
  let headerWritten = false;
  let queries = 0;
  let hitsWritten = 0;

  const writeHeader = async (firstQuery: BlastIteration | undefined): Promise<void> => {
    if (headerWritten || header === undefined) return;
    headerWritten = true;
    const paramAt = header.indexOf("<BlastOutput_param>");
    const limit = paramAt < 0 ? header.length : paramAt;
    let text = namedDatabaseHeader(header, options.database);
    if (firstQuery) {
      if (QUERY_ID.test(firstQuery.queryId)) text = replaceLeaf(text, "BlastOutput_query-ID", "Query_1", limit);
      text = replaceLeaf(text, "BlastOutput_query-def", firstQuery.queryDef, limit);
      text = replaceLeaf(text, "BlastOutput_query-len", firstQuery.queryLen, limit);
    }
    await write(output, `${text}\n`);
  };

  for (const batch of batchOrder) {
    const list = batches.get(batch) ?? [];
    const partitionIndexes = list.map((s) => s.partitionIndex);
    const readers = list.map((s) => readIterations(s.path));
    try {
      const heads = await Promise.all(readers.map((r) => r.next()));
      for (const [i, head] of heads.entries()) {
        if (head.done || head.value.type !== "header") {
          throw new BlastXmlError(`${list[i]?.path}: no BLAST XML header`);
        }
        header ??= head.value.header.raw;
      }
      for (let n = 1; ; n++) {
        const events = await Promise.all(readers.map((r) => r.next()));
        const iterations: BlastIteration[] = [];
        let ended = 0;
        for (const event of events) {
          if (event.done) throw new BlastXmlError("BLAST XML reader stopped early");
          if (event.value.type === "iteration") iterations.push(event.value.iteration);
          else if (event.value.type === "end") {
            ended++;
            trailer ??= event.value.trailer;
          }
        }
        if (ended === events.length) break;
        if (ended > 0) {
          const short = events.findIndex((e) => !e.done && e.value.type === "end");
          throw new BlastMergeError(
            `batch ${batch}: partition ${partitionIndexes[short]} has ${n - 1} iterations, ` +
              `but other partitions have more; shards of one batch must come from the same query file`,
          );
        }
        const first = iterations[0];
        if (!first) break;
        const where = `batch ${batch}, iteration ${n}`;
        for (const [i, other] of iterations.entries()) {
          if (
            other.iterNum !== first.iterNum ||
            other.queryId !== first.queryId ||
            other.queryDef !== first.queryDef ||
            other.queryLen !== first.queryLen
          ) {
            throw new BlastMergeError(
              `${where}: partition ${partitionIndexes[i]} has query ${other.queryId} "${other.queryDef.slice(0, 80)}" ` +
                `(length ${other.queryLen}) but partition ${partitionIndexes[0]} has ${first.queryId} ` +
                `"${first.queryDef.slice(0, 80)}" (length ${first.queryLen})`,
            );
          }
        }
        await writeHeader(first);

        const pool: Candidate[] = [];
        for (const [i, iteration] of iterations.entries()) {
          for (const [order, hit] of iteration.hits.entries()) {
            pool.push({ hit, partitionIndex: partitionIndexes[i] ?? i, order });
          }
        }
        pool.sort(compareCandidates);
        const kept = pool.slice(0, maxTargetSeqs);
        const stat = mergeStatistics(iterations, partitionIndexes, where, options.totals);

        queries++;
        hitsWritten += kept.length;
        const parts: string[] = [
          "<Iteration>\n",
          `  <Iteration_iter-num>${queries}</Iteration_iter-num>\n`,
          `  <Iteration_query-ID>${QUERY_ID.test(first.queryId) ? `Query_${queries}` : first.queryId}</Iteration_query-ID>\n`,
          `  <Iteration_query-def>${first.queryDef}</Iteration_query-def>\n`,
          `  <Iteration_query-len>${first.queryLen}</Iteration_query-len>\n`,
          "<Iteration_hits>\n",
        ];
        for (const [k, candidate] of kept.entries()) {
          // The hit's text around its new Hit_num, as slices of what was read (nothing copied here).
          const { raw } = candidate.hit;
          const at = leafSpan(raw, "Hit_num");
          parts.push("<Hit>");
          if (at) parts.push(raw.slice(0, at[0]), String(k + 1), raw.slice(at[1]));
          else parts.push(raw);
          parts.push("</Hit>\n");
        }
        parts.push("</Iteration_hits>\n");
        if (stat !== undefined) parts.push(`  <Iteration_stat>${stat}</Iteration_stat>\n`);
        if (kept.length === 0) {
          const message = iterations.find((it) => it.message !== undefined)?.message ?? "No hits found";
          parts.push(`  <Iteration_message>${message}</Iteration_message>\n`);
        }
        parts.push("</Iteration>\n");
        await write(output, parts);
      }
    } finally {
      await Promise.allSettled(readers.map((r) => r.return(undefined)));
    }
  }
  await writeHeader(undefined);
  await write(output, `${ITERATIONS_CLOSE}${trailer ?? "\n</BlastOutput>\n"}`);
  return { queries, hits: hitsWritten };
}
