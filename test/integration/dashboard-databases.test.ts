import http from "node:http";
import { TableClient } from "@azure/data-tables";
import { ContainerClient, StorageSharedKeyCredential } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import { DatabaseNameClaims, sweepStaleClaims } from "../../shared/databases/name-claims.js";
import { createDatabaseUploadStore } from "../../shared/databases/upload-store.js";
import { createLogger } from "../../shared/logging/logger.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

const DB = "ref_16s";
const R1 = "2026-01-01-00-00-00";
const R2 = "2026-02-01-00-00-00";
const R3 = "2026-03-01-00-00-00";
/** A small upload limit, so a 413 costs little. */
const UPLOAD_MAX_BYTES = 64 * 1024;

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
  stack = await startStack({
    env: {
      DATABASE_SOURCE_URL: server.url,
      SVC_DB_UPDATE_CHECK_SCHEDULE: "*/2 * * * * *",
      DATABASE_UPLOAD_MAX_BYTES: String(UPLOAD_MAX_BYTES),
      // The sweep of abandoned uploads runs every two seconds here (ten minutes by default).
      SVC_DB_UPLOAD_SWEEP_SCHEDULE: "*/2 * * * * *",
    },
  });
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

/**
 * Sends a nucleotide FASTA of up to `maxBytes` with chunked framing, as fast as the server reads,
 * stopping once the answer arrives (as `hostile-bodies.test.ts` does for JSON bodies).
 */
function chunkedFasta(
  url: string,
  maxBytes: number,
): Promise<{ status: number; body: string; sentWhenAnswered: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "text/plain", "Transfer-Encoding": "chunked" },
    });
    let sent = 0;
    let answered = false;
    const line = `${"ACGT".repeat(20)}\n`;
    const chunk = Buffer.from(line.repeat(Math.floor((256 * 1024) / line.length)));
    req.on("response", (res) => {
      answered = true;
      const sentWhenAnswered = sent;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body, sentWhenAnswered });
      });
    });
    req.on("error", (error) => {
      if (!answered) reject(error);
    });
    const pump = (): void => {
      while (!answered && sent < maxBytes) {
        const data = sent === 0 ? Buffer.concat([Buffer.from(">big\n"), chunk]) : chunk;
        sent += data.length;
        if (!req.write(data)) {
          req.once("drain", pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    pump();
  });
}

describe("dashboard databases: adding one from an uploaded FASTA (issue 23, item 5)", () => {
  const upload = (query: Record<string, string>, body: BodyInit | null) =>
    fetch(`${stack.info.functions_url}/api/databases/uploads?${new URLSearchParams(query)}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "text/plain" },
      body,
    });
  /** Committed blobs left in the upload container (uncommitted blocks are not blobs). */
  const storedUploads = async () => {
    const container = new ContainerClient(
      `${stack.info.blob_endpoint}/database-uploads`,
      new StorageSharedKeyCredential(DEV_ACCOUNT, DEV_ACCOUNT_KEY),
    );
    const names: string[] = [];
    if (!(await container.exists())) return names;
    for await (const blob of container.listBlobsFlat()) names.push(blob.name);
    return names;
  };
  const follow = (operationId: string) =>
    eventually(
      async () => {
        const o = (await (await call("GET", `/operations/${operationId}`)).json()) as Record<string, unknown>;
        return ["succeeded", "failed", "cancelled"].includes(String(o.state)) ? o : undefined;
      },
      60_000,
      200,
    );

  it("B-023 B-022 the FASTA streams through the API into a database built as an operation, listed and searchable, with no storage URL in any answer", async () => {
    const fasta = release(12, 60);
    const res = await upload({ name: "uploaded_16s", type: "nucl", partitions: "2" }, fasta);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toMatch(/sig=|se=|blob\.core|127\.0\.0\.1:\d+\/devstoreaccount/);
    const body = JSON.parse(text) as {
      operation: { operation_id: string; operation_type: string; state: string };
      upload: Record<string, unknown>;
      meta: { request_id: string };
    };
    expect(body.operation).toMatchObject({ operation_type: "database.add", state: "queued" });
    expect(body.upload).toMatchObject({ bytes: Buffer.byteLength(fasta), sequences: 12, detected_type: "nucl" });
    expect(body.meta.request_id).toEqual(expect.any(String));

    // The build reports its steps while it runs (from the name's claim) and when it ends (issue 23).
    const seen: { state: string; progress?: { steps?: { name: string; state: string; at?: string }[] } }[] = [];
    const op = await eventually(
      async () => {
        const o = (await (await call("GET", `/operations/${body.operation.operation_id}`)).json()) as Record<
          string,
          unknown
        >;
        seen.push(o as (typeof seen)[number]);
        return ["succeeded", "failed", "cancelled"].includes(String(o.state)) ? o : undefined;
      },
      60_000,
      100,
    );
    expect(op).toMatchObject({ state: "succeeded", target: { resource_type: "blast_database", name: "uploaded_16s" } });
    const steps = (op.progress as { steps: { name: string; state: string; at?: string }[] }).steps;
    expect(steps.map((s) => [s.name, s.state])).toEqual([
      ["upload_checked", "succeeded"],
      ["makeblastdb", "succeeded"],
      ["partitions", "succeeded"],
      ["published", "succeeded"],
    ]);
    const times = steps.map((s) => Date.parse(String(s.at)));
    expect(times.every(Number.isFinite)).toBe(true);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Every unfinished view had the steps too, the upload already checked.
    for (const view of seen.filter((v) => v.state === "queued" || v.state === "running"))
      expect(view.progress?.steps?.[0]).toMatchObject({ name: "upload_checked", state: "succeeded" });
    expect(await database("uploaded_16s")).toMatchObject({ sequences: 12, partitions: 2, warm_state: "cold" });
    // The upload was removed once built.
    expect(await storedUploads()).toEqual([]);
    // Adding a database is a privileged act: audited with its operation.
    const audit = createAuditLog(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
    );
    expect(await audit.list({ action: "database.add", limit: 10 })).toEqual([
      expect.objectContaining({
        target: "blast_database/uploaded_16s",
        outcome: "succeeded",
        details: { operation_id: body.operation.operation_id },
      }),
    ]);

    // Searchable at once, sharded over its two partitions: the first query finds itself.
    const api = jobApi(stack, readApiToken(stack));
    const job = await api.submit({
      program: "blastn",
      db: "uploaded_16s",
      query_fasta: release(1, 60),
      execution_profile: "sharded",
    });
    expect((await api.finished(job.job_id)).status).toBe("completed");

    // The same name again is a conflict, not a second release.
    const again = await upload({ name: "uploaded_16s", type: "nucl" }, fasta);
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      detail: expect.stringContaining("exists already"),
      request_id: expect.any(String),
    });
  }, 120_000);

  it("B-125 B-126 refuses bad files and bad fields with 422 naming them, a file past the limit with 413 (declared or streamed), and leaves nothing stored or registered", async () => {
    const ok = release(2, 0);
    const cases: [string, Record<string, string>, BodyInit | null, number, unknown[] | null][] = [
      ["not FASTA", { name: "bad_text", type: "nucl" }, "just some words\n", 422, ["body"]],
      ["empty", { name: "bad_empty", type: "nucl" }, "", 422, ["body"]],
      [
        "binary",
        { name: "bad_binary", type: "nucl" },
        new Uint8Array([0x3e, 0x61, 0x0a, 0, 0xff, 0x10]),
        422,
        ["body"],
      ],
      ["gzip", { name: "bad_gzip", type: "nucl" }, new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0]), 422, ["body"]],
      ["protein as nucleotide", { name: "bad_type", type: "nucl" }, ">p\nMKTAYIAKQRQISFVKSHFSRQLEE\n", 422, ["body"]],
      ["path in the name", { name: "../etc", type: "nucl" }, ok, 422, ["query", "name"]],
      ["slash in the name", { name: "a/b", type: "nucl" }, ok, 422, ["query", "name"]],
      ["backslash in the name", { name: "a\\b", type: "nucl" }, ok, 422, ["query", "name"]],
      ["no name", { type: "nucl" }, ok, 422, ["query", "name"]],
      ["unknown type", { name: "bad_kind", type: "dna" }, ok, 422, ["query", "type"]],
      [
        "partitions out of range",
        { name: "bad_parts", type: "nucl", partitions: "65" },
        ok,
        422,
        ["query", "partitions"],
      ],
      [
        "more partitions than sequences",
        { name: "bad_split", type: "nucl", partitions: "3" },
        ok,
        422,
        ["query", "partitions"],
      ],
      [
        "too large, declared",
        { name: "bad_big", type: "nucl" },
        `>big\n${"ACGT".repeat(UPLOAD_MAX_BYTES / 4)}\n`,
        413,
        null,
      ],
    ];
    for (const [name, query, body, status, loc] of cases) {
      const res = await upload(query, body);
      expect(res.status, name).toBe(status);
      const answer = (await res.json()) as { detail: unknown; request_id: string };
      expect(answer.request_id, name).toEqual(expect.any(String));
      if (loc === null) {
        expect(answer.detail, name).toEqual(expect.stringContaining("upload limit"));
        continue;
      }
      expect(answer.detail, name).toEqual([{ loc, msg: expect.any(String), type: expect.any(String) }]);
    }
    // A chunked upload (no Content-Length) is counted as it streams: 413 once past the limit,
    // answered while the client is still sending (the body is never held whole).
    const streamed = await chunkedFasta(
      `${stack.info.functions_url}/api/databases/uploads?name=bad_streamed&type=nucl`,
      64 * 1024 * 1024,
    );
    expect(streamed.status).toBe(413);
    expect((JSON.parse(streamed.body) as { detail: string }).detail).toContain("upload limit");
    expect(streamed.sentWhenAnswered).toBeLessThan(16 * 1024 * 1024);

    const listed = ((await (await call("GET", "/databases")).json()) as { databases: { name: string }[] }).databases;
    expect(listed.map((d) => d.name).filter((n) => n.startsWith("bad_"))).toEqual([]);
    expect(await storedUploads()).toEqual([]);
  });

  it("a build that fails (duplicate ids in a partitioned database) is a failed operation with the reason, and nothing is registered", async () => {
    const dup = ">dup one\nACGTACGTACGTAAACCCGGGTTT\n>dup two\nTTTGGGCCCAAACGTACGTACGT\n";
    const res = await upload({ name: "dup_ids", type: "nucl", partitions: "2" }, dup);
    expect(res.status).toBe(200);
    const { operation } = (await res.json()) as { operation: { operation_id: string } };
    const op = await follow(operation.operation_id);
    expect(op.state).toBe("failed");
    expect(String((op.error as { detail: string }).detail)).toContain("unique FASTA ids");
    // The step that failed says so, with the reason; the ones after it never ran.
    expect((op.progress as { steps: unknown[] }).steps).toEqual([
      expect.objectContaining({ name: "upload_checked", state: "succeeded" }),
      expect.objectContaining({
        name: "makeblastdb",
        state: "failed",
        error: expect.stringContaining("unique FASTA ids"),
      }),
      expect.objectContaining({ name: "partitions", state: "pending" }),
      expect.objectContaining({ name: "published", state: "pending" }),
    ]);
    expect(await database("dup_ids")).toBeUndefined();
    expect(await storedUploads()).toEqual([]);
  });

  const tableConnection = () =>
    `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;

  it("B-023 of ten simultaneous uploads of one name exactly one becomes the database; the others are refused with 409 and nothing of theirs stays", async () => {
    const fasta = release(4, 80);
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => upload({ name: "raced_16s", type: "nucl" }, fasta)),
    );
    const bodies = await Promise.all(answers.map(async (res) => ({ status: res.status, body: await res.json() })));
    const won = bodies.filter((a) => a.status === 200);
    const refused = bodies.filter((a) => a.status !== 200);
    expect(won).toHaveLength(1);
    expect(refused).toHaveLength(9);
    for (const { status, body } of refused) {
      expect(status).toBe(409);
      // Refused while the winner builds, or (on a slow machine) after it published.
      expect(body).toEqual({
        detail: expect.stringMatching(/is being added|exists already/),
        request_id: expect.any(String),
      });
    }
    const [winner] = won as { body: { operation: { operation_id: string } } }[];
    const op = await follow(String(winner?.body.operation.operation_id));
    expect(op.state).toBe("succeeded");
    expect(await database("raced_16s")).toMatchObject({ sequences: 4 });
    // One release published, not ten.
    const catalog = TableClient.fromConnectionString(tableConnection(), "databasecatalog", {
      allowInsecureConnection: true,
    });
    const releases: string[] = [];
    for await (const row of catalog.listEntities({ queryOptions: { filter: "PartitionKey eq 'release-raced_16s'" } }))
      releases.push(String(row.rowKey));
    expect(releases).toHaveLength(1);
    // The losers stored nothing, and the build let the name's claim go.
    expect(await storedUploads()).toEqual([]);
    const claims = TableClient.fromConnectionString(tableConnection(), "databaseclaims", {
      allowInsecureConnection: true,
    });
    await expect(claims.getEntity("claim", "raced_16s")).rejects.toMatchObject({ statusCode: 404 });
  }, 120_000);

  it("an upload a crash left before its build started is collected, and its name is free again; a live upload's claim is kept", async () => {
    const claims = TableClient.fromConnectionString(tableConnection(), "databaseclaims", {
      allowInsecureConnection: true,
    });
    await claims.createTable();
    const container = new ContainerClient(
      `${stack.info.blob_endpoint}/database-uploads`,
      new StorageSharedKeyCredential(DEV_ACCOUNT, DEV_ACCOUNT_KEY),
    );
    await container.createIfNotExists();
    // What the upload route leaves when its process dies after storing the file, before starting the build:
    // the name's claim (last touched an hour ago) and the stored FASTA; no orchestration.
    const crashedOp = `op-${"c".repeat(32)}`;
    const anHourAgo = new Date(Date.now() - 3600_000).toISOString();
    await claims.createEntity({
      partitionKey: "claim",
      rowKey: "crashed_16s",
      operation_id: crashedOp,
      upload: `${crashedOp}.fa`,
      claimed_at: anHourAgo,
      touched_at: anHourAgo,
    });
    const fasta = release(3, 90);
    await container.getBlockBlobClient(`${crashedOp}.fa`).upload(fasta, Buffer.byteLength(fasta));
    // An upload still streaming (touched just now; its build not started yet) holds its name.
    const liveOp = `op-${"d".repeat(32)}`;
    const now = new Date().toISOString();
    await claims.createEntity({
      partitionKey: "claim",
      rowKey: "streaming_16s",
      operation_id: liveOp,
      upload: `${liveOp}.fa`,
      claimed_at: now,
      touched_at: now,
    });

    await eventually(async () => ((await storedUploads()).length === 0 ? true : undefined), 60_000, 250);
    await expect(claims.getEntity("claim", "crashed_16s")).rejects.toMatchObject({ statusCode: 404 });
    expect(await claims.getEntity("claim", "streaming_16s")).toMatchObject({ operation_id: liveOp });

    const busy = await upload({ name: "streaming_16s", type: "nucl" }, fasta);
    expect(busy.status).toBe(409);
    expect(await busy.json()).toEqual({
      detail: expect.stringContaining(`is being added by another upload (operation ${liveOp})`),
      request_id: expect.any(String),
    });
    await claims.deleteEntity("claim", "streaming_16s");

    const again = await upload({ name: "crashed_16s", type: "nucl" }, fasta);
    expect(again.status).toBe(200);
    const { operation } = (await again.json()) as { operation: { operation_id: string } };
    expect((await follow(operation.operation_id)).state).toBe("succeeded");
    expect(await database("crashed_16s")).toMatchObject({ sequences: 3 });

    // A stored upload no claim records (its claim went, its removal did not) is removed once it is
    // older than the claims' staleness; a fresh one stays (its claim may be on its way).
    const storage = `${tableConnection()}BlobEndpoint=${stack.info.blob_endpoint};`;
    const orphan = `op-${"e".repeat(32)}.fa`;
    await container.getBlockBlobClient(orphan).upload(fasta, Buffer.byteLength(fasta));
    const sweep = (minutesLater: number) =>
      sweepStaleClaims({
        claims: new DatabaseNameClaims(storage),
        uploads: createDatabaseUploadStore(storage),
        // No claim is left to ask about: the task hub is not consulted.
        orchestrations: {
          getInstance: () => Promise.reject(new Error("no claim should be looked up")),
        },
        logger: createLogger({ write: () => undefined }),
        now: () => new Date(Date.now() + minutesLater * 60_000),
      });
    expect(await sweep(0)).toEqual({ claims: 0, uploads: 0 });
    expect(await storedUploads()).toEqual([orphan]);
    expect(await sweep(11)).toEqual({ claims: 0, uploads: 1 });
    expect(await storedUploads()).toEqual([]);
  }, 120_000);

  it("a Reader may not upload (403 before any byte is read)", async () => {
    const reader = await mintToken(stack, "Reader");
    const res = await fetch(`${stack.info.functions_url}/api/databases/uploads?name=readers_db&type=nucl`, {
      method: "POST",
      headers: { Authorization: `Bearer ${reader}`, "Content-Type": "text/plain" },
      body: release(1),
    });
    expect(res.status).toBe(403);
    const adding = (await (await call("GET", "/databases/adding")).json()) as Record<string, unknown>;
    expect(adding).toMatchObject({
      prepare: { available: true, reason: null },
      upload: { available: true, max_bytes: UPLOAD_MAX_BYTES },
      node: { memory_bytes: expect.any(Number), usable_bytes: expect.any(Number) },
    });
  });
});
