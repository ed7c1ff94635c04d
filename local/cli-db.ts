import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { publishDatabase } from "../shared/databases/database-catalog.js";

/**
 * `blastplane db add NAME FASTA [--type nucl|prot] [--partitions N]`: builds a database with
 * makeblastdb into the running local stack's database folder and makes it current.
 */
export async function dbCommand(argv: string[], databasesDir: string): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== "add") throw new Error("usage: blastplane db add NAME FASTA [--type nucl|prot] [--partitions N]");
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { type: { type: "string", default: "nucl" }, partitions: { type: "string", default: "0" } },
  });
  const [name, fasta] = positionals;
  if (!name || !fasta || positionals.length !== 2) throw new Error("usage: blastplane db add NAME FASTA [--type nucl|prot] [--partitions N]");
  if (values.type !== "nucl" && values.type !== "prot") throw new Error("--type must be nucl or prot");
  const partitions = Number(values.partitions);
  if (!Number.isInteger(partitions) || partitions < 0 || partitions > 64) throw new Error("--partitions must be a whole number from 0 to 64");
  const fastaPath = path.resolve(fasta);
  if (!existsSync(fastaPath)) throw new Error(`no such file: ${fasta}`);
  const entry = await publishDatabase(databasesDir, { name, fastaPath, type: values.type, partitions });
  const m = entry.manifest;
  process.stdout.write(
    `database ${m.name} (${m.type}) version ${m.version}: ${m.sequences} sequences, ${m.letters} letters, ${m.partitions.length} partitions\n`,
  );
}
