/**
 * What kind of sequences a text holds (nucleotide or protein, read from its letters), which
 * programs fit a query of that kind, and how many partitions a database of a given size wants on
 * nodes of a given memory. Pure and free of Node imports: the New search and Databases pages run
 * the same rules as the upload route.
 */
import { BLAST_PROGRAMS, type BlastProgram, type MoleculeType, queryMolecule } from "./programs.js";

/**
 * Share of a sequence's letters that must be A, C, G, T, U or N for it to count as nucleotide.
 * NCBI BLAST web uses the same kind of rule; a protein is far below it (A, C, G, T and N make up
 * about a quarter of an average protein's residues), a nucleotide FASTA with some IUPAC
 * ambiguity codes (R, Y, K, …) stays above it.
 */
export const NUCLEOTIDE_SHARE = 0.9;

const A = 65;
const Z = 90;
const NUCLEOTIDE_CORE = new Uint8Array(128);
for (const ch of "ACGTUN") {
  NUCLEOTIDE_CORE[ch.charCodeAt(0)] = 1;
  NUCLEOTIDE_CORE[ch.toLowerCase().charCodeAt(0)] = 1;
}

/** Letter counts of sequence lines, added line by line (headers and blank lines are not passed in). */
export class MoleculeTally {
  /** Letters A–Z (either case) seen. */
  letters = 0;
  /** Of those, A, C, G, T, U or N. */
  nucleotide = 0;

  /** Counts the letters of one sequence line (or part of one). */
  add(line: string): void {
    for (let i = 0; i < line.length; i++) {
      const code = line.charCodeAt(i);
      const upper = code >= 97 && code <= 122 ? code - 32 : code;
      if (upper < A || upper > Z) continue;
      this.letters += 1;
      if (NUCLEOTIDE_CORE[upper] === 1) this.nucleotide += 1;
    }
  }

  /** Counts the letters of bytes (ASCII) of a sequence line. */
  addBytes(bytes: Uint8Array, start: number, end: number): void {
    for (let i = start; i < end; i++) {
      const code = bytes[i] ?? 0;
      const upper = code >= 97 && code <= 122 ? code - 32 : code;
      if (upper < A || upper > Z) continue;
      this.letters += 1;
      if (NUCLEOTIDE_CORE[upper] === 1) this.nucleotide += 1;
    }
  }

  /** The molecule the letters look like; undefined when there are none. */
  molecule(): MoleculeType | undefined {
    if (this.letters === 0) return undefined;
    return this.nucleotide / this.letters >= NUCLEOTIDE_SHARE ? "nucl" : "prot";
  }
}

/**
 * The molecule a FASTA text (or a bare sequence) looks like, from the letters of its sequence
 * lines; undefined when it has no sequence letters.
 */
export function detectMolecule(text: string): MoleculeType | undefined {
  const tally = new MoleculeTally();
  let pos = 0;
  while (pos < text.length) {
    let end = text.indexOf("\n", pos);
    if (end === -1) end = text.length;
    if (text.charCodeAt(pos) !== 62 /* '>' */) tally.add(text.slice(pos, end));
    pos = end + 1;
  }
  return tally.molecule();
}

/** How a molecule is named in sentences. */
export function moleculeWord(molecule: MoleculeType): "nucleotide" | "protein" {
  return molecule === "nucl" ? "nucleotide" : "protein";
}

/** The programs whose queries are `molecule`, in the usual order (blastn, blastx, tblastx / blastp, tblastn). */
export function programsForQuery(molecule: MoleculeType): BlastProgram[] {
  return BLAST_PROGRAMS.filter((p) => queryMolecule(p) === molecule);
}

/** `a`, `a or b`, `a, b or c`. */
function orList(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]}`;
}

/** Advice for a query whose letters do not fit the program: the molecule it looks like and the programs that fit. */
export interface QueryProgramHint {
  molecule: MoleculeType;
  programs: BlastProgram[];
  message: string;
}

/**
 * Advice when `query` looks like the other molecule than `program` searches with (a protein under
 * blastn, a nucleotide sequence under blastp, …): "This query looks like protein — use blastp or
 * tblastn; blastn expects a nucleotide query." Undefined when it fits, or has no letters yet.
 */
export function queryProgramHint(program: BlastProgram, query: string): QueryProgramHint | undefined {
  const molecule = detectMolecule(query);
  if (molecule === undefined || molecule === queryMolecule(program)) return undefined;
  const programs = programsForQuery(molecule);
  return {
    molecule,
    programs,
    message: `This query looks like ${moleculeWord(molecule)} — use ${orList(programs)}; ${program} expects a ${moleculeWord(queryMolecule(program))} query.`,
  };
}

/** What is known of a FASTA before it is built: its molecule, letters, sequences and header bytes. */
export interface FastaSize {
  molecule: MoleculeType;
  letters: number;
  sequences: number;
  /** Bytes of header lines (the `>` lines); estimated from the file size when unknown. */
  headerBytes: number;
}

/**
 * The bytes BLAST caches to search a database built from this FASTA (its sequence, header and
 * index files, what `bytes_to_cache` reports once built): nucleotide sequences are packed four
 * bases to a byte, protein ones one residue to a byte; headers are stored about their own size;
 * the index holds three 4-byte offsets per sequence (nucleotide) or two (protein).
 */
export function estimateBytesToCache(size: FastaSize): number {
  const sequenceBytes = size.molecule === "nucl" ? Math.ceil(size.letters / 4) : size.letters + size.sequences;
  const indexBytes = size.sequences * (size.molecule === "nucl" ? 12 : 8);
  return sequenceBytes + size.headerBytes + indexBytes;
}

/** Most partitions a database is built with (as `buildDatabase` allows). */
export const MAX_PARTITIONS = 64;

/** A byte count in decimal units, as storage is sold and the web app writes sizes: `720 bytes`, `15.6 KB`, `1.2 GB`. */
function bytesText(n: number): string {
  const units = ["KB", "MB", "GB", "TB"];
  if (n < 1000) return `${Math.round(n)} bytes`;
  let value = n / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** A suggested partition count and why. */
export interface PartitionAdvice {
  /** 0: not partitioned; 2–64: that many. */
  partitions: number;
  /** The estimate it is based on. */
  bytesToCache: number;
  reason: string;
}

/**
 * Partitions for a database of `size` on nodes leaving `usableBytes` of memory to a search (node
 * memory less the job API's margin): none when the whole database fits, else enough that each
 * partition fits (at least 2, at most 64 and at most one per sequence). Without a known node
 * memory, none.
 */
export function suggestPartitions(size: FastaSize, usableBytes: number | null | undefined): PartitionAdvice {
  const bytesToCache = estimateBytesToCache(size);
  const mb = bytesText;
  if (!usableBytes || usableBytes <= 0) {
    return {
      partitions: 0,
      bytesToCache,
      reason: `about ${mb(bytesToCache)} to cache; the nodes' memory is not known, so no partitions are suggested`,
    };
  }
  if (bytesToCache <= usableBytes) {
    return {
      partitions: 0,
      bytesToCache,
      reason: `about ${mb(bytesToCache)} to cache fits in a node's ${mb(usableBytes)} of usable memory: no partitions needed`,
    };
  }
  const wanted = Math.max(2, Math.ceil(bytesToCache / usableBytes));
  const partitions = Math.min(wanted, MAX_PARTITIONS, Math.max(2, size.sequences));
  const fits = bytesToCache / partitions <= usableBytes;
  return {
    partitions,
    bytesToCache,
    reason: `about ${mb(bytesToCache)} to cache is more than a node's ${mb(usableBytes)} of usable memory: ${partitions} partitions of about ${mb(bytesToCache / partitions)} each${fits ? "" : " (still more than a node holds: search it on larger nodes)"}; search it with the sharded profile`,
  };
}

/**
 * A FASTA's size read from its first `sample` characters (the page reads the first MiB of a file
 * before uploading it), scaled to `totalBytes`: exact when the sample is the whole file. The
 * molecule is the sample's (nucleotide when it has no letters yet).
 */
export function sizeFromSample(sample: string, totalBytes: number): FastaSize & { exact: boolean } {
  const tally = new MoleculeTally();
  let sequences = 0;
  let headerBytes = 0;
  let pos = 0;
  while (pos < sample.length) {
    let end = sample.indexOf("\n", pos);
    if (end === -1) end = sample.length;
    if (sample.charCodeAt(pos) === 62) {
      sequences += 1;
      headerBytes += end - pos + 1;
    } else tally.add(sample.slice(pos, end));
    pos = end + 1;
  }
  const exact = sample.length >= totalBytes;
  const scale = exact || sample.length === 0 ? 1 : totalBytes / sample.length;
  return {
    molecule: tally.molecule() ?? "nucl",
    letters: Math.round(tally.letters * scale),
    sequences: Math.max(1, Math.round(sequences * scale)),
    headerBytes: Math.round(headerBytes * scale),
    exact,
  };
}
