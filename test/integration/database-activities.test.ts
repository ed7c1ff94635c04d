import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createCheckDatabaseUpdatesActivity,
  createPrepareDatabaseActivity,
  createWarmDatabaseActivity,
  type DatabaseActivityDependencies,
} from "../../shared/databases/database-activities.js";
import { createFileDatabaseCatalog } from "../../shared/databases/database-catalog.js";
import type { DatabaseState } from "../../shared/databases/database-state.js";
import { createNcbiSource } from "../../shared/databases/ncbi-source.js";
import type { EventInput } from "../../shared/ops/events.js";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { prng } from "../support/helpers.js";
import { captureLogger } from "../support/service-fakes.js";

/**
 * The database operations' activities over a fake NCBI distribution (HTTP, real BLAST databases),
 * a real folder of releases, and in-memory stand-ins for the state table and the event log.
 */
const DB = "actdb";
const R1 = "2025-03-01-00-00-00";
const R2 = "2025-04-01-00-00-00";
const NOW = new Date("2025-03-15T12:00:00.000Z");

const rnd = prng(20250301);
const FASTA = Array.from(
  { length: 12 },
  (_, i) => `>s${i}\n${Array.from({ length: 600 }, () => "ACGT"[Math.floor(rnd() * 4)]).join("")}\n`,
).join("");

let server: FakeNcbiServer;
let work: string;

beforeAll(async () => {
  server = await startFakeNcbiServer();
  await server.publishRelease(R1, [{ name: DB, type: "nucl", fasta: FASTA, volumes: 2 }]);
  await server.setLatest(R1);
  work = await mkdtemp(path.join(tmpdir(), "bp-db-activities-"));
});

afterAll(async () => {
  await server?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** Activity dependencies over a fresh databases folder, recording state patches and events in memory. */
async function dependencies(options: { sourceUrl?: string } = {}) {
  const databasesDir = await mkdtemp(path.join(work, "dbs-"));
  const patches: { name: string; change: Partial<DatabaseState> }[] = [];
  const events: EventInput[] = [];
  const deps: DatabaseActivityDependencies = {
    databasesDir: () => databasesDir,
    source: () => {
      if (!options.sourceUrl) throw new Error("DATABASE_SOURCE_URL is not configured");
      return createNcbiSource({ baseUrl: options.sourceUrl });
    },
    catalog: createFileDatabaseCatalog,
    state: {
      patch: async (name, change) => {
        patches.push({ name, change });
      },
    },
    events: {
      record: async (input) => {
        events.push(input);
        return { ...input, event_id: `e${events.length}` } as never;
      },
    },
    logger: captureLogger(),
    now: () => NOW,
  };
  return { deps, databasesDir, patches, events };
}

describe("database activities", () => {
  it("prepare makes the source's latest release current and resets the warm-up state to cold", async () => {
    const { deps, databasesDir, patches } = await dependencies({ sourceUrl: server.url });
    const prepared = await createPrepareDatabaseActivity(deps)({ name: DB, partitions: 2 });
    expect(prepared).toEqual({ name: DB, version: R1, sequences: 12, letters: 12 * 600, partitions: 2 });
    expect((await createFileDatabaseCatalog(databasesDir).get(DB))?.manifest.version).toBe(R1);
    expect(patches).toEqual([
      { name: DB, change: { update_available: false, warm_state: "cold", warmed_version: null } },
    ]);
  });

  it("prepare without a configured source fails before touching any state", async () => {
    const { deps, patches } = await dependencies();
    await expect(createPrepareDatabaseActivity(deps)({ name: DB, partitions: 0 })).rejects.toThrow(
      "DATABASE_SOURCE_URL is not configured",
    );
    expect(patches).toEqual([]);
  });

  it("warm-up reads every file of the current release and records warming, then warm with its version", async () => {
    const { deps, databasesDir, patches } = await dependencies({ sourceUrl: server.url });
    await createPrepareDatabaseActivity(deps)({ name: DB, partitions: 0 });
    patches.length = 0;
    const entry = await createFileDatabaseCatalog(databasesDir).get(DB);
    const warmed = await createWarmDatabaseActivity(deps)({ name: DB });
    // Every database file plus the manifest, which lives in the same folder.
    expect(warmed).toEqual({ name: DB, version: R1, bytes: expect.any(Number) });
    expect(warmed.bytes).toBeGreaterThanOrEqual(entry?.manifest.bytes ?? Number.POSITIVE_INFINITY);
    expect(patches).toEqual([
      { name: DB, change: { warm_state: "warming" } },
      { name: DB, change: { warm_state: "warm", warmed_version: R1, warmed_at: NOW.toISOString() } },
    ]);
  });

  it("warm-up of a database that is not prepared fails with that reason and changes no state", async () => {
    const { deps, patches } = await dependencies({ sourceUrl: server.url });
    await expect(createWarmDatabaseActivity(deps)({ name: "nosuchdb" })).rejects.toThrow(
      "database nosuchdb is not prepared",
    );
    expect(patches).toEqual([]);
  });

  it("warm-up that cannot read the release (its folder vanished after the catalog read) records failed and rethrows", async () => {
    const { deps, databasesDir, patches } = await dependencies({ sourceUrl: server.url });
    await createPrepareDatabaseActivity(deps)({ name: DB, partitions: 0 });
    patches.length = 0;
    const catalog = createFileDatabaseCatalog(databasesDir);
    const entry = await catalog.get(DB);
    if (!entry) throw new Error("the release was not prepared");
    await rm(entry.root, { recursive: true, force: true });
    const staleCatalog = { ...deps, catalog: () => ({ ...catalog, get: async () => entry }) };
    await expect(createWarmDatabaseActivity(staleCatalog)({ name: DB })).rejects.toThrow(/ENOENT/);
    expect(patches).toEqual([
      { name: DB, change: { warm_state: "warming" } },
      { name: DB, change: { warm_state: "failed" } },
    ]);
  });

  it("the update check records every prepared database's state, and an event only for one with a newer release", async () => {
    const { deps, patches, events } = await dependencies({ sourceUrl: server.url });
    await createPrepareDatabaseActivity(deps)({ name: DB, partitions: 0 });
    patches.length = 0;
    const check = createCheckDatabaseUpdatesActivity(deps);

    expect(await check()).toEqual([{ name: DB, update_available: false, latest_release: R1 }]);
    expect(patches).toEqual([
      { name: DB, change: { update_available: false, latest_release: R1, checked_at: NOW.toISOString() } },
    ]);
    expect(events).toEqual([]);

    await server.publishRelease(R2, [{ name: DB, type: "nucl", fasta: FASTA, volumes: 2 }]);
    await server.setLatest(R2);
    patches.length = 0;
    expect(await check()).toEqual([{ name: DB, update_available: true, latest_release: R2 }]);
    expect(patches).toEqual([
      { name: DB, change: { update_available: true, latest_release: R2, checked_at: NOW.toISOString() } },
    ]);
    expect(events).toEqual([
      {
        idempotency_key: `database.update_available/${DB}/${R2}`,
        source: "database.update_check",
        event_type: "database.update_available",
        correlation_id: DB,
        resource_ref: `blast_database/${DB}`,
        payload: { current_version: R1, latest_release: R2, latest_last_updated: "2025-04-01T00:00:00.000Z" },
      },
    ]);
    await server.setLatest(R1);
  });
});
