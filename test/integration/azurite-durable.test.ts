import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { BlobServiceClient } from "@azure/storage-blob";
import { afterAll, describe, expect, it } from "vitest";
import { AZURITE_DURABLE_PRELOAD, type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { createLogger } from "../../shared/logging/logger.js";
import { alive } from "../support/processes.js";
import { testAzuriteStartMs } from "../support/service-fakes.js";

const root = path.resolve(import.meta.dirname, "../..");
const started: RunningAzurite[] = [];
const folders: string[] = [];

afterAll(async () => {
  for (const a of started) await a.stop();
  for (const f of folders) rmSync(f, { recursive: true, force: true });
});

async function persistentAzurite(location: string, compactBytes?: number): Promise<RunningAzurite> {
  // The Azurite child inherits this process's environment.
  if (compactBytes === undefined) delete process.env.BLASTPLANE_AZURITE_COMPACT_BYTES;
  else process.env.BLASTPLANE_AZURITE_COMPACT_BYTES = String(compactBytes);
  const azurite = await startAzurite({
    location,
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger: createLogger({ level: "error" }),
    watchdogPath: path.join(root, "local/parent-watchdog.cjs"),
    startTimeoutMs: testAzuriteStartMs(),
  });
  started.push(azurite);
  return azurite;
}

/** A power cut for Azurite: SIGKILL, so no shutdown code (and no LokiJS close-time save) runs. */
async function cutPower(azurite: RunningAzurite): Promise<void> {
  const pid = azurite.pid as number;
  process.kill(pid, "SIGKILL");
  while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
}

describe("Azurite persists every acknowledged write before acknowledging it (issue 15 item 1)", () => {
  it("table rows, blobs (small, block-staged and multi-extent) and their metadata survive SIGKILL right after the acknowledgement", async () => {
    const location = mkdtempSync(path.join(tmpdir(), "bp-azurite-durable-"));
    folders.push(location);
    const first = await persistentAzurite(location);
    const options = { allowInsecureConnection: true };
    const table = TableClient.fromConnectionString(first.connectionString, "durablerows", options);
    await table.createTable();
    const container = BlobServiceClient.fromConnectionString(first.connectionString).getContainerClient("durable");
    await container.create();

    // A burst of concurrent writes (saves coalesce), then a blob of several extents' worth of
    // blocks, then the cut as soon as the last acknowledgement arrives.
    const rows = Array.from({ length: 40 }, (_, i) => ({ partitionKey: "p", rowKey: `r${i}`, value: `v${i}` }));
    await Promise.all(rows.map((row) => table.createEntity(row)));
    const small = randomBytes(1000);
    await container.getBlockBlobClient("small.bin").uploadData(small);
    const large = randomBytes(9 * 1024 * 1024);
    await container.getBlockBlobClient("large.bin").uploadData(large, { blockSize: 4 * 1024 * 1024, concurrency: 3 });
    await table.updateEntity({ partitionKey: "p", rowKey: "r0", value: "changed" }, "Merge");
    await table.deleteEntity("p", "r1");
    await cutPower(first);

    const second = await persistentAzurite(location);
    const table2 = TableClient.fromConnectionString(second.connectionString, "durablerows", options);
    const container2 = BlobServiceClient.fromConnectionString(second.connectionString).getContainerClient("durable");
    const found = new Map<string, string>();
    for await (const e of table2.listEntities<{ value: string }>()) found.set(e.rowKey as string, e.value);
    expect(found.size).toBe(39);
    expect(found.get("r0")).toBe("changed");
    expect(found.has("r1")).toBe(false);
    expect(found.get("r39")).toBe("v39");
    expect(Buffer.compare(await container2.getBlockBlobClient("small.bin").downloadToBuffer(), small)).toBe(0);
    expect(Buffer.compare(await container2.getBlockBlobClient("large.bin").downloadToBuffer(), large)).toBe(0);
  }, 90_000);

  it("issue 24: acknowledged writes survive a cut across journal compactions, and a torn commit at the journal's end is ignored", async () => {
    const location = mkdtempSync(path.join(tmpdir(), "bp-azurite-journal-"));
    folders.push(location);
    const journals = () => readdirSync(location).filter((f) => f.startsWith("__blastplane_journal__."));
    // Compaction after every 4 KB of journal: these writes span many generations.
    const first = await persistentAzurite(location, 4096);
    const options = { allowInsecureConnection: true };
    const table = TableClient.fromConnectionString(first.connectionString, "journaled", options);
    await table.createTable();
    for (let batch = 0; batch < 6; batch++) {
      await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          table.createEntity({ partitionKey: "p", rowKey: `r${batch * 10 + i}`, value: "x".repeat(200) }),
        ),
      );
    }
    await table.updateEntity({ partitionKey: "p", rowKey: "r5", value: "changed" }, "Merge");
    await table.deleteEntity("p", "r6");
    // Compaction deleted the generations it covered: not one file per commit is left behind.
    expect(journals().length).toBeLessThan(6);
    await cutPower(first);

    // A cut in the middle of an append: half a frame (a header promising more bytes than follow), at
    // the end of the newest generation — or of the next one, when the last compaction had covered
    // every commit and deleted its generations (then no journal file is left).
    const generations = journals().map((f) => Number(f.slice(f.lastIndexOf(".") + 1)));
    const newest = generations.length > 0 ? Math.max(...generations) : 1;
    const last = `__blastplane_journal__.${String(newest).padStart(12, "0")}`;
    const torn = Buffer.alloc(20);
    torn.writeUInt32LE(5000, 0);
    appendFileSync(path.join(location, last), torn);

    const second = await persistentAzurite(location);
    const table2 = TableClient.fromConnectionString(second.connectionString, "journaled", options);
    const found = new Map<string, string>();
    for await (const e of table2.listEntities<{ value: string }>()) found.set(e.rowKey as string, e.value);
    expect(found.size).toBe(59);
    expect(found.get("r5")).toBe("changed");
    expect(found.has("r6")).toBe(false);
    expect(found.get("r59")).toBe("x".repeat(200));
    // And it goes on journaling after the torn tail, in a generation of its own.
    await table2.createEntity({ partitionKey: "p", rowKey: "after", value: "y" });
    await cutPower(second);
    const third = await persistentAzurite(location);
    const table3 = TableClient.fromConnectionString(third.connectionString, "journaled", options);
    expect((await table3.getEntity<{ value: string }>("p", "after")).value).toBe("y");
    expect((await table3.getEntity<{ value: string }>("p", "r5")).value).toBe("changed");
  }, 120_000);

  it("refuses to start, naming both versions, when the installed Azurite is not the one the patch was written for", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-azurite-version-"));
    folders.push(dir);
    mkdirSync(path.join(dir, "node_modules/azurite"), { recursive: true });
    writeFileSync(
      path.join(dir, "node_modules/azurite/package.json"),
      JSON.stringify({ name: "azurite", version: "3.99.0" }),
    );
    mkdirSync(path.join(dir, "node_modules/lokijs/src"), { recursive: true });
    writeFileSync(
      path.join(dir, "node_modules/lokijs/package.json"),
      JSON.stringify({ name: "lokijs", version: "1.5.12", main: "src/lokijs.js" }),
    );
    writeFileSync(path.join(dir, "node_modules/lokijs/src/lokijs.js"), "module.exports = function Loki() {};");
    copyFileSync(AZURITE_DURABLE_PRELOAD, path.join(dir, "preload.cjs"));
    const run = spawnSync(
      process.execPath,
      ["--require", path.join(dir, "preload.cjs"), "-e", "console.log('azurite would start')"],
      { encoding: "utf8" },
    );
    expect(run.status).not.toBe(0);
    expect(run.stdout).not.toContain("azurite would start");
    expect(run.stderr).toContain("written for azurite 3.37.0 with lokijs 1.5.12");
    expect(run.stderr).toContain("azurite 3.99.0 with lokijs 1.5.12 is installed");
  });
});
