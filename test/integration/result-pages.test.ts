import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJobApiApp } from "../../jobapi/app.js";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { createLocalExecutor } from "../../jobapi/executors/local-executor.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobDispatcher } from "../../jobapi/jobs/dispatcher.js";
import { JobService } from "../../jobapi/jobs/job-service.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import { statusView } from "../../jobapi/routes/job-views.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY, type RunningAzurite } from "../../local/azurite.js";
import { blastVersion } from "../../shared/blast/blast-tools.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { hitDetailSchema, hitPageSchema, queryPageSchema } from "../../shared/jobs/result-page-schemas.js";
import { createLogger } from "../../shared/logging/logger.js";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";
import { type CountingProxy, startCountingProxy } from "../support/counting-proxy.js";
import { eventually } from "../support/local-stack.js";
import { demoQueries } from "../support/jobapi-client.js";
import { startTestAzurite } from "../support/service-fakes.js";

/*
 * Issue 23 item 2 through the real job API: real BLAST+ searches, Azurite behind a proxy that
 * counts the bytes every storage request returned, so "the page of the last query reads only its
 * range" is asserted on bytes, not on time.
 */
const logger = createLogger({ level: "error" });
const QUERIES = 40;
let azurite: RunningAzurite;
let proxy: CountingProxy;
let dir: string;
let app: ReturnType<typeof createJobApiApp>;
let dispatcher: JobDispatcher;
let token: string;
let deps: Parameters<typeof createJobApiApp>[0];
const jobIds: Record<"single" | "sharded", string> = { single: "", sharded: "" };
/** Every record the dispatcher wrote during a job's storing phase (issue 23 storing progress). */
const storingWrites: Record<string, JobRecord[]> = {};

/** A query no 16S sequence matches (a fixed pseudo-random sequence), with an awkward definition line. */
function unmatchedQuery(): string {
  let x = 7;
  let seq = "";
  for (let i = 0; i < 300; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    seq += "ACGT"[x % 4];
  }
  return `>odd_q <no & match> "quoted" 'x'\n${seq}\n`;
}

/** 40 demo 16S queries with the unmatched one in the middle. */
function queries(): string {
  const records = demoQueries(QUERIES - 1, 1500).split(/(?=^>)/m);
  return [...records.slice(0, 10), unmatchedQuery(), ...records.slice(10)].join("");
}

function call(p: string): Promise<Response> {
  return Promise.resolve(app.request(p, { headers: { "X-SVC-API-Token": token } }));
}

async function submit(profile: "standard" | "sharded"): Promise<string> {
  const res = await Promise.resolve(
    app.request("/v1/jobs", {
      method: "POST",
      headers: { "X-SVC-API-Token": token, "Content-Type": "application/json" },
      body: JSON.stringify({
        program: "blastn",
        db: "pagesdemo",
        query_fasta: queries(),
        blast_options: { evalue: 1e-5, max_target_seqs: 50 },
        execution_profile: profile,
      }),
    }),
  );
  const body = (await res.json()) as { job_id: string };
  expect(res.status, JSON.stringify(body)).toBe(202);
  return body.job_id;
}

beforeAll(async () => {
  azurite = await startTestAzurite();
  proxy = await startCountingProxy(new URL(azurite.blobEndpoint).origin);
  dir = mkdtempSync(path.join(os.tmpdir(), "bp-pages-"));
  const fasta = path.join(dir, "db.fa");
  writeFileSync(fasta, demoQueries(480, 100_000));
  const databasesDir = path.join(dir, "databases");
  await publishDatabase(databasesDir, { name: "pagesdemo", fastaPath: fasta, type: "nucl", partitions: 2 });
  // Blobs through the counting proxy; tables straight to Azurite.
  const blobsViaProxy = [
    "DefaultEndpointsProtocol=http",
    `AccountName=${DEV_ACCOUNT}`,
    `AccountKey=${DEV_ACCOUNT_KEY}`,
    `BlobEndpoint=${proxy.origin}/${DEV_ACCOUNT}`,
  ].join(";");
  const config = loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: azurite.connectionString, JOBAPI_DATA_DIR: dir });
  const jobs = JobStore.fromConnectionString(azurite.connectionString, "pages");
  await jobs.init();
  const artifacts = ArtifactStore.fromConnectionString(blobsViaProxy, "pages");
  await artifacts.init();
  const catalog = createFileDatabaseCatalog(databasesDir);
  const tokens = new ApiTokenService(createFileSecretStore(path.join(dir, "secrets")));
  await tokens.ensure();
  token = (await tokens.state())?.current.value as string;
  dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor: createLocalExecutor({ concurrency: 2 }),
    logger,
    workDir: path.join(dir, "work"),
    maxActiveJobs: 2,
    nodeMemoryBytes: config.nodeMemoryBytes,
    memoryMarginBytes: 0,
    threadsPerShard: 1,
    shardSlots: 2,
    shardAttempts: 1,
    pollIntervalMs: 100,
    // Every chunk of the merged XML may write the storing progress (one write in flight at a time).
    storingReportMs: 0,
  });
  jobs.onAnyChange((jobId, job) => {
    if (job?.storing) storingWrites[jobId] = [...(storingWrites[jobId] ?? []), job];
  });
  const service = new JobService({
    jobs,
    artifacts,
    catalog,
    dispatcher,
    logger,
    blastVersion,
    maxQueuedJobs: 10,
    retryAfterSeconds: 5,
  });
  deps = {
    config,
    service,
    jobs,
    artifacts,
    catalog,
    tokens,
    logger,
    blastVersion,
    executorName: "local",
    activeJobs: () => 0,
    dispatchRole: () => "active",
  };
  app = createJobApiApp(deps);
  await dispatcher.start();
  jobIds.single = await submit("standard");
  jobIds.sharded = await submit("sharded");
  for (const jobId of Object.values(jobIds)) {
    const status = await eventually(
      async () => {
        const s = (await (await call(`/v1/jobs/${jobId}/status`)).json()) as { status: string; error?: unknown };
        return ["completed", "failed", "cancelled"].includes(s.status) ? s : undefined;
      },
      240_000,
      200,
    );
    expect(status).toMatchObject({ status: "completed" });
  }
}, 300_000);

afterAll(async () => {
  await dispatcher?.stop();
  await proxy?.close();
  await azurite?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function xmlOf(jobId: string): Promise<Buffer> {
  const res = await call(`/v1/jobs/${jobId}/results?content=xml`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

describe.each(["single", "sharded"] as const)("result pages of a %s-shard job (issue 23 item 2)", (kind) => {
  it("issue 23: while the job stores its results (BLAST done, not yet completed), its status says how much of the merged XML is stored, of how much", async () => {
    const jobId = jobIds[kind];
    const writes = storingWrites[jobId] ?? [];
    expect(writes.length).toBeGreaterThan(1);
    const final = (await (await call(`/v1/jobs/${jobId}/status`)).json()) as {
      status: string;
      storing: unknown;
      result_bytes: { xml: number };
    };
    expect(final).toMatchObject({ status: "completed", storing: null });
    const xmlBytes = final.result_bytes.xml;
    const written = writes.map((w) => w.storing?.xml_bytes ?? -1);
    expect(written).toEqual([...written].sort((a, b) => a - b));
    expect(written.at(-1)).toBeGreaterThan(0);
    for (const w of writes) {
      expect(w.status).toBe("running");
      // The status route shows the phase while the job is running.
      expect(statusView(w, null).storing).toEqual(w.storing);
      const total = w.storing?.xml_bytes_total ?? null;
      if (kind === "single") {
        // One shard: the merged XML's size is known before a byte is stored.
        expect(w.storing).toMatchObject({ xml_bytes_total: xmlBytes, total_is_estimate: false });
      } else {
        // A merge: at most the shard outputs added up (the merge keeps each query's best hits).
        expect(w.storing?.total_is_estimate).toBe(true);
        if (total !== null) expect(total).toBeGreaterThanOrEqual(xmlBytes);
      }
      expect(w.storing?.xml_bytes).toBeLessThanOrEqual(xmlBytes);
    }
  });

  it("lists every query with its summary, in pages, from the index stored at merge", async () => {
    const jobId = jobIds[kind];
    const first = queryPageSchema.parse(await (await call(`/v1/jobs/${jobId}/results/queries?limit=15`)).json());
    expect(first).toMatchObject({ total: QUERIES, offset: 0, limit: 15, next_offset: 15, program: "blastn" });
    const rest = queryPageSchema.parse(
      await (await call(`/v1/jobs/${jobId}/results/queries?offset=15&limit=500`)).json(),
    );
    expect(rest.next_offset).toBeUndefined();
    const all = [...first.queries, ...rest.queries];
    expect(all.map((q) => q.n)).toEqual(Array.from({ length: QUERIES }, (_, i) => i + 1));
    // The summaries agree with the XML a download sends.
    const xml = (await xmlOf(jobId)).toString("utf8");
    expect(first.xml_bytes).toBe(Buffer.byteLength(xml));
    const iterations = xml.split("<Iteration>").slice(1);
    for (const [i, q] of all.entries()) {
      const it = iterations[i] ?? "";
      expect(q.query_len).toBe(Number(/<Iteration_query-len>(\d+)</.exec(it)?.[1]));
      expect(q.hits).toBe(it.split("<Hit>").length - 1);
    }
    const odd = all[10];
    expect(odd).toMatchObject({ query_def: `odd_q <no & match> "quoted" 'x'`, hits: 0, best_evalue: null });
    expect(all[0]?.hits).toBeGreaterThan(0);
  });

  it("the page of the last query reads only the stored bytes that hold it (a range read, not the file)", async () => {
    const jobId = jobIds[kind];
    const { stored_bytes: storedBytes, xml_bytes: xmlBytes } = queryPageSchema.parse(
      await (await call(`/v1/jobs/${jobId}/results/queries?limit=1`)).json(),
    );
    // Several 1 MiB gzip members: the last query's are a few of them.
    expect(xmlBytes).toBeGreaterThan(6 * 1024 * 1024);
    const before = proxy.requests.length;
    const res = await call(`/v1/jobs/${jobId}/results/queries/${QUERIES}/hits?limit=10`);
    expect(res.status).toBe(200);
    const page = hitPageSchema.parse(await res.json());
    expect(page.query.n).toBe(QUERIES);
    expect(page.hits.length).toBe(10);
    const reads = proxy.requests.slice(before).filter((r) => r.path.endsWith("/merged_results.out.gz"));
    expect(reads).toHaveLength(1);
    expect(reads[0]?.range).toMatch(/^bytes=\d+-\d+$/);
    // One or two 1 MiB gzip members (~0.15 MB each at level 1), never the whole result.
    const read = reads[0]?.responseBytes ?? 0;
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThan((storedBytes ?? 0) / 3);
  });

  it("a hit's HSPs carry the alignment lines and coordinates the XML has", async () => {
    const jobId = jobIds[kind];
    const res = await call(`/v1/jobs/${jobId}/results/queries/${QUERIES}/hits/2`);
    expect(res.status).toBe(200);
    const detail = hitDetailSchema.parse(await res.json());
    expect(detail.hit.num).toBe(2);
    const xml = (await xmlOf(jobId)).toString("utf8");
    const iteration = xml.split("<Iteration>")[QUERIES] ?? "";
    const hitXml = iteration.split("<Hit>")[2] ?? "";
    expect(detail.hit.accession).toBe(/<Hit_accession>([^<]*)</.exec(hitXml)?.[1]);
    const first = detail.hsp_list[0];
    expect(first?.qseq).toBe(/<Hsp_qseq>([^<]*)</.exec(hitXml)?.[1]);
    expect(first?.midline).toBe(/<Hsp_midline>([^<]*)</.exec(hitXml)?.[1]);
    expect(first?.query_from).toBe(Number(/<Hsp_query-from>(\d+)</.exec(hitXml)?.[1]));
    expect(first?.hit_to).toBe(Number(/<Hsp_hit-to>(\d+)</.exec(hitXml)?.[1]));
    expect(first?.identity).toBe(Number(/<Hsp_identity>(\d+)</.exec(hitXml)?.[1]));
    expect(first).toMatchObject({ query_strand: "plus", query_frame: null, hit_frame: null });
    expect(["plus", "minus"]).toContain(first?.hit_strand);
  });
});

describe("result pages refuse what they cannot answer", () => {
  it("answers 404 envelopes for an unknown query or hit and 400 for a bad offset or a limit over 500", async () => {
    const jobId = jobIds.single;
    for (const [p, status, detail] of [
      [`/v1/jobs/${jobId}/results/queries/${QUERIES + 1}/hits`, 404, /query 41 does not exist/],
      [`/v1/jobs/${jobId}/results/queries/11/hits/1`, 404, /hit 1 of query 11 does not exist/],
      [`/v1/jobs/${jobId}/results/queries/0/hits`, 400, /'n'/],
      [`/v1/jobs/${jobId}/results/queries/x/hits/1`, 400, /'n'/],
      [`/v1/jobs/${jobId}/results/queries?limit=501`, 400, /'limit'/],
      [`/v1/jobs/${jobId}/results/queries?offset=-1`, 400, /'offset'/],
      [`/v1/jobs/${jobId}/results/queries?offset=abc`, 400, /'offset'/],
      ["/v1/jobs/zzzzzzzzzzzz/results/queries", 404, /./],
    ] as const) {
      const res = await call(p);
      expect(res.status, p).toBe(status);
      const body = (await res.json()) as { detail: string; request_id: string };
      expect(body.detail, p).toMatch(detail);
      expect(body.request_id).toEqual(expect.any(String));
    }
  });

  it("B-197 needs the API token", async () => {
    const res = await Promise.resolve(app.request(`/v1/jobs/${jobIds.single}/results/queries`));
    expect(res.status).toBe(401);
  });

  it("a job stored without an index (before result pages existed) says so: download the XML instead", async () => {
    const jobId = jobIds.single;
    await new ContainerClient(azurite.connectionString, "pages").deleteBlob(`${jobId}/merged_index.json.gz`);
    // A job API started afresh (no index in memory), as after an upgrade.
    const fresh = createJobApiApp(deps);
    const res = await Promise.resolve(
      fresh.request(`/v1/jobs/${jobId}/results/queries`, { headers: { "X-SVC-API-Token": token } }),
    );
    expect(res.status).toBe(404);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/no index .*download the XML/);
    // The download itself still works.
    expect(
      (
        await fresh.request(`/v1/jobs/${jobId}/results?content=xml`, {
          headers: { "X-SVC-API-Token": token },
        })
      ).status,
    ).toBe(200);
  });
});
