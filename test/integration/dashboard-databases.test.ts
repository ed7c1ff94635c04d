import { TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

const DB = "ref_16s";
const R1 = "2026-01-01-00-00-00";
const R2 = "2026-02-01-00-00-00";
const R3 = "2026-03-01-00-00-00";

/** Real 16S sequences from the shipped demo FASTA, as the source's content. */
function release(count: number, skip = 0): string {
  return demoQueries(count, 1500, skip);
}

interface DatabaseRow {
  name: string;
  version: string;
  sequences: number;
  partitions: number;
  warm_state: string;
  update_available: boolean;
  latest_release: string | null;
}

let server: FakeNcbiServer;
let stack: TestStack;
let token: string;

async function call(method: string, path: string): Promise<Response> {
  return fetch(`${stack.info.functions_url}/api${path}`, { method, headers: { Authorization: `Bearer ${token}` } });
}

async function operation(path: string): Promise<Record<string, unknown>> {
  const res = await call("POST", path);
  expect(res.status).toBe(200);
  const { operation: op } = (await res.json()) as { operation: { operation_id: string; state: string } };
  expect(op.state).toBe("queued");
  return eventually(
    async () => {
      const o = (await (await call("GET", `/operations/${op.operation_id}`)).json()) as Record<string, unknown>;
      return ["succeeded", "failed", "cancelled"].includes(String(o.state)) ? o : undefined;
    },
    60_000,
    200,
  );
}

async function database(name: string): Promise<DatabaseRow | undefined> {
  const body = (await (await call("GET", "/databases")).json()) as { databases: DatabaseRow[] };
  return body.databases.find((d) => d.name === name);
}

beforeAll(async () => {
  server = await startFakeNcbiServer();
  await server.publishRelease(R1, [{ name: DB, type: "nucl", fasta: release(24), volumes: 3 }]);
  await server.setLatest(R1);
  stack = await startStack({ env: { DATABASE_SOURCE_URL: server.url, SVC_DB_UPDATE_CHECK_SCHEDULE: "*/2 * * * * *" } });
  token = await mintToken(stack, "Contributor");
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
  await server?.close();
});

describe("dashboard databases: prepare, warm-up and the scheduled update check", () => {
  it("B-005 B-016 B-006 prepares a release from the NCBI-layout source as an operation, then warms it", async () => {
    const op = await operation(`/databases/${DB}/prepare`);
    expect(op).toMatchObject({
      state: "succeeded",
      operation_type: "database.prepare",
      target: { resource_type: "blast_database", name: DB },
    });
    expect(await database(DB)).toMatchObject({
      name: DB,
      version: R1,
      sequences: 24,
      partitions: 2,
      warm_state: "cold",
    });
    // The job API searches the prepared release right away.
    const api = jobApi(stack, readApiToken(stack));
    const job = await api.submit({
      program: "blastn",
      db: DB,
      query_fasta: release(1, 5),
      execution_profile: "sharded",
    });
    expect((await api.finished(job.job_id)).status).toBe("completed");

    const warm = await operation(`/databases/${DB}/warmup`);
    expect(warm).toMatchObject({ state: "succeeded", operation_type: "database.warmup" });
    expect((await database(DB))?.warm_state).toBe("warm");
    expect((await database(DEMO_DB))?.warm_state).toBe("cold");
  });

  it("a checksum mismatch fails the prepare with a focused error and leaves the current release serving", async () => {
    await server.publishRelease(R2, [{ name: DB, type: "nucl", fasta: release(30), volumes: 3 }]);
    await server.corrupt(R2, `${DB}.01.tar.gz`);
    await server.setLatest(R2);
    const op = await operation(`/databases/${DB}/prepare`);
    expect(op.state).toBe("failed");
    expect(String((op.error as { detail: string }).detail)).toMatch(/checksum|md5/i);
    expect((await database(DB))?.version).toBe(R1);
  });

  it("B-017 the update-check timer marks update_available and records an event; a shrinking release then prepares cleanly", async () => {
    await server.publishRelease(R3, [{ name: DB, type: "nucl", fasta: release(12, 40), volumes: 2 }]);
    await server.setLatest(R3);
    const flagged = await eventually(
      async () => {
        const row = await database(DB);
        return row?.update_available && row.latest_release === R3 ? row : undefined;
      },
      30_000,
      250,
    );
    expect(flagged.version).toBe(R1);

    const events = TableClient.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
      "events",
      { allowInsecureConnection: true },
    );
    // The check sets the flag, then records the event: one storage round trip apart.
    await eventually(
      async () => {
        for await (const e of events.listEntities<Record<string, unknown>>()) {
          if (JSON.stringify(e).includes("database.update_available") && JSON.stringify(e).includes(R3)) return true;
        }
        return undefined;
      },
      10_000,
      100,
    );

    // 3 volumes → 2 volumes: the new release is built in its own folder, so no stale volume survives.
    const op = await operation(`/databases/${DB}/prepare`);
    expect(op.state).toBe("succeeded");
    const row = await eventually(
      async () => {
        const r = await database(DB);
        return r?.version === R3 && !r.update_available ? r : undefined;
      },
      30_000,
      250,
    );
    expect(row.sequences).toBe(12);

    // A check that read the catalog just before the swap writes its verdict after it: the release
    // it flags is the one now serving, which is not an update.
    const connection = `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;
    await DatabaseStateStore.fromConnectionString(connection).patch(DB, { update_available: true, latest_release: R3 });
    expect(await database(DB)).toMatchObject({ version: R3, update_available: false, latest_release: R3 });
  });

  it("refuses a Reader's prepare (403) and answers 404 when warming an unknown database", async () => {
    const reader = await mintToken(stack, "Reader");
    const res = await fetch(`${stack.info.functions_url}/api/databases/${DB}/prepare`, {
      method: "POST",
      headers: { Authorization: `Bearer ${reader}` },
    });
    expect(res.status).toBe(403);
    expect((await call("POST", "/databases/not_there/warmup")).status).toBe(404);
    expect((await call("POST", "/databases/..%2Fetc/prepare")).status).toBe(400);
  });
});
