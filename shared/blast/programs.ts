/**
 * The BLAST+ search programs the control plane runs, and the facts about each that validation,
 * query batching and database selection need.
 */

/** Every program a job may name; anything else is refused before it reaches an executor. */
export const BLAST_PROGRAMS = ["blastn", "blastp", "blastx", "tblastn", "tblastx"] as const;

/** One of {@link BLAST_PROGRAMS}. */
export type BlastProgram = (typeof BLAST_PROGRAMS)[number];

/** The molecule a query or a database holds, in `makeblastdb -dbtype` spelling. */
export type MoleculeType = "nucl" | "prot";

const MOLECULES: Readonly<Record<BlastProgram, { query: MoleculeType; database: MoleculeType }>> = {
  blastn: { query: "nucl", database: "nucl" },
  blastp: { query: "prot", database: "prot" },
  blastx: { query: "nucl", database: "prot" },
  tblastn: { query: "prot", database: "nucl" },
  tblastx: { query: "nucl", database: "nucl" },
};

/** True when `value` names a supported program (a type guard for untrusted strings). */
export function isBlastProgram(value: unknown): value is BlastProgram {
  return typeof value === "string" && (BLAST_PROGRAMS as readonly string[]).includes(value);
}

/** The molecule the program expects in the query FASTA (selects the alphabet the parser enforces). */
export function queryMolecule(program: BlastProgram): MoleculeType {
  return MOLECULES[program].query;
}

/** The molecule the program searches, i.e. the `-dbtype` a database must have to be usable. */
export function databaseMolecule(program: BlastProgram): MoleculeType {
  return MOLECULES[program].database;
}

/**
 * Letters per query batch (one shard per batch), per program. These are ElasticBLAST's defaults
 * (`get_query_batch_size` in ncbi/elastic-blast `src/elastic_blast/util.py`), which NCBI tuned so
 * that one batch keeps one BLAST process busy for a sensible time against a large database.
 */
export const QUERY_BATCH_LETTERS: Readonly<Record<BlastProgram, number>> = {
  blastn: 5_000_000,
  blastp: 10_000,
  blastx: 20_004,
  tblastn: 20_000,
  // ElasticBLAST's own tblastx default. Larger than blastx although both translate the query:
  // tblastx is ungapped and runs against a nucleotide database, and NCBI sized it separately.
  tblastx: 100_000,
};
