import { type BlastProgram, databaseMolecule } from "../blast/programs.js";
import { ValidationError } from "../errors.js";
import type { DatabaseEntry } from "./catalog-types.js";

/**
 * Refuses (422, naming `db` or `execution_profile`) a search the job API could never run: an
 * unknown database, one of the wrong molecule for the program, or the sharded profile on a
 * database with no prepared partitions. Both the job API and the dashboard check this at submit,
 * so no job is accepted that is certain to fail. Returns the entry when it fits.
 */
export function requireDatabaseFit(
  program: BlastProgram,
  name: string,
  entry: DatabaseEntry | undefined,
  executionProfile: string | undefined,
): DatabaseEntry {
  if (!entry) {
    throw new ValidationError([
      { loc: ["body", "db"], msg: `unknown database '${name}' (see GET /v1/databases)`, type: "value_error" },
    ]);
  }
  const wanted = databaseMolecule(program);
  if (entry.manifest.type !== wanted) {
    throw new ValidationError([
      {
        loc: ["body", "db"],
        msg: `${program} searches a ${wanted === "nucl" ? "nucleotide" : "protein"} database; '${name}' is ${entry.manifest.type === "nucl" ? "nucleotide" : "protein"}`,
        type: "value_error",
      },
    ]);
  }
  if (executionProfile === "sharded" && entry.manifest.partitions.length === 0) {
    throw new ValidationError([
      { loc: ["body", "execution_profile"], msg: `database '${name}' has no prepared partitions`, type: "value_error" },
    ]);
  }
  return entry;
}
