import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { XMLValidator } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { fingerprint, type Submission } from "../../jobapi/jobs/job-service.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import { READINESS_MAX_AGE_MS } from "../../jobapi/routes/readiness-state.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { mergeBlastXml } from "../../shared/blast/xml-merge.js";
import {
  clusterSchema,
  databaseListSchema,
  jobApiConfigSchema,
  jobApiHealthSchema,
  jobApiReadySchema,
  jobListSchema,
} from "../../shared/jobs/schemas.js";
import { docWorkspace, ERROR_ENVELOPE, runBash, shellBlocks } from "../support/doc-blocks.js";
import { DEMO_DB, demoQueries, jobApi, readApiToken, unzip } from "../support/jobapi-client.js";
import { eventually, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { alive } from "../support/processes.js";

let stack: TestStack;
let api: ReturnType<typeof jobApi>;
let completedJobId: string;

const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

beforeAll(async () => {
  stack = await startStack();
  api = jobApi(stack, readApiToken(stack));
  const accepted = await api.submit({
    program: "blastn",
    db: DEMO_DB,
    query_fasta: demoQueries(3),
    blast_options: { evalue: 1e-5, max_target_seqs: 20 },
  });
  completedJobId = accepted.job_id;
  await api.finished(completedJobId);
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("job API: authentication and public routes", () => {
  it("B-197 B-030 refuses a call without X-SVC-API-Token", async () => {
    const res = await fetch(`${api.base}/v1/jobs`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
  });

  it("B-199 refuses a wrong token, including one that shares the real token's prefix", async () => {
    const real = readApiToken(stack);
    for (const wrong of ["nope", `${real}x`, real.slice(0, -1), real.toUpperCase()]) {
      const res = await fetch(`${api.base}/v1/databases`, { headers: { "X-SVC-API-Token": wrong } });
      expect(res.status).toBe(401);
    }
  });

  it("B-176 B-175 B-028 B-029 serves health, readiness, the OpenAPI document and the schema UI without a token", async () => {
    expect((await fetch(`${api.base}/v1/health`)).status).toBe(200);
    const ready = await fetch(`${api.base}/v1/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      status: "ready",
      checks: { storage: "ok", blast: "ok", api_token: "ok" },
    });
    const docs = await fetch(`${api.base}/docs`);
    expect(docs.status).toBe(200);
    const html = await docs.text();
    expect(html).toContain("swagger-ui");
    expect(html).not.toMatch(/https?:\/\/(cdn|unpkg|jsdelivr)/);
    const bundle = await fetch(`${api.base}/docs/swagger-ui-bundle.js`);
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
  });

  it("B-256 B-257 B-253 B-254 publishes OpenAPI 3.1 with the version and every §4.2 route", async () => {
    const doc = (await (await fetch(`${api.base}/openapi.json`)).json()) as {
      openapi: string;
      info: { version: string };
      paths: Record<string, unknown>;
      components: { schemas: Record<string, { properties?: Record<string, unknown> }> };
    };
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+$/);
    for (const p of [
      "/v1/health",
      "/v1/config",
      "/v1/cluster",
      "/v1/jobs",
      "/v1/jobs/{job_id}/status",
      "/v1/jobs/{job_id}/results",
      "/v1/jobs/{job_id}/cancel",
      "/v1/jobs/{job_id}",
      "/api/v1/facade/submit",
      "/api/v1/facade/jobs/{job_id}",
      "/api/v1/facade/jobs/{job_id}/files/{file_id}",
    ]) {
      expect(doc.paths).toHaveProperty([p]);
    }
    // Generated from the validating schema: the allowlisted options are all there.
    const submit = doc.components.schemas.SubmitRequest?.properties ?? {};
    expect(Object.keys(submit)).toEqual(
      expect.arrayContaining([
        "program",
        "db",
        "query_fasta",
        "blast_options",
        "priority",
        "idempotency_key",
        "resource_profile",
        "execution_profile",
      ]),
    );
    // Status reads document their conditional, long-polling form.
    for (const p of ["/v1/jobs/{job_id}/status", "/api/v1/facade/jobs/{job_id}"]) {
      const get = (
        doc.paths[p] as { get: { parameters: { name: string; in: string }[]; responses: Record<string, unknown> } }
      ).get;
      expect(get.parameters.map((x) => `${x.in}:${x.name}`)).toEqual(
        expect.arrayContaining(["query:wait", "header:If-None-Match"]),
      );
      expect(get.responses).toHaveProperty(["304"]);
    }
  });

  it("B-177 B-178 B-179 answers config, cluster, databases and the job list", async () => {
    expect(await (await api.get("/v1/config")).json()).toMatchObject({
      executor: "local",
      blast_version: expect.stringMatching(/^2\.\d+\.\d+/),
      limits: { threads_per_shard: "auto" },
    });
    expect(await (await api.get("/v1/cluster")).json()).toMatchObject({
      executor: "local",
      nodes: [expect.objectContaining({ cpus: expect.any(Number) })],
    });
    const dbs = (await (await api.get("/v1/databases")).json()) as {
      databases: { name: string; partitions: number }[];
    };
    expect(dbs.databases).toContainEqual(expect.objectContaining({ name: DEMO_DB, partitions: 2 }));
    const jobs = (await (await api.get("/v1/jobs?status=completed")).json()) as { jobs: { job_id: string }[] };
    expect(jobs.jobs.map((j) => j.job_id)).toContain(completedJobId);
    expect((await api.get("/v1/jobs?status=bogus")).status).toBe(400);
  });
});

describe("job API: submit, status and results", () => {
  it("B-060 B-061 B-062 B-063 B-064 B-065 B-066 B-067 B-068 B-069 B-070 B-033 B-052 B-056 B-057 B-020 B-045 accepts a search with 202 and every §2.3 field", async () => {
    const res = await api.post("/v1/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1),
      priority: "normal",
      resource_profile: "Standard_D4s_v5 please",
    });
    expect(res.status).toBe(202);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.job_id).toMatch(/^[a-z0-9]{12}$/);
    expect(body.status).toBe("queued");
    expect(Number.isInteger(body.queue_position)).toBe(true);
    expect(body.submission_source).toBe("external_api");
    expect(body.created_at).toMatch(ISO_WITH_OFFSET);
    expect(body.blast_version).toMatch(/^2\.\d+\.\d+\+?$/);
    expect(body.db_name).toBe(DEMO_DB);
    expect(body.db_version).toMatch(/^\d{4}(-\d{2}){5}$/);
    expect(String(body.message)).toContain("status");
    expect(body.status_url).toBe(`/v1/jobs/${String(body.job_id)}/status`);
    // Accepted before it ran; the body named no storage path, and the server took it from there.
    const done = await api.finished(String(body.job_id));
    expect(done.status).toBe("completed");
    expect(done.resource_profile).toBe("Standard_D4s_v5 please");
  });

  it("B-071 B-072 B-073 B-074 B-076 B-077 B-078 B-079 B-080 B-081 B-082 B-148 B-151 B-034 reports a completed job with every §2.4 field", async () => {
    const s = await api.status(completedJobId);
    expect(s).toMatchObject({
      job_id: completedJobId,
      status: "completed",
      phase: "completed",
      queue_position: null,
      program: "blastn",
      error: "",
    });
    for (const k of ["created_at", "updated_at", "last_progress_at"]) expect(s[k]).toMatch(ISO_WITH_OFFSET);
    expect(String(s.db)).toMatch(/^local:\/\/databases\/16s_rrna_demo\/\d{4}(-\d{2}){5}$/);
    expect(s.kubernetes).toEqual({ summary: { total: 1, succeeded: 1, failed: 0, active: 0 } });
    expect((await api.status(completedJobId)).status).toBe("completed");
    // The same id serves the results and the facade's status route.
    expect((await api.get(`/v1/jobs/${completedJobId}/results?content=xml`)).status).toBe(200);
    expect((await api.get(`/api/v1/facade/jobs/${completedJobId}`)).status).toBe(200);
  });

  it("B-101 B-102 B-103 B-104 streams the merged XML as a valid BlastOutput document with no storage paths", async () => {
    const res = await api.get(`/v1/jobs/${completedJobId}/results?content=xml`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/xml");
    const xml = await res.text();
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(xml).toContain("<BlastOutput>");
    expect((xml.match(/<Iteration>/g) ?? []).length).toBe(3);
    expect(xml).not.toContain(stack.dataDir);
    expect(xml).not.toMatch(/sig=|devstoreaccount1|blob\.core/);
  });

  it("B-099 B-100 B-181 streams ZIPs: full holds every shard output, merged holds merged_results.out.gz", async () => {
    const full = await unzip(
      Buffer.from(await (await api.get(`/v1/jobs/${completedJobId}/results?content=full`)).arrayBuffer()),
    );
    expect([...full.keys()]).toEqual(["b0.out.gz"]);
    expect(gunzipSync(full.get("b0.out.gz") as Buffer).toString()).toContain("<BlastOutput>");
    const merged = await unzip(
      Buffer.from(await (await api.get(`/v1/jobs/${completedJobId}/results?content=merged`)).arrayBuffer()),
    );
    expect([...merged.keys()]).toEqual(["merged_results.out.gz"]);
    const xml = gunzipSync(merged.get("merged_results.out.gz") as Buffer).toString();
    expect(xml).toBe(await (await api.get(`/v1/jobs/${completedJobId}/results?content=xml`)).text());
  });

  it("publishes a one-shard job's merged XML exactly as the merge writes it from the stored shard output", async () => {
    const full = await unzip(
      Buffer.from(await (await api.get(`/v1/jobs/${completedJobId}/results?content=full`)).arrayBuffer()),
    );
    const dir = mkdtempSync(path.join(os.tmpdir(), "blastplane-merge-"));
    try {
      const shard = path.join(dir, "b0.xml");
      writeFileSync(shard, gunzipSync(full.get("b0.out.gz") as Buffer));
      const chunks: Buffer[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          chunks.push(chunk);
          callback();
        },
      });
      await mergeBlastXml({
        shards: [{ batchIndex: 0, partitionIndex: 0, path: shard }],
        maxTargetSeqs: 20,
        database: DEMO_DB,
        output: sink,
      });
      const published = Buffer.from(
        await (await api.get(`/v1/jobs/${completedJobId}/results?content=xml`)).arrayBuffer(),
      );
      expect(published.equals(Buffer.concat(chunks))).toBe(true);
      // The shard output is BLAST's own, naming the database path it was given; the merged one names the database.
      expect(readFileSync(shard, "latin1")).toMatch(/<BlastOutput_db>full\/[^<]+<\/BlastOutput_db>/);
      expect(published.toString("latin1")).toContain(`<BlastOutput_db>${DEMO_DB}</BlastOutput_db>`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("renders tabular (outfmt 6) rows from the merged XML", async () => {
    const res = await api.get(`/v1/jobs/${completedJobId}/results?content=tabular`);
    expect(res.status).toBe(200);
    const rows = (await res.text()).trim().split("\n");
    expect(rows.length).toBeGreaterThan(3);
    for (const row of rows) expect(row.split("\t")).toHaveLength(12);
  });

  it("B-037 B-231 B-232 B-233 B-234 answers 400 for a UUID, a malformed id, an unknown content value and an empty segment; 404 for an unknown id", async () => {
    expect((await api.get("/v1/jobs/123e4567-e89b-12d3-a456-426614174000/status")).status).toBe(400);
    const uuid = await api.get("/api/v1/facade/jobs/123e4567-e89b-12d3-a456-426614174000");
    expect(uuid.status).toBe(400);
    expect(((await uuid.json()) as { detail: string }).detail).toContain("UUID");
    expect((await api.get("/v1/jobs/NOT_AN_ID/status")).status).toBe(400);
    expect((await api.get(`/v1/jobs/${completedJobId}/results?content=foo`)).status).toBe(400);
    expect((await api.get("/v1/jobs//status")).status).toBe(400);
    const unknown = await api.get("/v1/jobs/zzzzzzzzzzzz/status");
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({
      detail: expect.any(String),
      request_id: unknown.headers.get("x-request-id"),
    });
  });

  it("B-038 B-039 B-041 B-043 B-238 B-125 answers 422 naming each failing field", async () => {
    const res = await api.post("/v1/jobs", { program: 5, query_fasta: ">q\nACGT" });
    expect(res.status).toBe(422);
    const detail = ((await res.json()) as { detail: { loc: string[]; type: string }[] }).detail;
    expect(detail).toContainEqual(expect.objectContaining({ loc: ["body", "program"] }));
    expect(detail).toContainEqual(expect.objectContaining({ loc: ["body", "db"], type: "missing" }));
    const missingQuery = await api.post("/v1/jobs", { program: "blastn", db: DEMO_DB });
    expect(((await missingQuery.json()) as { detail: { loc: string[] }[] }).detail).toContainEqual(
      expect.objectContaining({ loc: ["body", "query_fasta"] }),
    );
  });

  it("B-042 B-083 B-084 B-050 B-053 B-089 B-090 B-059 required fields are refused when missing or mistyped; optional ones may be left out; a profile named like sharding does not shard", async () => {
    const locsOf = async (res: Response) =>
      ((await res.json()) as { detail: { loc: unknown[] }[] }).detail.map((d) => d.loc.join("."));
    const dbArray = await api.post("/v1/jobs", { program: "blastn", db: [], query_fasta: ">q\nACGT" });
    expect(dbArray.status).toBe(422);
    expect(await locsOf(dbArray)).toContain("body.db");
    for (const missing of ["program", "db"] as const) {
      const body: Record<string, unknown> = { program: "blastn", db: DEMO_DB, query_fasta: ">q\nACGT" };
      delete body[missing];
      const res = await api.post("/api/v1/facade/submit", body);
      expect(res.status, missing).toBe(422);
      expect(
        (await locsOf(res)).some((loc) => loc.endsWith(missing)),
        missing,
      ).toBe(true);
    }
    // No priority and no idempotency key: accepted.
    const plain = await api.post("/v1/jobs", { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1, 300, 91) });
    expect(plain.status).toBe(202);
    // The facade: with and without an idempotency key, and with free-form profile text.
    const keyed = await api.post("/api/v1/facade/submit", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 92),
      idempotency_key: "facade-key-b089",
      resource_profile: "anything at all: big-mem ✓",
    });
    expect(keyed.status).toBe(202);
    const unkeyed = await api.post("/api/v1/facade/submit", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 93),
    });
    expect(unkeyed.status).toBe(202);
    // A profile that sounds like sharding leaves the job as one shard, as without a profile.
    const sharded = await api.submit({
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 94),
      resource_profile: "sharded",
    });
    const done = await api.finished(sharded.job_id);
    expect(done.resource_profile).toBe("sharded");
    expect(done.kubernetes).toEqual({ summary: { total: 1, succeeded: 1, failed: 0, active: 0 } });
    for (const res of [plain, keyed, unkeyed])
      await api.finished(String(((await res.json()) as { job_id: string }).job_id));
  });

  it("refuses an unknown option key, an unknown database, a program that does not fit the database, and a bad FASTA alphabet", async () => {
    const cases: [Record<string, unknown>, string[]][] = [
      [
        { program: "blastn", db: DEMO_DB, query_fasta: ">q\nACGT", blast_options: { evalue: 1, shell: "rm -rf /" } },
        ["body", "blast_options", "shell"],
      ],
      [{ program: "blastn", db: "no_such_db", query_fasta: ">q\nACGT" }, ["body", "db"]],
      [{ program: "blastp", db: DEMO_DB, query_fasta: ">q\nMKV" }, ["body", "db"]],
      [{ program: "blastn", db: DEMO_DB, query_fasta: ">q\nACGT123" }, ["body", "query_fasta"]],
      [{ program: "blastn", db: "../../etc", query_fasta: ">q\nACGT" }, ["body", "db"]],
    ];
    for (const [body, loc] of cases) {
      const res = await api.post("/v1/jobs", body);
      expect(res.status).toBe(422);
      const detail = ((await res.json()) as { detail: { loc: unknown[] }[] }).detail;
      expect(detail.some((d) => JSON.stringify(d.loc.slice(0, loc.length)) === JSON.stringify(loc))).toBe(true);
    }
  });

  it("answers 400 for malformed JSON and a wrong content type", async () => {
    expect((await api.post("/v1/jobs", "{not json")).status).toBe(400);
    const res = await fetch(`${api.base}/v1/jobs`, {
      method: "POST",
      headers: { "X-SVC-API-Token": readApiToken(stack), "Content-Type": "text/plain" },
      body: "{}",
    });
    expect(res.status).toBe(400);
  });

  it("B-054 B-055 B-021 B-142 returns one job for 20 concurrent submits with one idempotency key", async () => {
    const body = {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 7),
      idempotency_key: "concurrent-key-1",
    };
    const responses = await Promise.all(Array.from({ length: 20 }, () => api.post("/v1/jobs", body)));
    const ids = new Set<string>();
    for (const r of responses) {
      expect([200, 202]).toContain(r.status);
      ids.add(((await r.json()) as { job_id: string }).job_id);
    }
    expect(ids.size).toBe(1);
    expect(responses.filter((r) => r.status === 202)).toHaveLength(1);
    const all = (await (await api.get("/v1/jobs?limit=500")).json()) as { jobs: { job_id: string; status: string }[] };
    expect(all.jobs.filter((j) => ids.has(j.job_id))).toHaveLength(1);
    // Every job so far (queued, running, finished, cancelled) has one of §3's states.
    expect(all.jobs.length).toBeGreaterThan(2);
    for (const job of all.jobs)
      expect(["queued", "dispatching", "submitting", "running", "completed", "failed", "cancelled"]).toContain(
        job.status,
      );
  });

  it("B-175 config, cluster, databases, the job list and a job's status answer what the description's schemas say", async () => {
    const answers: [string, z.ZodType][] = [
      ["/v1/config", jobApiConfigSchema],
      ["/v1/cluster", clusterSchema],
      ["/v1/databases", databaseListSchema],
      ["/v1/jobs?limit=2", jobListSchema],
      ["/v1/health", jobApiHealthSchema],
      ["/v1/ready", jobApiReadySchema],
    ];
    for (const [route, schema] of answers) {
      const res = await api.get(route);
      expect(res.status, route).toBe(200);
      const parsed = schema.safeParse(await res.json());
      expect(parsed.error?.issues, route).toBeUndefined();
    }
  });

  it("GET /v1/jobs continues past limit: next_link pages through every job once, newest first, then stops", async () => {
    type Page = { jobs: { job_id: string; created_at: string }[]; next_cursor?: string; next_link?: string };
    const all = (await (await api.get("/v1/jobs?limit=500")).json()) as Page;
    expect(all.jobs.length).toBeGreaterThan(2);
    expect(all.next_link).toBeUndefined();
    const seen: string[] = [];
    let link: string | undefined = "/v1/jobs?limit=1";
    while (link) {
      const res = await api.get(link);
      expect(res.status).toBe(200);
      const page = (await res.json()) as Page;
      expect(page.jobs.length).toBeLessThanOrEqual(1);
      seen.push(...page.jobs.map((j) => j.job_id));
      if (page.next_link) expect(page.next_link).toContain(`cursor=${page.next_cursor}`);
      link = page.next_link;
      expect(seen.length).toBeLessThanOrEqual(all.jobs.length);
    }
    // The same jobs in the same order as one big page: none repeated, none skipped.
    expect(seen).toEqual(all.jobs.map((j) => j.job_id));
    for (const bad of ["not-ours", Buffer.from('["x"]').toString("base64url")]) {
      const res = await api.get(`/v1/jobs?cursor=${bad}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        detail: expect.stringContaining("cursor"),
        request_id: expect.any(String),
      });
    }
  });

  it("B-091 B-092 B-143 B-149 B-093 B-094 B-095 B-096 B-097 B-098 B-150 B-088 B-182 B-235 runs the facade: submit, success, stable file ids, download; an unknown file id is 404", async () => {
    const res = await api.post("/api/v1/facade/submit", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(2),
      options: { outfmt: 5, word_size: 11, dust: true, evalue: 1e-10, max_target_seqs: 5 },
      priority: "high",
      external_correlation_id: "lims-4711",
    });
    expect(res.status).toBe(202);
    const sub = (await res.json()) as Record<string, unknown>;
    expect(sub).toMatchObject({
      status: "queued",
      external_correlation_id: "lims-4711",
      db_name: DEMO_DB,
      submission_source: "facade",
    });
    for (const k of ["job_id", "created_at", "db_version", "queue_position"]) expect(sub).toHaveProperty(k);
    const jobId = String(sub.job_id);
    await api.finished(jobId);
    const status = (await (await api.get(`/api/v1/facade/jobs/${jobId}`)).json()) as Record<string, unknown> & {
      result: { files: { file_id: string; size_bytes: number; format: string }[] };
      execution: Record<string, number>;
    };
    expect(status.job_id).toBe(jobId);
    expect(status.status).toBe("success");
    for (const k of ["created_at", "updated_at", "completed_at"]) expect(status[k]).toMatch(ISO_WITH_OFFSET);
    expect(status).toMatchObject({
      blast_version: expect.stringMatching(/^2\.\d+\.\d+\+?$/),
      db_name: DEMO_DB,
      db_version: expect.stringMatching(/^\d{4}(-\d{2}){5}$/),
    });
    for (const k of ["elapsed_seconds", "queue_wait_seconds", "run_seconds"])
      expect(Number.isInteger(status[k])).toBe(true);
    expect(status.execution).toEqual({ shard_count: 1, shards_succeeded: 1, shards_active: 0, shards_failed: 0 });
    const ids = status.result.files.map((f) => f.file_id);
    expect(ids).toEqual(["merged-xml", "merged-gz", "shard-b0"]);
    const again = (await (await api.get(`/api/v1/facade/jobs/${jobId}`)).json()) as typeof status;
    expect(again.result.files).toEqual(status.result.files);
    const xmlFile = status.result.files.find((f) => f.file_id === "merged-xml");
    const download = await api.get(`/api/v1/facade/jobs/${jobId}/files/merged-xml`);
    expect(download.status).toBe(200);
    const bytes = Buffer.from(await download.arrayBuffer());
    expect(bytes.length).toBe(xmlFile?.size_bytes);
    expect(XMLValidator.validate(bytes.toString())).toBe(true);
    expect((await api.get(`/api/v1/facade/jobs/${jobId}/files/nope`)).status).toBe(404);

    // priority (like options) may be left out.
    const minimal = await api.post("/api/v1/facade/submit", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 300, 41),
    });
    expect(minimal.status).toBe(202);
    expect((await api.finished(String(((await minimal.json()) as { job_id: string }).job_id))).status).toBe(
      "completed",
    );
  });

  it("B-152 cancels an active job with DELETE, then deletes it with its artifacts once finished", async () => {
    const { job_id } = await api.submit({ program: "tblastx", db: DEMO_DB, query_fasta: demoQueries(4, 1500, 20) });
    const del = await api.del(`/v1/jobs/${job_id}`);
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ job_id, status: "cancelled", deleted: false });
    expect((await api.status(job_id)).status).toBe("cancelled");
    // Once the dispatcher runs nothing, the cancelled job's run (if it had started) has ended: a late
    // write from it would show now.
    await eventually(
      async () =>
        ((await (await api.get("/v1/cluster")).json()) as { active_jobs: number }).active_jobs === 0 ? true : undefined,
      60_000,
    );
    expect((await api.status(job_id)).status).toBe("cancelled");
    const gone = await api.del(`/v1/jobs/${job_id}`);
    expect(await gone.json()).toEqual({ job_id, status: "cancelled", deleted: true });
    expect((await api.get(`/v1/jobs/${job_id}/status`)).status).toBe(404);
  });

  it("B-152 POST /cancel stops an active job and leaves a finished one, results and all, as it is", async () => {
    const { job_id } = await api.submit({ program: "tblastx", db: DEMO_DB, query_fasta: demoQueries(4, 1500, 24) });
    const cancel = await api.post(`/v1/jobs/${job_id}/cancel`, {});
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toEqual({ job_id, status: "cancelled" });
    expect((await api.status(job_id)).status).toBe("cancelled");
    // Repeating it (a retried activity) changes nothing and deletes nothing.
    expect(await (await api.post(`/v1/jobs/${job_id}/cancel`, {})).json()).toEqual({ job_id, status: "cancelled" });
    expect((await api.status(job_id)).status).toBe("cancelled");

    // A cancel that arrives after the job finished: the job and its results stay.
    const late = await api.post(`/v1/jobs/${completedJobId}/cancel`, {});
    expect(late.status).toBe(200);
    expect(await late.json()).toEqual({ job_id: completedJobId, status: "completed" });
    expect((await api.status(completedJobId)).status).toBe("completed");
    expect((await api.get(`/v1/jobs/${completedJobId}/results?content=xml`)).status).toBe(200);

    const unknown = await api.post("/v1/jobs/zzzzzzzzzzzz/cancel", {});
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({
      detail: expect.stringContaining("zzzzzzzzzzzz"),
      request_id: expect.any(String),
    });
    expect((await api.post(`/v1/jobs/${randomUUID()}/cancel`, {})).status).toBe(400);
  });

  it("answers status with an ETag, 304 while it is unchanged, and holds ?wait=N requests until the status changes", async () => {
    for (const route of [`/v1/jobs/${completedJobId}/status`, `/api/v1/facade/jobs/${completedJobId}`]) {
      const first = await api.get(route);
      const etag = first.headers.get("etag") ?? "";
      // The facade's body has clock-derived seconds, so its tag is weak (a version of the job).
      expect(etag).toMatch(route.startsWith("/api/") ? /^W\/"[\w-]+"$/ : /^"[\w-]+"$/);
      const same = await api.get(route, { "If-None-Match": etag });
      expect(same.status).toBe(304);
      expect(same.headers.get("etag")).toBe(etag);
      expect(same.headers.get("x-request-id")).toBeTruthy();
      expect(await same.text()).toBe("");
      expect((await api.get(route, { "If-None-Match": '"other"' })).status).toBe(200);
      // A finished job does not change: the request is held for the whole wait, then 304.
      const started = Date.now();
      expect((await api.get(`${route}?wait=1`, { "If-None-Match": etag })).status).toBe(304);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    }

    // A running job: each held request returns as soon as the status changes, until it completes.
    const { job_id } = await api.submit({ program: "blastn", db: DEMO_DB, query_fasta: demoQueries(2, 600, 40) });
    let response = await api.get(`/v1/jobs/${job_id}/status`);
    const seen: string[] = [];
    for (let i = 0; i < 30; i++) {
      const body = (await response.json()) as Record<string, unknown>;
      seen.push(String(body.status));
      if (body.status === "completed") break;
      const etag = response.headers.get("etag") ?? "";
      response = await api.get(`/v1/jobs/${job_id}/status?wait=30`, { "If-None-Match": etag });
      expect(response.status).toBe(200);
      expect(response.headers.get("etag")).not.toBe(etag);
    }
    expect(seen.at(-1)).toBe("completed");
    // Held requests answer changes, not time: one per recorded step of the job (queued,
    // dispatching, submitting, running, shard stored, completed), not one per poll interval.
    expect(seen.length).toBeLessThanOrEqual(8);

    // The facade's seconds move while a job runs, yet a held facade request waits for a real change.
    const slow = await api.submit({ program: "tblastx", db: DEMO_DB, query_fasta: demoQueries(4, 1500, 44) });
    const running = await eventually(
      async () => {
        const r = await api.get(`/api/v1/facade/jobs/${slow.job_id}`);
        const body = (await r.json()) as Record<string, unknown>;
        return body.status === "running" && ((body.execution as Record<string, number>).shards_active ?? 0) > 0
          ? { r, body }
          : undefined;
      },
      20_000,
      50,
    );
    const held = await api.get(`/api/v1/facade/jobs/${slow.job_id}?wait=2`, {
      "If-None-Match": running.r.headers.get("etag") ?? "",
    });
    if (held.status === 200) {
      const body = (await held.json()) as Record<string, unknown>;
      const stable = ({ elapsed_seconds, queue_wait_seconds, run_seconds, ...rest }: Record<string, unknown>) => rest;
      expect(stable(body)).not.toEqual(stable(running.body));
    } else {
      expect(held.status).toBe(304);
    }
    await api.del(`/v1/jobs/${slow.job_id}`);

    for (const bad of ["61", "-1", "soon"]) {
      const res = await api.get(`/v1/jobs/${job_id}/status?wait=${bad}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        detail: expect.stringContaining("wait"),
        request_id: expect.any(String),
      });
    }
  });
});

/*
 * Issue 23 item 10, the doc test: every ```sh block of the README and of the job API walk-through
 * runs with bash, as copied, against this file's stack — on free ports and a data folder of its
 * own, never the defaults — and must exit 0 without printing an error envelope. A block that
 * cannot run in a test (npm start, npm test) is fenced ```sh no-doctest.
 */
describe("issue 23 item 10: the documented shell commands work on any ports and data folder (doc test)", () => {
  it.each(["README.md", "docs/job-api.md"])(
    "every sh block of %s runs in bash without an error",
    async (file) => {
      const blocks = shellBlocks(readFileSync(path.join(ROOT, file), "utf8"));
      const runnable = blocks.filter((b) => b.run);
      expect(runnable.length).toBeGreaterThan(0);
      const workspace = docWorkspace();
      // What a reader's second shell has: the data folder they started with, none of the addresses.
      const unset = new Set(["DASHBOARD", "JOBAPI", "KUBECONFIG", "PORT", "JOBAPI_PORT"]);
      const env = {
        ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !unset.has(name))),
        BLASTPLANE_DATA_DIR: stack.dataDir,
        PATH: workspace.path,
      };
      try {
        for (const block of runnable) {
          const where = `${file}:${block.line}`;
          expect(block.code, `${where} names a fixed address`).not.toMatch(/127\.0\.0\.1:\d|localhost:\d|\.data\//);
          const run = await runBash(block.code, { cwd: workspace.cwd, env });
          expect(run.code, `${where} failed:\n${block.code}\n--- output:\n${run.output}`).toBe(0);
          expect(run.output, `${where} printed an error envelope`).not.toMatch(ERROR_ENVELOPE);
        }
      } finally {
        rmSync(workspace.cwd, { recursive: true, force: true });
      }
    },
    300_000,
  );
});

describe("job API: databases, conflicts and dependency failures", () => {
  it("adds a protein database with `npx blastplane db add` (makeblastdb, partitions) and searches it with blastp", async () => {
    const fasta = path.join(stack.dataDir, "proteins.fa");
    const residues = "ACDEFGHIKLMNPQRSTVWY";
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    const proteins = Array.from({ length: 40 }, () =>
      Array.from({ length: 300 }, () => residues[next() % 20]).join(""),
    );
    writeFileSync(fasta, proteins.map((p, i) => `>prot${i} synthetic protein ${i}\n${p}\n`).join(""));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        path.join(ROOT, "bin/blastplane.mjs"),
        "db",
        "add",
        "toy_prot",
        fasta,
        "--type",
        "prot",
        "--partitions",
        "3",
        "--json",
      ],
      {
        env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir },
      },
    );
    // --json: the release as one record (the text form is what the power-cut test reads).
    expect(JSON.parse(stdout)).toMatchObject({
      name: "toy_prot",
      type: "prot",
      version: expect.stringMatching(/^\d{4}(-\d{2}){5}$/),
      sequences: 40,
      letters: 12000,
      partitions: 3,
    });
    const dbs = (await (await api.get("/v1/databases")).json()) as {
      databases: { name: string; type: string; partitions: number }[];
    };
    expect(dbs.databases).toContainEqual(expect.objectContaining({ name: "toy_prot", type: "prot", partitions: 3 }));
    const query = `>q\n${proteins[12]?.slice(20, 220)}\n`;
    const { job_id } = await api.submit({
      program: "blastp",
      db: "toy_prot",
      query_fasta: query,
      execution_profile: "sharded",
      blast_options: { matrix: "blosum62" },
    });
    const done = await api.finished(job_id);
    expect(done.status).toBe("completed");
    expect(done.kubernetes).toEqual({ summary: { total: 3, succeeded: 3, failed: 0, active: 0 } });
    const xml = await (await api.get(`/v1/jobs/${job_id}/results?content=xml`)).text();
    expect(xml).toContain("prot12");
    // A nucleotide program against this protein database is refused.
    expect((await api.post("/v1/jobs", { program: "blastn", db: "toy_prot", query_fasta: ">q\nACGT" })).status).toBe(
      422,
    );
  });

  it("B-237 answers 409 when an idempotency key is reused for a different request while its job is active", async () => {
    const key = "conflict-key-1";
    const first = await api.post("/v1/jobs", {
      program: "tblastx",
      db: DEMO_DB,
      query_fasta: demoQueries(3, 1500, 80),
      idempotency_key: key,
    });
    expect(first.status).toBe(202);
    const { job_id } = (await first.json()) as { job_id: string };
    const conflict = await api.post("/v1/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1),
      idempotency_key: key,
    });
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({
      detail: expect.stringContaining("idempotency_key"),
      request_id: expect.any(String),
    });
    await api.del(`/v1/jobs/${job_id}`);
  });

  it("B-237 B-055 a key claimed by a submit still storing its job: the same request is told to retry (503), another is 409, a stale claim is taken over", async () => {
    const jobs = JobStore.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
    );
    const request = { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1, 300, 90) };
    const fp = fingerprint(request as Submission);
    // What a first submit leaves while it is still writing its job: the claim, and no job yet.
    const claimedNow = (key: string, at = new Date()) =>
      jobs.claimKey(key, { job_id: "inflight0000", fingerprint: fp, claimed_at: at.toISOString() });
    expect(await claimedNow("inflight-key-1")).toEqual({ claimed: true });

    const retry = await api.post("/v1/jobs", { ...request, idempotency_key: "inflight-key-1" });
    expect(retry.status).toBe(503);
    expect(retry.headers.get("retry-after")).toBe("2");
    expect(await retry.json()).toMatchObject({
      detail: expect.stringContaining("still being stored"),
      request_id: expect.any(String),
    });
    const other = await api.post("/v1/jobs", {
      ...request,
      query_fasta: demoQueries(1, 300, 91),
      idempotency_key: "inflight-key-1",
    });
    expect(other.status).toBe(409);

    // A claim whose submit died long ago (no job ever written) does not block the key for good.
    expect(await claimedNow("inflight-key-2", new Date(Date.now() - 5 * 60_000))).toEqual({ claimed: true });
    const takeover = await api.post("/v1/jobs", { ...request, idempotency_key: "inflight-key-2" });
    expect(takeover.status).toBe(202);
    const { job_id } = (await takeover.json()) as { job_id: string };
    expect((await api.post("/v1/jobs", { ...request, idempotency_key: "inflight-key-2" })).status).toBe(200);
    await api.finished(job_id);
  });

  it("B-243 B-241 B-230 reports 503 on /v1/ready and, with a focused message, for work needing storage once storage is unreachable", async () => {
    const children = readFileSync(`/proc/${stack.info.pid}/task/${stack.info.pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    const azurite = children.find((pid) => cmdline(pid).includes("azurite"));
    expect(azurite).toBeDefined();
    process.kill(azurite as number, "SIGKILL");
    // SIGKILL is delivered, not done: until the process is gone its sockets still answer.
    await eventually(async () => (alive(azurite as number) ? undefined : true), 10_000, 20);
    // Readiness is served from a check up to READINESS_MAX_AGE_MS old, so the first reads after the
    // kill may still say ready; the next check (a refused connection fails at once) says not ready.
    const ready = await eventually(
      async () => {
        const answer = await fetch(`${api.base}/v1/ready`);
        if (answer.status === 200) return void (await answer.body?.cancel());
        return answer;
      },
      READINESS_MAX_AGE_MS + 7000,
      100,
    );
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      detail: expect.stringContaining("storage"),
      checks: { storage: "unavailable" },
    });
    const status = await api.get(`/v1/jobs/${completedJobId}/status`);
    expect(status.status).toBe(503);
    expect(status.headers.get("retry-after")).toBe("5");
    // A handled failure gets a focused message, not the catch-all text.
    expect(await status.json()).toEqual({
      detail: "a dependency (storage or the job API) is unreachable; retry shortly",
      request_id: expect.any(String),
    });
  });
});

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}
