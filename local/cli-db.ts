import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { databaseSummary, publishDatabase } from "../shared/databases/database-catalog.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../shared/databases/table-catalog.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "./azurite.js";

/** Where the running stack's Azurite listens (from its `stack.json`). */
export interface StackStorage {
  blob_endpoint: string;
  table_endpoint: string;
}

const USAGE = "blastplane db add NAME FASTA [--type nucl|prot] [--partitions N] [--json]";

/**
 * `blastplane db add NAME FASTA [--type nucl|prot] [--partitions N] [--json]`: builds a database
 * with makeblastdb into the running local stack's database folder, publishes the release to its
 * storage (Azurite) and makes it current in the catalog the job API and the dashboard read.
 * `--json` prints the release as one JSON record (the catalog's summary of it).
 */
export async function dbCommand(argv: string[], databasesDir: string, storage?: StackStorage): Promise<void> {
  const [sub, ...rest] = argv;
  if (sub !== "add") throw new Error(`usage: ${USAGE}`);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      type: { type: "string", default: "nucl" },
      partitions: { type: "string", default: "0" },
      json: { type: "boolean", default: false },
    },
  });
  const [name, fasta] = positionals;
  if (!name || !fasta || positionals.length !== 2) throw new Error(`usage: ${USAGE}`);
  if (values.type !== "nucl" && values.type !== "prot") throw new Error("--type must be nucl or prot");
  const partitions = Number(values.partitions);
  if (!Number.isInteger(partitions) || partitions < 0 || partitions > 64)
    throw new Error("--partitions must be a whole number from 0 to 64");
  const fastaPath = path.resolve(fasta);
  if (!existsSync(fastaPath)) throw new Error(`no such file: ${fasta}`);
  const publisher = storage ? stackCatalog(storage, databasesDir) : undefined;
  const entry = await publishDatabase(databasesDir, { name, fastaPath, type: values.type, partitions }, publisher);
  const m = entry.manifest;
  if (values.json) {
    process.stdout.write(`${JSON.stringify(databaseSummary(entry))}\n`);
    return;
  }
  process.stdout.write(
    `database ${m.name} (${m.type}) version ${m.version}: ${m.sequences} sequences, ${m.letters} letters, ${m.partitions.length} partitions\n`,
  );
}

/** The running local stack's catalog (its Azurite account is Azurite's public development account). */
function stackCatalog(storage: StackStorage, databasesDir: string) {
  const connectionString =
    `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};` +
    `BlobEndpoint=${storage.blob_endpoint};TableEndpoint=${storage.table_endpoint};`;
  const { store, table } = openDatabaseStorage(connectionString);
  return createTableDatabaseCatalog({ store, table, cacheRoot: databasesDir });
}
