import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { publishDatabase } from "../../shared/databases/database-catalog.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../../shared/databases/table-catalog.js";
import { createLogger } from "../../shared/logging/logger.js";
import { callerWith } from "../support/console-harness.js";
import { ROOT } from "../support/local-stack.js";
import { testAzurite } from "../support/service-fakes.js";

/**
 * The console as the Functions app builds it (`functions/composition/console-parts.ts`, in this
 * process) reads the databases the way the dashboard's routes and the executors do: through the
 * table catalog. Here, as in Azure, there is no `DATABASES_DIR`: the only database is one published
 * to the table catalog (`db add`), and the folder it was built in is gone.
 */

const DB = "tableonlydb";
const saved = { ...process.env };
let azurite: RunningAzurite;

beforeAll(async () => {
  azurite = await testAzurite();
  const build = await mkdtemp(path.join(tmpdir(), "bp-console-db-"));
  const catalog = createTableDatabaseCatalog({ ...openDatabaseStorage(azurite.connectionString), cacheRoot: build });
  await publishDatabase(
    build,
    { name: DB, fastaPath: path.join(ROOT, "local/demo/16s-rrna-demo.fasta"), type: "nucl", partitions: 0 },
    catalog,
  );
  await rm(build, { recursive: true, force: true });
  delete process.env.DATABASES_DIR;
  process.env.AzureWebJobsStorage = azurite.connectionString;
  process.env.AUTH_TENANT_ID = "tenant";
  process.env.AUTH_CLIENT_ID = "client";
}, 120_000);

afterAll(async () => {
  process.env = saved;
  await azurite?.stop();
});

async function consoleCoordinator() {
  const { consoleParts } = await import("../../functions/composition/console-deps.js");
  return (await consoleParts()).coordinator;
}

describe("the console's databases with only the table catalog configured (no DATABASES_DIR)", () => {
  it("the verifier finds a database that is only in the table catalog: a rewarm_database dry run is eligible, an unknown database is denied", async () => {
    const coordinator = await consoleCoordinator();
    const ask = async (database: string) =>
      (
        await coordinator.handleTurn(callerWith("Contributor"), {
          text: `run_runbook name=rewarm_database params={"database":"${database}"} dry_run=true`,
        })
      ).tool_results[0];
    expect(await ask(DB)).toMatchObject({
      status: "ok",
      data: { dry_run: true, verifier_report: { verdict: "eligible", missing_evidence: [] } },
    });
    expect(await ask("nosuchdb")).toMatchObject({ status: "ok", data: { verifier_report: { verdict: "deny" } } });
  }, 60_000);

  it("query_inventory lists the table catalog's database and its release", async () => {
    const coordinator = await consoleCoordinator();
    const reply = await coordinator.handleTurn(callerWith("Reader"), {
      text: "query_inventory kind=list resource_type=blast_database",
    });
    const result = reply.tool_results[0];
    expect(result).toMatchObject({ status: "ok" });
    expect(JSON.stringify(result)).toContain(`"${DB}"`);
  }, 60_000);
});

describe("dashboard submits with only the table catalog configured (no DATABASES_DIR)", () => {
  async function submit(program: string, db: string, queryFasta: string) {
    const { dashboardJobService } = await import("../../functions/composition/dashboard-deps.js");
    const service = dashboardJobService({
      // A refused submit starts no orchestration: the client has no methods to call.
      durable: () => ({}) as never,
      logger: createLogger({ level: "error" }),
    });
    return service.submit(
      { oid: "00000000-0000-4000-8000-0000000000aa", roles: ["Contributor"] } as never,
      {
        program,
        db,
        query_fasta: queryFasta,
      } as never,
    );
  }

  it("B-238 a protein program against a table-catalog nucleotide database is refused naming body.db", async () => {
    await expect(submit("blastp", DB, ">p1\nMKTAYIAKQR\n")).rejects.toMatchObject({
      issues: [{ loc: ["body", "db"], msg: expect.stringContaining("protein database") }],
    });
  }, 60_000);

  it("B-238 an unknown database is refused naming body.db", async () => {
    await expect(submit("blastn", "nosuchdb", ">q1\nACGTACGTACGTACGT\n")).rejects.toMatchObject({
      issues: [{ loc: ["body", "db"], msg: "unknown database 'nosuchdb' (see GET /v1/databases)" }],
    });
  }, 60_000);
});
