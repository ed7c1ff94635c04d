import { createReadStream, createWriteStream } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import { createGunzip, createGzip, gunzipSync, gzipSync } from "node:zlib";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlastToolError, blastVersion, runBlastTool } from "../../shared/blast/blast-tools.js";
import {
  buildDatabase,
  DATABASE_NAME,
  DatabaseBuildError,
  type DatabaseManifest,
  formatVersion,
} from "../../shared/blast/database-builder.js";
import { formatBitScore, formatEvalue, formatFixed, renderTabular } from "../../shared/blast/tabular.js";
import { BlastMergeError, mergeBlastXml, type ShardOutput } from "../../shared/blast/xml-merge.js";
import { prng } from "../support/helpers.js";

// ---------------------------------------------------------------------------------------------
// Deterministic test data
// ---------------------------------------------------------------------------------------------

const NUCLEOTIDES = "ACGT";
const AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY";

function generator(seed: number) {
  const rnd = prng(seed);
  const int = (lo: number, hi: number): number => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = (alphabet: string): string => alphabet[Math.floor(rnd() * alphabet.length)] ?? "A";
  const random = (length: number, alphabet: string): string => Array.from({ length }, () => pick(alphabet)).join("");
  /** Substitutions, and for nucleotides a few single-letter indels, at `rate` per letter. */
  const mutate = (sequence: string, rate: number, alphabet: string, indels: boolean): string => {
    let out = "";
    for (const letter of sequence) {
      const r = rnd();
      if (r >= rate) out += letter;
      else if (!indels || r < rate * 0.8) out += pick(alphabet);
      else if (r < rate * 0.9) continue;
      else out += letter + pick(alphabet);
    }
    return out;
  };
  const window = (sequence: string, length: number): string => {
    const start = int(0, Math.max(0, sequence.length - length));
    return sequence.slice(start, start + length);
  };
  const shuffle = <T>(items: T[]): T[] => {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [items[i], items[j]] = [items[j] as T, items[i] as T];
    }
    return items;
  };
  return { int, random, mutate, window, shuffle };
}

function reverseComplement(sequence: string): string {
  const pairs: Record<string, string> = { A: "T", C: "G", G: "C", T: "A" };
  return [...sequence]
    .reverse()
    .map((c) => pairs[c] ?? "N")
    .join("");
}

interface FastaRecord {
  header: string;
  sequence: string;
}

function fasta(records: FastaRecord[]): string {
  return records.map((r) => `>${r.header}\n${r.sequence.replace(/(.{60})/g, "$1\n").replace(/\n$/, "")}\n`).join("");
}

/**
 * 300 nucleotide sequences (300-3000 letters): family A (80 mutants of one ancestor plus 10 exact
 * copies of one of them, so scores tie) and family B (25 mutants) scattered among random
 * sequences, so queries hit more subjects than -max_target_seqs keeps.
 */
function nucleotideData(): { db: FastaRecord[]; queries: FastaRecord[] } {
  const g = generator(20_240_601);
  const ancestorA = g.random(2600, NUCLEOTIDES);
  const ancestorB = g.random(1800, NUCLEOTIDES);
  const bodies: { kind: string; sequence: string }[] = [];
  for (let i = 0; i < 80; i++) {
    const sequence = g.mutate(g.window(ancestorA, g.int(600, 2600)), 0.01 + (0.09 * i) / 79, NUCLEOTIDES, true);
    bodies.push({ kind: "family A member", sequence });
  }
  const tied = g.mutate(g.window(ancestorA, 1500), 0.05, NUCLEOTIDES, true);
  for (let i = 0; i < 10; i++) bodies.push({ kind: "family A identical copy", sequence: tied });
  for (let i = 0; i < 25; i++) {
    const sequence = g.mutate(g.window(ancestorB, g.int(500, 1800)), 0.01 + (0.07 * i) / 24, NUCLEOTIDES, true);
    bodies.push({ kind: "family B member", sequence });
  }
  while (bodies.length < 300) bodies.push({ kind: "random", sequence: g.random(g.int(300, 3000), NUCLEOTIDES) });
  g.shuffle(bodies);
  const db = bodies.map((b, i) => {
    const n = String(i + 1).padStart(4, "0");
    // A few NCBI-style ids so Hit_id/accession handling is exercised, the rest plain local ids.
    const id = i % 50 === 7 ? `ref|XM_00${n}.1|` : `bp${n}`;
    return { header: `${id} ${b.kind} ${n} & <test>`, sequence: b.sequence };
  });
  const randomSubject = db.find((r) => r.header.includes("random") && r.sequence.length > 1500);
  const queries: FastaRecord[] = [
    { header: "qA1 family A query", sequence: g.mutate(ancestorA.slice(200, 1700), 0.02, NUCLEOTIDES, true) },
    {
      header: "qB1 family B reverse strand",
      sequence: reverseComplement(g.mutate(ancestorB.slice(100, 1300), 0.02, NUCLEOTIDES, true)),
    },
    {
      header: "qR1 one subject",
      sequence: g.mutate((randomSubject?.sequence ?? "").slice(200, 1100), 0.03, NUCLEOTIDES, true),
    },
    { header: "qNone no hits", sequence: g.random(400, NUCLEOTIDES) },
    { header: 'qA2 & <special> "quoted"', sequence: g.mutate(ancestorA.slice(1000, 2500), 0.04, NUCLEOTIDES, true) },
    { header: "qB2 family B", sequence: g.mutate(ancestorB.slice(300, 1700), 0.06, NUCLEOTIDES, true) },
  ];
  return { db, queries };
}

function proteinData(): { db: FastaRecord[]; queries: FastaRecord[] } {
  const g = generator(77);
  const ancestor = g.random(420, AMINO_ACIDS);
  const bodies: string[] = [];
  for (let i = 0; i < 40; i++)
    bodies.push(g.mutate(g.window(ancestor, g.int(150, 420)), 0.05 + (0.4 * i) / 39, AMINO_ACIDS, false));
  for (let i = 0; i < 4; i++) bodies.push(bodies[10] ?? "");
  while (bodies.length < 120) bodies.push(g.random(g.int(100, 500), AMINO_ACIDS));
  g.shuffle(bodies);
  return {
    db: bodies.map((sequence, i) => ({ header: `prot${String(i + 1).padStart(3, "0")} protein ${i + 1}`, sequence })),
    queries: [
      { header: "pq1 family", sequence: g.mutate(ancestor.slice(20, 380), 0.1, AMINO_ACIDS, false) },
      { header: "pq2 random", sequence: g.random(250, AMINO_ACIDS) },
      { header: "pq3 family part", sequence: g.mutate(ancestor.slice(200, 420), 0.2, AMINO_ACIDS, false) },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const SEARCH = ["-outfmt", "5", "-max_target_seqs", "50", "-evalue", "10"];

async function blast(
  program: "blastn" | "blastp",
  query: string,
  db: string,
  out: string,
  extra = SEARCH,
): Promise<string> {
  await runBlastTool(program, ["-query", query, "-db", db, "-out", out, ...extra]);
  return out;
}

/** Runs tasks two at a time (the CI machine has 2 cores). */
async function inPairs<T>(tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await (tasks[i] as () => Promise<T>)();
    }
  };
  await Promise.all([worker(), worker()]);
  return results;
}

async function mergeToGzip(
  shards: ShardOutput[],
  file: string,
  database?: string,
): Promise<{ queries: number; hits: number; xml: string }> {
  const gzip = createGzip();
  const done = pipeline(gzip, createWriteStream(file));
  const result = await mergeBlastXml({ shards, maxTargetSeqs: 50, output: gzip, database });
  gzip.end();
  await done;
  return { ...result, xml: gunzipSync(await readFile(file)).toString("utf8") };
}

interface ParsedHsp {
  Hsp_evalue: string;
  "Hsp_bit-score": string;
}
interface ParsedHit {
  Hit_num: string;
  Hit_id: string;
  Hit_hsps: { Hsp: ParsedHsp[] };
}
interface ParsedIteration {
  "Iteration_iter-num": string;
  "Iteration_query-ID": string;
  "Iteration_query-def": string;
  Iteration_hits: { Hit?: ParsedHit[] } | string;
  Iteration_stat: { Statistics: Record<string, string> };
  Iteration_message?: string;
}
interface ParsedDocument {
  BlastOutput: { BlastOutput_iterations: { Iteration: ParsedIteration[] } };
}

const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false,
  isArray: (name) => name === "Iteration" || name === "Hit" || name === "Hsp",
});

function parseBlastXml(xml: string): ParsedIteration[] {
  expect(XMLValidator.validate(xml)).toBe(true);
  const doc = parser.parse(xml) as ParsedDocument;
  return doc.BlastOutput.BlastOutput_iterations.Iteration;
}

interface QuerySummary {
  def: string;
  hits: { id: string; evalues: string[]; bits: string[] }[];
  stat: Record<string, string>;
  message: string | undefined;
}

function summarize(iteration: ParsedIteration): QuerySummary {
  const hits = typeof iteration.Iteration_hits === "string" ? [] : (iteration.Iteration_hits.Hit ?? []);
  return {
    def: iteration["Iteration_query-def"],
    hits: hits.map((h) => ({
      id: h.Hit_id,
      evalues: h.Hit_hsps.Hsp.map((s) => s.Hsp_evalue),
      bits: h.Hit_hsps.Hsp.map((s) => s["Hsp_bit-score"]),
    })),
    stat: iteration.Iteration_stat.Statistics,
    message: iteration.Iteration_message,
  };
}

/**
 * Asserts a merged query equals the unpartitioned one: same subjects with the same HSP e-values
 * and bit scores (exact strings), in the same order except that subjects with equal scores may be
 * permuted among themselves (the order of ties is asserted separately).
 */
function expectSameQuery(merged: QuerySummary, full: QuerySummary): void {
  expect(merged.def).toBe(full.def);
  expect(merged.stat).toEqual(full.stat);
  expect(merged.message).toBe(full.message);
  const key = (h: QuerySummary["hits"][number]): string => `${h.evalues.join(",")}|${h.bits.join(",")}`;
  expect(merged.hits.map(key)).toEqual(full.hits.map(key));
  const groups = (hits: QuerySummary["hits"]): string[] => {
    const out = new Map<string, string[]>();
    for (const h of hits) out.set(key(h), [...(out.get(key(h)) ?? []), h.id].sort());
    return [...out.entries()].map(([k, ids]) => `${k}:${ids.join(" ")}`);
  };
  expect(groups(merged.hits)).toEqual(groups(full.hits));
  expect(new Set(merged.hits.map((h) => h.id))).toEqual(new Set(full.hits.map((h) => h.id)));
}

// ---------------------------------------------------------------------------------------------
// Fixture: databases and searches shared by the tests
// ---------------------------------------------------------------------------------------------

let work: string;
let nucl: { db: FastaRecord[]; queries: FastaRecord[] };
let manifest: DatabaseManifest;
let dbDir: string;
let fullDb: string;
let fullXml: string;
const partitionXml: string[] = [];
const batchXml: string[][] = [];
let queryFile: string;
let batchFiles: string[];

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), "bp-blast-sharding-"));
  nucl = nucleotideData();
  const dbFasta = path.join(work, "nucl.fa");
  await writeFile(dbFasta, fasta(nucl.db));
  queryFile = path.join(work, "queries.fa");
  await writeFile(queryFile, fasta(nucl.queries));
  batchFiles = [path.join(work, "batch0.fa"), path.join(work, "batch1.fa")];
  await writeFile(batchFiles[0] as string, fasta(nucl.queries.slice(0, 3)));
  await writeFile(batchFiles[1] as string, fasta(nucl.queries.slice(3)));

  dbDir = path.join(work, "shardtest", "2024-01-02-03-04-05");
  manifest = await buildDatabase({
    name: "shardtest",
    fastaPath: dbFasta,
    type: "nucl",
    outDir: dbDir,
    partitions: 3,
    now: () => new Date(Date.UTC(2024, 0, 2, 3, 4, 5)),
  });
  fullDb = path.join(dbDir, manifest.path);
  const tasks: (() => Promise<string>)[] = [() => blast("blastn", queryFile, fullDb, path.join(work, "full.xml"))];
  for (const p of manifest.partitions) {
    tasks.push(() => blast("blastn", queryFile, path.join(dbDir, p.path), path.join(work, `all_p${p.index}.xml`)));
    for (const [b, file] of batchFiles.entries()) {
      tasks.push(() => blast("blastn", file, path.join(dbDir, p.path), path.join(work, `b${b}_p${p.index}.xml`)));
    }
  }
  const outputs = await inPairs(tasks);
  fullXml = outputs[0] as string;
  for (const [i] of manifest.partitions.entries()) {
    partitionXml.push(outputs[1 + i * 3] as string);
    for (let b = 0; b < 2; b++) {
      batchXml[b] ??= [];
      (batchXml[b] as string[]).push(outputs[2 + i * 3 + b] as string);
    }
  }
}, 60_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

describe("BLAST database partitioning and exact result merging (real BLAST+)", () => {
  it("B-068: buildDatabase writes a manifest with whole-database counts, UTC version and unequal partitions summing to the total", async () => {
    const letters = nucl.db.reduce((sum, r) => sum + r.sequence.length, 0);
    expect(manifest).toMatchObject({
      name: "shardtest",
      type: "nucl",
      version: "2024-01-02-03-04-05",
      letters,
      sequences: 300,
      volumes: 1,
      path: "full/shardtest",
      created_at: "2024-01-02T03:04:05.000Z",
    });
    expect(manifest.version).toMatch(/^\d{4}(-\d{2}){5}$/);
    expect(manifest.partitions.map((p) => [p.index, p.path])).toEqual([
      [1, "parts/p1/shardtest_p1"],
      [2, "parts/p2/shardtest_p2"],
      [3, "parts/p3/shardtest_p3"],
    ]);
    expect(manifest.partitions.reduce((s, p) => s + p.letters, 0)).toBe(letters);
    expect(manifest.partitions.reduce((s, p) => s + p.sequences, 0)).toBe(300);
    expect(new Set(manifest.partitions.map((p) => p.letters)).size).toBe(3);
    expect(new Set(manifest.partitions.map((p) => p.sequences)).size).toBeGreaterThan(1);
    for (const p of manifest.partitions) expect(p.letters).toBeGreaterThan(letters / 6);

    const onDisk = JSON.parse(await readFile(path.join(dbDir, "manifest.json"), "utf8")) as DatabaseManifest;
    expect(onDisk).toEqual(manifest);
    const files: { name: string; size: number }[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(full);
        else files.push({ name: path.relative(dbDir, full), size: (await stat(full)).size });
      }
    };
    await walk(dbDir);
    expect(files.some((f) => f.name.endsWith(".fa"))).toBe(false);
    expect(manifest.bytes).toBe(files.filter((f) => f.name !== "manifest.json").reduce((s, f) => s + f.size, 0));
    const cached = files.filter((f) => /^full\/shardtest\.n(sq|in|hr)$/.test(f.name));
    expect(cached).toHaveLength(3);
    expect(manifest.bytes_to_cache).toBe(cached.reduce((s, f) => s + f.size, 0));

    const alias = await readFile(path.join(dbDir, "parts/p2/shardtest_p2.nal"), "utf8");
    expect(alias).toContain("DBLIST shardtest_p2_data\n");
    expect(alias).toContain(`STATS_NSEQ 300\n`);
    expect(alias).toContain(`STATS_TOTLEN ${letters}\n`);
    expect(formatVersion(new Date(Date.UTC(2031, 11, 31, 23, 59, 58)))).toBe("2031-12-31-23-59-58");
  });

  it("unpartitioned build: no partitions, and -parse_seqids falls back for unparseable ids", async () => {
    const fa = path.join(work, "dup.fa");
    await writeFile(fa, ">same first\nACGTACGTACGTAAGGTTCCAAGGTT\n>same second\nTTGGCCAATTGGCCAAGGTTAACC\n");
    const plain = await buildDatabase({
      name: "dup",
      fastaPath: fa,
      type: "nucl",
      outDir: path.join(work, "dup", "v1"),
      partitions: 0,
    });
    expect(plain).toMatchObject({ sequences: 2, letters: 50, volumes: 1, partitions: [], path: "full/dup" });
    await expect(
      buildDatabase({ name: "dup", fastaPath: fa, type: "nucl", outDir: path.join(work, "dup", "v2"), partitions: 2 }),
    ).rejects.toThrow(/parse_seqids/);
    await expect(stat(path.join(work, "dup", "v2"))).rejects.toThrow();
  });

  it("invalid database names, types and paths are refused before anything is created", async () => {
    const fa = path.join(work, "nucl.fa");
    const outDir = path.join(work, "refused");
    for (const name of ["", ".hidden", "../escape", "a/b", "a b", "-flag", "x".repeat(65), "ok\0"]) {
      expect(DATABASE_NAME.test(name)).toBe(false);
      await expect(buildDatabase({ name, fastaPath: fa, type: "nucl", outDir, partitions: 0 })).rejects.toThrow(
        DatabaseBuildError,
      );
    }
    expect(DATABASE_NAME.test("nt_2024.v5-x")).toBe(true);
    const wrongType = "dna" as "nucl";
    await expect(buildDatabase({ name: "ok", fastaPath: fa, type: wrongType, outDir, partitions: 0 })).rejects.toThrow(
      /type/,
    );
    await expect(
      buildDatabase({ name: "ok", fastaPath: "nucl.fa", type: "nucl", outDir, partitions: 0 }),
    ).rejects.toThrow(/absolute/);
    await expect(buildDatabase({ name: "ok", fastaPath: fa, type: "nucl", outDir, partitions: 65 })).rejects.toThrow(
      /partitions/,
    );
    await expect(
      buildDatabase({ name: "ok", fastaPath: fa, type: "nucl", outDir: dbDir, partitions: 0 }),
    ).rejects.toThrow(/not empty/);
    await expect(stat(outDir)).rejects.toThrow();
  });

  it("partition aliases with whole-database STATS reproduce the unpartitioned search space; db-num/db-len are per partition", async () => {
    const full = parseBlastXml(await readFile(fullXml, "utf8"));
    const parts = await Promise.all(partitionXml.map(async (f) => parseBlastXml(await readFile(f, "utf8"))));
    for (const [q, iteration] of full.entries()) {
      const stat = iteration.Iteration_stat.Statistics;
      expect(stat["Statistics_db-num"]).toBe("300");
      for (const [i, part] of parts.entries()) {
        const partStat = part[q]?.Iteration_stat.Statistics ?? {};
        expect(partStat["Statistics_eff-space"]).toBe(stat["Statistics_eff-space"]);
        expect(partStat["Statistics_hsp-len"]).toBe(stat["Statistics_hsp-len"]);
        // BLAST 2.12 reports the partition's own counts here, not the alias STATS.
        expect(partStat["Statistics_db-num"]).toBe(String(manifest.partitions[i]?.sequences));
        expect(partStat["Statistics_db-len"]).toBe(String(manifest.partitions[i]?.letters));
      }
    }
  });

  it("B-102 B-100: merging 3 unequal partitions gives the unpartitioned hits, e-values, bit scores, order and Iteration_stat", async () => {
    const shards = partitionXml.map((file, i) => ({ batchIndex: 0, partitionIndex: i + 1, path: file }));
    const merged = await mergeToGzip(shards, path.join(work, "single-batch-merged.out.gz"));
    const full = parseBlastXml(await readFile(fullXml, "utf8")).map(summarize);
    const mine = parseBlastXml(merged.xml).map(summarize);
    expect(mine).toHaveLength(6);
    expect(merged.queries).toBe(6);
    expect(merged.hits).toBe(full.reduce((s, q) => s + q.hits.length, 0));
    for (const [q, summary] of full.entries()) expectSameQuery(mine[q] as QuerySummary, summary);
    // The data must exercise the cut and ties, or the assertions above prove little.
    expect(full[0]?.hits).toHaveLength(50);
    expect(full[3]?.hits).toHaveLength(0);
    expect(full[3]?.message).toBe("No hits found");
    // The cut at 50 splits a group of equal-scoring subjects (identical copies): the merge keeps
    // exactly the copies BLAST keeps (expectSameQuery compared the id sets above).
    const uncutFile = await blast("blastn", batchFiles[0] as string, fullDb, path.join(work, "uncut.xml"), [
      "-outfmt",
      "5",
      "-max_target_seqs",
      "500",
      "-evalue",
      "10",
    ]);
    const uncut = summarize(parseBlastXml(await readFile(uncutFile, "utf8"))[0] as ParsedIteration);
    const cutBits = full[0]?.hits[49]?.bits[0];
    const tiedKept = full[0]?.hits.filter((h) => h.bits[0] === cutBits).length ?? 0;
    expect(tiedKept).toBeGreaterThan(1);
    expect(uncut.hits.filter((h) => h.bits[0] === cutBits).length).toBeGreaterThan(tiedKept);
  });

  it("B-102 B-099: 2 query batches x 3 partitions (gzip shard outputs) merge to the unpartitioned document byte for byte", async () => {
    const shards: ShardOutput[] = [];
    for (const [b, files] of batchXml.entries()) {
      for (const [i, file] of files.entries()) {
        let shardPath = file;
        if (b === 1) {
          shardPath = `${file.replace(/\.xml$/, "")}.out.gz`;
          await writeFile(shardPath, gzipSync(await readFile(file)));
        }
        shards.push({ batchIndex: b, partitionIndex: i + 1, path: shardPath });
      }
    }
    // Input order must not matter.
    shards.reverse();
    const out = path.join(work, "merged_results.out.gz");
    const merged = await mergeToGzip(shards, out, fullDb);
    const fullText = await readFile(fullXml, "utf8");
    const iterations = parseBlastXml(merged.xml);
    expect(iterations.map((it) => it["Iteration_iter-num"])).toEqual(["1", "2", "3", "4", "5", "6"]);
    expect(iterations.map((it) => it["Iteration_query-ID"])).toEqual([
      "Query_1",
      "Query_2",
      "Query_3",
      "Query_4",
      "Query_5",
      "Query_6",
    ]);
    for (const it of iterations) {
      const hits = typeof it.Iteration_hits === "string" ? [] : (it.Iteration_hits.Hit ?? []);
      expect(hits.map((h) => h.Hit_num)).toEqual(hits.map((_, k) => String(k + 1)));
    }
    const full = parseBlastXml(fullText).map(summarize);
    for (const [q, summary] of full.entries()) expectSameQuery(summarize(iterations[q] as ParsedIteration), summary);
    // Stronger than "equal modulo ties": with BLAST's own tie order (higher OID first) and the
    // database name passed through, the merged document is the unpartitioned one, byte for byte.
    expect(merged.xml).toBe(fullText);
    expect(merged.xml).toContain("qA2 &amp; &lt;special&gt; &quot;quoted&quot;");
  });

  it("renderTabular matches blastn -outfmt 6 and -outfmt 7 on the unpartitioned search", async () => {
    const args = ["-max_target_seqs", "50", "-evalue", "10"];
    const [six, seven] = await inPairs([
      () => blast("blastn", queryFile, fullDb, path.join(work, "full.tsv"), ["-outfmt", "6", ...args]),
      () => blast("blastn", queryFile, fullDb, path.join(work, "full7.tsv"), ["-outfmt", "7", ...args]),
    ]);
    const render = async (commented: boolean): Promise<string> => {
      const chunks: Buffer[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          chunks.push(chunk);
          callback();
        },
      });
      await renderTabular(createReadStream(fullXml), sink, { commented });
      return Buffer.concat(chunks).toString("utf8");
    };
    const expected6 = await readFile(six as string, "utf8");
    expect(expected6.split("\n").length).toBeGreaterThan(100);
    expect(await render(false)).toBe(expected6);
    expect(await render(true)).toBe(await readFile(seven as string, "utf8"));
    // Tiny chunks split every tag across reads; the streaming reader must not care.
    async function* tiny(): AsyncGenerator<Uint8Array> {
      const bytes = await readFile(fullXml);
      for (let i = 0; i < bytes.length; i += 7) yield bytes.subarray(i, i + 7);
    }
    const tinyOut: Buffer[] = [];
    await renderTabular(
      tiny(),
      new Writable({
        write(chunk: Buffer, _encoding, callback) {
          tinyOut.push(chunk);
          callback();
        },
      }),
    );
    expect(Buffer.concat(tinyOut).toString("utf8")).toBe(expected6);
    // The merged (gzip) result renders the same way.
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk.toString("utf8"));
        callback();
      },
    });
    await renderTabular(createReadStream(path.join(work, "merged_results.out.gz")).pipe(createGunzip()), sink);
    expect(chunks.join("")).toBe(expected6);
  });

  it("tabular number formatting follows C printf (ties to even) and BLAST's ranges", () => {
    expect(formatFixed(0.0625, 3)).toBe("0.062");
    expect(formatFixed(23.25, 1)).toBe("23.2");
    expect(formatFixed(23.35, 1)).toBe("23.4");
    expect(formatFixed(97.8125, 3)).toBe("97.812");
    expect(formatEvalue(0)).toBe("0.0");
    expect(formatEvalue(3.44347e-177)).toBe("3.44e-177");
    expect(formatEvalue(6.74414e-12)).toBe("6.74e-12");
    expect(formatEvalue(0.0625)).toBe("0.062");
    expect(formatEvalue(0.43)).toBe("0.43");
    expect(formatEvalue(1.73889)).toBe("1.7");
    expect(formatEvalue(19.8038)).toBe("20");
    expect(formatBitScore(1151.58)).toBe("1151");
    expect(formatBitScore(99.95)).toBe(" 99");
    expect(formatBitScore(23.2801)).toBe("23.3");
    expect(formatBitScore(123456)).toBe("1.235e+05");
  });

  it("blastp on 2 partitions gives the unpartitioned e-values exactly", async () => {
    const prot = proteinData();
    const fa = path.join(work, "prot.fa");
    const queries = path.join(work, "prot-queries.fa");
    await writeFile(fa, fasta(prot.db));
    await writeFile(queries, fasta(prot.queries));
    const dir = path.join(work, "protdb", "v1");
    const built = await buildDatabase({ name: "protdb", fastaPath: fa, type: "prot", outDir: dir, partitions: 2 });
    expect(built.partitions).toHaveLength(2);
    expect(await readFile(path.join(dir, "parts/p1/protdb_p1.pal"), "utf8")).toContain(`STATS_TOTLEN ${built.letters}`);
    const [fullOut, ...parts] = await inPairs([
      () => blast("blastp", queries, path.join(dir, built.path), path.join(work, "prot-full.xml")),
      ...built.partitions.map(
        (p) => () => blast("blastp", queries, path.join(dir, p.path), path.join(work, `prot-p${p.index}.xml`)),
      ),
    ]);
    const merged = await mergeToGzip(
      parts.map((file, i) => ({ batchIndex: 0, partitionIndex: i + 1, path: file as string })),
      path.join(work, "prot-merged.out.gz"),
      path.join(dir, built.path),
    );
    const fullText = await readFile(fullOut as string, "utf8");
    const full = parseBlastXml(fullText).map(summarize);
    const mine = parseBlastXml(merged.xml).map(summarize);
    expect(full[0]?.hits.length).toBeGreaterThan(20);
    for (const [q, summary] of full.entries()) expectSameQuery(mine[q] as QuerySummary, summary);
    expect(merged.xml).toBe(fullText);
  });

  it("merging shards whose iterations do not match throws", async () => {
    const sink = new Writable({ write: (_c, _e, cb) => cb() });
    // Partition 2's file holds batch 1's queries: same count, different queries.
    await expect(
      mergeBlastXml({
        shards: [
          { batchIndex: 0, partitionIndex: 1, path: batchXml[0]?.[0] as string },
          { batchIndex: 0, partitionIndex: 2, path: batchXml[1]?.[1] as string },
        ],
        maxTargetSeqs: 50,
        output: sink,
      }),
    ).rejects.toThrow(BlastMergeError);
    // Different number of iterations.
    await expect(
      mergeBlastXml({
        shards: [
          { batchIndex: 0, partitionIndex: 1, path: partitionXml[0] as string },
          { batchIndex: 0, partitionIndex: 2, path: batchXml[0]?.[1] as string },
        ],
        maxTargetSeqs: 50,
        output: sink,
      }),
    ).rejects.toThrow(/iterations/);
    // A batch missing a partition.
    await expect(
      mergeBlastXml({
        shards: [
          { batchIndex: 0, partitionIndex: 1, path: batchXml[0]?.[0] as string },
          { batchIndex: 0, partitionIndex: 2, path: batchXml[0]?.[1] as string },
          { batchIndex: 1, partitionIndex: 1, path: batchXml[1]?.[0] as string },
        ],
        maxTargetSeqs: 50,
        output: sink,
      }),
    ).rejects.toThrow(/partitions/);
    // A truncated shard.
    const truncated = path.join(work, "truncated.xml");
    const text = await readFile(batchXml[0]?.[0] as string, "utf8");
    await writeFile(truncated, text.slice(0, Math.floor(text.length / 2)));
    await expect(
      mergeBlastXml({
        shards: [{ batchIndex: 0, partitionIndex: 1, path: truncated }],
        maxTargetSeqs: 50,
        output: sink,
      }),
    ).rejects.toThrow(/truncated/);
    // Its consumer fails (a storage upload): the output is destroyed while the merge waits for room,
    // or before its next write. Either way the merge ends with an error instead of waiting forever.
    for (const destroyAfter of [0, 1]) {
      let writes = 0;
      const stalled: Writable = new Writable({
        highWaterMark: 1,
        write: (_chunk, _encoding, callback) => {
          writes++;
          // The write is left pending (no callback) and the consumer fails after it, on the next turn.
          if (writes > destroyAfter) setImmediate(() => stalled.destroy());
          else callback();
        },
      });
      stalled.on("error", () => {});
      await expect(
        mergeBlastXml({
          shards: [{ batchIndex: 0, partitionIndex: 1, path: batchXml[0]?.[0] as string }],
          maxTargetSeqs: 50,
          output: stalled,
        }),
      ).rejects.toThrow(/closed before the merge finished/);
    }
  });

  it("runBlastTool reports failures with the exit code and stderr, and abort kills the process", async () => {
    expect(await blastVersion()).toMatch(/^\d+\.\d+\.\d+\+?$/);
    const failure = await runBlastTool("blastdbcmd", ["-db", path.join(work, "missing"), "-info"]).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(BlastToolError);
    expect((failure as BlastToolError).exitCode).not.toBe(0);
    expect((failure as BlastToolError).stderr).toMatch(/BLAST database|No alias or index file/i);
    const bad = "rm" as "blastn";
    await expect(runBlastTool(bad, ["-rf", "/"])).rejects.toThrow(/not a BLAST\+ tool/);

    const controller = new AbortController();
    let pid = 0;
    const run = runBlastTool(
      "blastn",
      ["-query", queryFile, "-db", fullDb, "-outfmt", "5", "-out", path.join(work, "aborted.xml"), "-word_size", "7"],
      {
        signal: controller.signal,
        onSpawn: (p) => {
          pid = p;
          controller.abort();
        },
      },
    );
    await expect(run).rejects.toMatchObject({ name: "AbortError" });
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).toThrow();
  });
});
