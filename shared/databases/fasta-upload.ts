/**
 * The check a database FASTA passes while it is uploaded: bytes are read once, as they stream to
 * storage, and the first problem refuses the upload (422 naming line and column, or 413 past the
 * size limit) before anything is stored or built. What passes is what `makeblastdb` accepts for
 * the chosen molecule, so a build does not fail on the file's contents.
 */
import type { MoleculeType } from "../blast/programs.js";
import { MoleculeTally, moleculeWord } from "../blast/sequence-kind.js";
import { InvalidFieldError, PayloadTooLargeError } from "../errors.js";

/** What a checked upload holds. */
export interface FastaUploadSummary {
  bytes: number;
  sequences: number;
  letters: number;
  /** Bytes of header lines (`>` to the end of the line). */
  header_bytes: number;
  /** The molecule its letters look like (see `detectMolecule`). */
  detected_type: MoleculeType | null;
}

/** The upload is larger than the limit (`DATABASE_UPLOAD_MAX_BYTES`): 413 in the spec's envelope. */
export class UploadTooLargeError extends PayloadTooLargeError {
  constructor(limitBytes: number) {
    super(limitBytes);
    this.message = `the FASTA file is larger than the upload limit of ${limitBytes.toLocaleString("en-US")} bytes (DATABASE_UPLOAD_MAX_BYTES); split it, or add it with 'npx blastplane db add'`;
  }
}

const NUCLEOTIDE = "ACGTURYKMSWBDHVN";
const PROTEIN = "ACDEFGHIKLMNPQRSTVWYBZXJUO*";

function alphabet(letters: string): Uint8Array {
  const table = new Uint8Array(256);
  for (const ch of letters) {
    table[ch.charCodeAt(0)] = 1;
    table[ch.toLowerCase().charCodeAt(0)] = 1;
  }
  // Gaps: makeblastdb drops them.
  table[45] = 2;
  return table;
}

const ALPHABETS: Record<MoleculeType, Uint8Array> = { nucl: alphabet(NUCLEOTIDE), prot: alphabet(PROTEIN) };

const LF = 10;
const CR = 13;
const GT = 62;
/** Longest header line accepted (makeblastdb keeps deflines whole; BLAST's XML reports repeat them). */
const MAX_HEADER_BYTES = 10_000;

function isSpace(b: number): boolean {
  return b === 32 || b === 9 || b === CR || b === 11 || b === 12;
}

function shown(b: number): string {
  return b > 32 && b < 127 ? `'${String.fromCharCode(b)}'` : `byte 0x${b.toString(16).padStart(2, "0")}`;
}

/**
 * A streaming check of a database FASTA for `type`, with a byte limit. Feed it every chunk with
 * {@link push}, then call {@link finish}; each throws at the first problem: a
 * {@link UploadTooLargeError} past `maxBytes`, else a 422 `ValidationError` at `loc` `["body"]`
 * (binary or compressed data, text before the first header, an empty id, a character outside the
 * molecule's letters, a record with no letters, an empty file).
 */
export class FastaUploadCheck {
  private bytes = 0;
  private line = 1;
  private column = 0;
  /** Where the current line is: at its start, in a header, or in a sequence line. */
  private where: "start" | "header" | "sequence" = "start";
  private sequences = 0;
  private letters = 0;
  private recordLetters = 0;
  private recordLine = 0;
  private headerBytes = 0;
  private headerLength = 0;
  private readonly tally = new MoleculeTally();
  private readonly table: Uint8Array;

  constructor(
    private readonly type: MoleculeType,
    private readonly maxBytes: number,
  ) {
    this.table = ALPHABETS[type];
  }

  private refuse(msg: string): never {
    throw new InvalidFieldError(["body"], msg);
  }

  private endRecord(): void {
    if (this.sequences > 0 && this.recordLetters === 0)
      this.refuse(
        `sequence ${this.sequences.toLocaleString("en-US")} (header at line ${this.recordLine}) has no sequence letters`,
      );
  }

  /** Checks the next chunk of the upload. */
  push(chunk: Uint8Array): void {
    if (this.bytes === 0 && chunk.length >= 2 && chunk[0] === 0x1f && chunk[1] === 0x8b)
      this.refuse("the file is gzip-compressed: unpack it and upload the plain FASTA text");
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) throw new UploadTooLargeError(this.maxBytes);
    let sequenceStart = -1;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i] ?? 0;
      if (b === LF) {
        if (sequenceStart >= 0) this.tally.addBytes(chunk, sequenceStart, i);
        sequenceStart = -1;
        this.endLine();
        continue;
      }
      this.column += 1;
      if (b === 0 || (b < 32 && !isSpace(b)) || b === 127)
        this.refuse(
          `the file holds binary data (${shown(b)} at line ${this.line}, column ${this.column}): upload a plain-text FASTA file`,
        );
      if (this.where === "start") {
        if (b === GT && this.column === 1) {
          this.endRecord();
          this.where = "header";
          this.sequences += 1;
          this.recordLetters = 0;
          this.recordLine = this.line;
          this.headerLength = 0;
          this.headerBytes += 1;
          continue;
        }
        if (isSpace(b)) continue;
        if (this.sequences === 0)
          this.refuse(
            `line ${this.line} is not a FASTA header: a FASTA file starts with a '>' line naming the first sequence`,
          );
        this.where = "sequence";
      }
      if (this.where === "header") {
        this.headerBytes += 1;
        this.headerLength += 1;
        if (this.headerLength === 1 && isSpace(b))
          this.refuse(
            `the header at line ${this.line} has an empty id: the id must follow '>' directly, with no space`,
          );
        if (b > 126)
          this.refuse(
            `the header at line ${this.line} has a non-ASCII character (${shown(b)}): BLAST+ writes only ASCII headers`,
          );
        if (this.headerLength > MAX_HEADER_BYTES)
          this.refuse(
            `the header at line ${this.line} is longer than ${MAX_HEADER_BYTES.toLocaleString("en-US")} characters`,
          );
        continue;
      }
      // A sequence line.
      if (sequenceStart < 0) sequenceStart = i;
      if (isSpace(b)) continue;
      const kind = this.table[b] ?? 0;
      if (kind === 1) {
        this.letters += 1;
        this.recordLetters += 1;
        continue;
      }
      if (kind === 2) continue;
      const why =
        b >= 48 && b <= 57
          ? "digits are not allowed in a sequence"
          : b === GT
            ? "a header line must start with '>' in the first column"
            : this.type === "nucl" && (ALPHABETS.prot[b] ?? 0) === 1
              ? `it is not a nucleotide letter: this looks like a protein FASTA, so choose ${moleculeWord("prot")}`
              : `a ${moleculeWord(this.type)} sequence may contain only ${this.type === "nucl" ? NUCLEOTIDE : PROTEIN} and '-'`;
      this.refuse(`invalid character ${shown(b)} at line ${this.line}, column ${this.column}: ${why}`);
    }
    if (sequenceStart >= 0) this.tally.addBytes(chunk, sequenceStart, chunk.length);
  }

  private endLine(): void {
    if (this.where === "header" && this.headerLength === 0)
      this.refuse(`the header at line ${this.line} has an empty id: the id must follow '>' directly`);
    this.headerBytes += this.where === "header" ? 1 : 0;
    this.where = "start";
    this.line += 1;
    this.column = 0;
  }

  /** Ends the check: the file must hold at least one sequence, each with letters. */
  finish(): FastaUploadSummary {
    if (this.bytes === 0) this.refuse("the file is empty: upload a FASTA file with at least one sequence");
    if (this.where === "header" && this.headerLength === 0)
      this.refuse(`the header at line ${this.line} has an empty id: the id must follow '>' directly`);
    if (this.sequences === 0) this.refuse("the file holds no FASTA records (no line starts with '>')");
    this.endRecord();
    return {
      bytes: this.bytes,
      sequences: this.sequences,
      letters: this.letters,
      header_bytes: this.headerBytes,
      detected_type: this.tally.molecule() ?? null,
    };
  }
}
