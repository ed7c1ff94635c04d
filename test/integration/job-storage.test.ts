import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip, gunzipSync } from "node:zlib";
import { TableClient, type TableServiceClientOptions } from "@azure/data-tables";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { RunningAzurite } from "../../local/azurite.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import { DatabaseNameClaims } from "../../shared/databases/name-claims.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { createParallelGzip } from "../../shared/storage/parallel-gzip.js";
import { jobRecordFixture } from "../support/helpers.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;

beforeAll(async () => {
  azurite = await testAzurite();
});

afterAll(async () => {
  await azurite?.stop();
});

type PipelinePolicy = NonNullable<TableServiceClientOptions["additionalPolicies"]>[number]["policy"];

/** Counts the requests a table client sends, so a test can tell one round trip from two. */
function requestCounter(): { policy: PipelinePolicy; count: () => number; reset: () => void } {
  let n = 0;
  return {
    policy: {
      name: "count-requests",
      sendRequest: (request, next) => {
        n++;
        return next(request);
      },
    },
    count: () => n,
    reset: () => {
      n = 0;
    },
  };
}

function jobStore(prefix: string, counter?: ReturnType<typeof requestCounter>): JobStore {
  const options = {
    allowInsecureConnection: true,
    additionalPolicies: counter ? [{ policy: counter.policy, position: "perCall" as const }] : [],
  };
  return new JobStore(
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}jobs`, options),
    TableClient.fromConnectionString(azurite.connectionString, `${prefix}idempotency`, options),
  );
}

function job(overrides: Partial<JobRecord> = {}): JobRecord {
  return jobRecordFixture(overrides);
}

describe("job state: compare-and-swap updates from a remembered version", () => {
  const counter = requestCounter();
  let mine: JobStore;
  let theirs: JobStore;

  beforeAll(async () => {
    mine = jobStore("cas", counter);
    theirs = jobStore("cas");
    await mine.init();
  });

  it("updates a job it wrote last in one round trip", async () => {
    const j = job();
    await mine.create(j);
    counter.reset();
    const updated = await mine.update(j.job_id, (x) => ({ ...x, priority: 70 }));
    expect(updated?.priority).toBe(70);
    expect(counter.count()).toBe(1);
    expect((await theirs.get(j.job_id))?.priority).toBe(70);
  });

  it("never overwrites a change made elsewhere: a stale copy is re-read and the change applied on top", async () => {
    const j = job();
    await mine.create(j);
    await theirs.update(j.job_id, (x) => ({ ...x, cancel_requested: true }));
    const updated = await mine.update(j.job_id, (x) => ({ ...x, priority: 90 }));
    expect(updated).toMatchObject({ priority: 90, cancel_requested: true });
    expect(await theirs.get(j.job_id)).toMatchObject({ priority: 90, cancel_requested: true });
  });

  it("re-checks a decision not to change against the stored job", async () => {
    const claim = (x: JobRecord) => (x.status === "queued" ? { ...x, status: "dispatching" as const } : undefined);
    // Stale says "change", stored says "leave": the claim must not happen.
    const a = job();
    await mine.create(a);
    await theirs.update(a.job_id, (x) => ({ ...x, status: "cancelled" }));
    expect((await mine.update(a.job_id, claim))?.status).toBe("cancelled");
    expect((await theirs.get(a.job_id))?.status).toBe("cancelled");
    // Stale says "leave", stored says "change": the claim must happen.
    const b = job({ status: "dispatching" });
    await mine.create(b);
    await theirs.update(b.job_id, (x) => ({ ...x, status: "queued" }));
    expect((await mine.update(b.job_id, claim))?.status).toBe("dispatching");
    expect((await theirs.get(b.job_id))?.status).toBe("dispatching");
  });

  it("answers undefined for a job deleted elsewhere, whether remembered or not", async () => {
    const j = job();
    await mine.create(j);
    await theirs.delete(j.job_id);
    expect(await mine.update(j.job_id, (x) => ({ ...x, priority: 1 }))).toBeUndefined();
    expect(await mine.update(j.job_id, (x) => ({ ...x, priority: 1 }))).toBeUndefined();
    expect(await theirs.get(j.job_id)).toBeUndefined();
  });

  it("runs one process's concurrent updates of a job in turn: none is lost, none conflicts", async () => {
    const shards = Array.from({ length: 30 }, (_, i) => ({
      id: `b0-p${i + 1}`,
      batch: 0,
      partition: i + 1,
      state: "running" as const,
      attempts: 1,
      output_bytes: 0,
    }));
    const j = job({ shards });
    await mine.create(j);
    counter.reset();
    await Promise.all(
      j.shards.map((s, i) =>
        mine.update(j.job_id, (x) => ({
          ...x,
          shards: x.shards.map((t) => (t.id === s.id ? { ...t, state: "succeeded" as const, output_bytes: i + 1 } : t)),
        })),
      ),
    );
    // One write each: more updates at once than the conflict retries allow would otherwise fail.
    expect(counter.count()).toBe(30);
    const stored = await theirs.get(j.job_id);
    expect(stored?.shards.map((s) => [s.state, s.output_bytes])).toEqual(j.shards.map((_, i) => ["succeeded", i + 1]));
  });

  it("tells a watcher of each write with the record written, and of a delete with undefined", async () => {
    const j = job();
    const seen: (JobRecord | undefined)[] = [];
    const stop = mine.onChange(j.job_id, (record) => seen.push(record));
    await mine.create(j);
    await mine.update(j.job_id, (x) => ({ ...x, status: "dispatching" }));
    await mine.update(j.job_id, (x) => ({ ...x, priority: 80 }));
    await mine.delete(j.job_id);
    stop();
    await mine.create(j);
    expect(seen.map((r) => r && [r.status, r.priority])).toEqual([
      ["queued", j.priority],
      ["dispatching", j.priority],
      ["dispatching", 80],
      undefined,
    ]);
  });
});

describe("streamed artifact uploads", () => {
  let store: ArtifactStore;
  let container: ContainerClient;

  beforeAll(async () => {
    container = new ContainerClient(azurite.connectionString, "artifacts-test");
    store = new ArtifactStore(container);
    await store.init();
  });

  const committedBlocks = async (jobId: string, name: string) =>
    (await container.getBlockBlobClient(`${jobId}/${name}`).getBlockList("committed")).committedBlocks?.length ?? 0;
  const download = async (jobId: string, name: string) =>
    (await container.getBlockBlobClient(`${jobId}/${name}`).downloadToBuffer()).subarray();

  it("sends a small stream in one Put Blob and returns its size", async () => {
    const data = Buffer.from("<BlastOutput>small</BlastOutput>\n".repeat(1000));
    const bytes = await store.uploadStream(
      "job1",
      "merged_results.out.gz",
      Readable.from([data.subarray(0, 5000), data.subarray(5000)]),
    );
    // Put Blob leaves no blocks behind; staged uploads leave committed blocks.
    expect(await committedBlocks("job1", "merged_results.out.gz")).toBe(0);
    expect(bytes).toBe(data.length);
    expect((await download("job1", "merged_results.out.gz")).equals(data)).toBe(true);
  });

  it("stages a stream beyond 8 MiB in blocks, commits them in order, and returns its size", async () => {
    const block = randomBytes(1024 * 1024);
    const chunks = Array.from({ length: 41 }, (_, i) => Buffer.concat([Buffer.from([i]), block.subarray(1)]));
    const bytes = await store.uploadStream("job2", "shards/b0-p1.out.gz", Readable.from(chunks));
    expect(bytes).toBe(41 * 1024 * 1024);
    const blob = await download("job2", "shards/b0-p1.out.gz");
    expect(blob.length).toBe(bytes);
    for (let i = 0; i < 41; i++) expect(blob[i * 1024 * 1024]).toBe(i);
    expect(await committedBlocks("job2", "shards/b0-p1.out.gz")).toBe(6);
  });

  it("gzips through a parallel gzip into one valid gzip file, also for empty input", async () => {
    const text = Array.from(
      { length: 60_000 },
      (_, i) => `<Hit><Hit_num>${i}</Hit_num><Hit_id>gnl|x|${i * 7919}</Hit_id></Hit>\n`,
    ).join("");
    const bytes = await store.uploadStream("job3", "merged_results.out.gz", Readable.from([Buffer.from(text)]), {
      through: createParallelGzip({ memberBytes: 256 * 1024 }),
    });
    const gz = await download("job3", "merged_results.out.gz");
    expect(bytes).toBe(gz.length);
    expect(gunzipSync(gz).toString()).toBe(text);
    // The same bytes through a streaming gunzip, as the results route reads them.
    const parts: Buffer[] = [];
    await pipeline(Readable.from([gz]), createGunzip(), async (source: AsyncIterable<Buffer>) => {
      for await (const c of source) parts.push(c);
    });
    expect(Buffer.concat(parts).toString()).toBe(text);

    await store.uploadStream("job3", "shards/b0-p2.out.gz", Readable.from([]), { through: createParallelGzip() });
    expect(gunzipSync(await download("job3", "shards/b0-p2.out.gz")).length).toBe(0);
  });

  it("fails without leaving a blob when the source fails midway, before or after blocks were staged", async () => {
    for (const [name, before] of [
      ["merged_results.out.gz", 1024],
      ["shards/b0-p1.out.gz", 20 * 1024 * 1024],
    ] as const) {
      async function* failing() {
        for (let sent = 0; sent < before; sent += 1024 * 1024) yield randomBytes(Math.min(1024 * 1024, before));
        throw new Error("disk read failed");
      }
      await expect(store.uploadStream("job4", name, Readable.from(failing()))).rejects.toThrow("disk read failed");
      expect(await store.exists("job4", name)).toBe(false);
    }
  });

  it("stops at once, source included, and leaves no blob when its signal aborts", async () => {
    const controller = new AbortController();
    let produced = 0;
    let flowing: () => void = () => {};
    const uploading = new Promise<void>((resolve) => {
      flowing = resolve;
    });
    const endless = new Readable({
      read() {
        produced++;
        // Well past the stream buffers: the upload is consuming the source.
        if (produced === 16) flowing();
        this.push(randomBytes(256 * 1024));
      },
    });
    const upload = store.uploadStream("job6", "merged_results.out.gz", endless, {
      through: createParallelGzip(),
      signal: controller.signal,
    });
    await uploading;
    controller.abort(new Error("job cancelled"));
    await expect(upload).rejects.toThrow("job cancelled");
    expect(endless.destroyed).toBe(true);
    const at = produced;
    // Once the source has closed, nothing can read from it again.
    if (!endless.closed) await once(endless, "close");
    expect(produced).toBe(at);
    expect(await store.exists("job6", "merged_results.out.gz")).toBe(false);
    await expect(
      store.uploadStream("job6", "merged_results.out.gz", Readable.from([]), { signal: controller.signal }),
    ).rejects.toThrow("job cancelled");
  });

  it("fails, and stops the writer instead of leaving it waiting, when storage refuses the upload", async () => {
    const missing = new ArtifactStore(new ContainerClient(azurite.connectionString, "no-such-container"));
    let produced = 0;
    const source = new Readable({
      read() {
        produced++;
        this.push(produced > 100_000 ? null : randomBytes(64 * 1024));
      },
    });
    await expect(missing.uploadStream("job5", "merged_results.out.gz", source)).rejects.toMatchObject({
      statusCode: 404,
    });
    expect(source.destroyed).toBe(true);
    expect(produced).toBeLessThan(100_000);
  });
});

describe("database state: writers of different fields at the same time", () => {
  it("B-006 B-017 keeps the warm-up's and the update check's fields when both write the same database at once", async () => {
    const store = new DatabaseStateStore(
      TableClient.fromConnectionString(azurite.connectionString, "dbstaterace", { allowInsecureConnection: true }),
    );
    for (let round = 0; round < 10; round++) {
      const name = `db${round}`;
      // Both start from a missing row (create races create), then from an existing one (update races update).
      await Promise.all([
        store.patch(name, { warm_state: "warming" }),
        store.patch(name, { checked_at: `2026-01-01T00:00:0${round}Z` }),
      ]);
      await Promise.all([
        store.patch(name, { warm_state: "warm", warmed_version: "v2", warmed_at: "2026-01-02T00:00:00Z" }),
        store.patch(name, { update_available: true, latest_release: "v3" }),
        store.patch(name, { checked_at: "2026-01-03T00:00:00Z" }),
      ]);
      expect(await store.get(name)).toEqual({
        name,
        warm_state: "warm",
        warmed_version: "v2",
        warmed_at: "2026-01-02T00:00:00Z",
        update_available: true,
        latest_release: "v3",
        checked_at: "2026-01-03T00:00:00Z",
      });
    }
  });
});

describe("database name claims (issue 23): a write retried after its response was lost", () => {
  it("an insert retried by the SDK (409 on its own row) is the caller's claim, not another upload's; another upload is still refused", async () => {
    const claims = new DatabaseNameClaims(prefixedTables(azurite.connectionString, `nc${Date.now().toString(36)}`));
    const owner = { operation_id: "op-mine", upload: "op-mine.fa" };
    const first = await claims.claim("db16s", owner);
    expect("claim" in first).toBe(true);
    // The retry of the same insert, as the SDK sends it when the first answer was lost.
    const retried = await claims.claim("db16s", owner);
    expect("claim" in retried && retried.claim.record).toMatchObject(owner);
    const other = await claims.claim("db16s", { operation_id: "op-other", upload: "op-other.fa" });
    expect("held" in other && other.held).toMatchObject(owner);
  });

  it("a touch after an earlier touch of the same claim changed its etag still holds it; a claim taken over or removed does not", async () => {
    const claims = new DatabaseNameClaims(prefixedTables(azurite.connectionString, `nt${Date.now().toString(36)}`));
    const owner = { operation_id: "op-mine", upload: "op-mine.fa" };
    const made = await claims.claim("db16s", owner);
    if (!("claim" in made)) throw new Error("not claimed");
    // A second handle on the claim with the first etag stands for a touch whose answer was lost.
    const retried = await claims.claim("db16s", owner);
    if (!("claim" in retried)) throw new Error("not claimed");
    expect(await made.claim.touch()).toBe(true);
    expect(await retried.claim.touch()).toBe(true);
    expect(await made.claim.touch()).toBe(true);
    // Removed (swept) and taken by another upload: no longer ours.
    await claims.releaseUpload("db16s", owner.upload);
    expect("claim" in (await claims.claim("db16s", { operation_id: "op-next", upload: "op-next.fa" }))).toBe(true);
    expect(await made.claim.touch()).toBe(false);
  });
});
