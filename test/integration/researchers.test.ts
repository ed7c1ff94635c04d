import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { createGzip } from "node:zlib";
import { XMLValidator } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactStore, MERGED_ARTIFACT } from "../../jobapi/jobs/artifact-store.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { DEMO_DB, demoQueries, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { jobApiPidOf } from "../support/processes.js";

/**
 * Issue 23, defect 1: large results downloaded through the dashboard. A real search runs, then its
 * merged result is replaced in storage by a large synthetic BLAST XML (BLAST itself would take
 * minutes to write one this size here); the job API and the dashboard stream it as they would any
 * result. `npm run bench` is not needed: the size is set by RESULT_BYTES below.
 */
const RESULT_BYTES = 96 * 1024 * 1024;
/** The dashboard's call timeout in this stack: the downloads below outlast it on purpose. */
const CALL_TIMEOUT_MS = 1500;

/*
 * Issue 23 (researchers first), one stack for the file. The job API is told its node has 180,000
 * bytes of memory and keeps no margin (as in the e2e suite): a standard search of the demo
 * database fails its memory pre-flight and a sharded one runs, so both outcomes are at hand.
 */
const STACK_ENV = {
  JOB_POLL_INTERVAL_SECONDS: "1",
  JOBAPI_NODE_MEMORY_BYTES: "180000",
  JOBAPI_MEMORY_MARGIN_BYTES: "0",
};

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ env: { ...STACK_ENV, JOBAPI_TIMEOUT_MS: String(CALL_TIMEOUT_MS) } });
}, 90_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

/** Runs `npx blastplane ARGS` against the stack; never rejects. */
function cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [path.join(ROOT, "bin/blastplane.mjs"), ...args],
      { env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}

describe("npx blastplane search, jobs, results (issue 23, item 7)", () => {
  it("search --sharded --wait --out saves the completed search's XML, with progress on stderr, and exits 0", async () => {
    const query = path.join(stack.dataDir, "q.fa");
    writeFileSync(query, demoQueries(2));
    const out = path.join(stack.dataDir, "results.xml");
    const run = await cli([
      "search",
      "--program",
      "blastn",
      "--db",
      DEMO_DB,
      "--query",
      query,
      "--sharded",
      "--title",
      "from the terminal",
      "--out",
      out,
    ]);
    expect(run).toMatchObject({ code: 0, stdout: "" });
    expect(run.stderr).toMatch(/^submitted [0-9a-f-]{36} \(blastn on 16s_rrna_demo\); web: http/m);
    expect(run.stderr).toMatch(/: completed/);
    expect(run.stderr).toContain(`results saved to ${out}`);
    const xml = readFileSync(out, "utf8");
    expect(XMLValidator.validate(xml)).toBe(true);
    expect((xml.match(/<Iteration>/g) ?? []).length).toBe(2);
    // Issue 23 defect 2 (in part): the job shows its result's size before any download.
    const jobId = /^submitted ([0-9a-f-]{36})/m.exec(run.stderr)?.[1];
    const jobs = JSON.parse((await cli(["jobs", "--json"])).stdout) as {
      job_id: string;
      result_bytes: { xml: number; gzip: number } | null;
    }[];
    const shown = jobs.find((j) => j.job_id === jobId);
    expect(shown?.result_bytes?.xml).toBe(readFileSync(out).length);
    expect(shown?.result_bytes?.gzip).toBeGreaterThan(0);
  }, 120_000);

  it("search from standard input prints the job id; jobs lists it; results writes its hit table once it completed", async () => {
    const run = await cli(
      ["search", "--program", "blastn", "--db", DEMO_DB, "--query", "-", "--sharded"],
      demoQueries(1),
    );
    expect(run.code).toBe(0);
    const jobId = run.stdout.trim();
    expect(jobId).toMatch(/^[0-9a-f-]{36}$/);
    const listed = await eventually(
      async () => {
        const jobs = JSON.parse((await cli(["jobs", "--json"])).stdout) as { job_id: string; status: string }[];
        return jobs.find((j) => j.job_id === jobId && j.status === "completed");
      },
      90_000,
      500,
    );
    expect(listed).toMatchObject({ job_id: jobId, status: "completed" });
    const table = await cli(["jobs", "--limit", "5"]);
    expect(table.stdout.split("\n")[0]).toMatch(/^JOB ID\s+STATUS\s+PROGRAM\s+DATABASE\s+CREATED\s+TITLE$/);
    expect(table.stdout).toMatch(new RegExp(`^${jobId}\\s+completed\\s+blastn\\s+16s_rrna_demo`, "m"));
    const results = await cli(["results", jobId, "--format", "tabular"]);
    expect(results.code).toBe(0);
    const rows = results.stdout.trim().split("\n");
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row.split("\t")).toHaveLength(12);
  }, 120_000);

  it("exit codes by outcome: 2 usage, 3 refused (with the field's reason), 4 the search failed (with why)", async () => {
    const query = path.join(stack.dataDir, "q1.fa");
    writeFileSync(query, demoQueries(1));
    const usage = await cli(["search", "--db", DEMO_DB, "--query", query]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--program must be one of");
    const refused = await cli(["search", "--program", "blastn", "--db", "no_such_db", "--query", query]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain("The service refused the request (422):");
    expect(refused.stderr).toContain("db: unknown database 'no_such_db'");
    // The standard profile needs the whole database in memory: this stack's node is too small.
    const failed = await cli(["search", "--program", "blastn", "--db", DEMO_DB, "--query", query, "--wait"]);
    expect(failed.code).toBe(4);
    expect(failed.stderr).toContain("The search failed:");
    expect(failed.stderr).toContain("memory pre-flight failed");
    const notDone = await cli(["results", "00000000-0000-4000-8000-000000000000"]);
    expect(notDone.code).toBe(3);
    expect((await cli(["search", "--help"])).stdout).toContain("blastplane search --program PROGRAM");
  }, 120_000);
});

/** A deterministic BLAST-XML-like document of about `bytes` bytes, produced while it is read. */
function syntheticXml(bytes: number): { stream: Readable; sha256: () => string; length: () => number } {
  const hash = createHash("sha256");
  let produced = 0;
  let hit = 0;
  let state = 0x2545f491;
  const next = () => {
    // xorshift32: some entropy per line, so gzip does not shrink it to nothing.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0).toString(16);
  };
  function* chunks(): Generator<Buffer> {
    const head = Buffer.from(
      '<?xml version="1.0"?>\n<BlastOutput>\n<BlastOutput_iterations>\n<Iteration>\n<Iteration_hits>\n',
    );
    hash.update(head);
    produced += head.length;
    yield head;
    while (produced < bytes) {
      const lines: string[] = [];
      for (let i = 0; i < 2000; i += 1) {
        hit += 1;
        lines.push(
          `<Hit><Hit_num>${hit}</Hit_num><Hit_id>gnl|BL_ORD_ID|${hit}</Hit_id><Hit_def>synthetic ${next()} ${next()}</Hit_def><Hit_len>${1400 + (hit % 97)}</Hit_len></Hit>\n`,
        );
      }
      const chunk = Buffer.from(lines.join(""));
      hash.update(chunk);
      produced += chunk.length;
      yield chunk;
    }
    const tail = Buffer.from("</Iteration_hits>\n</Iteration>\n</BlastOutput_iterations>\n</BlastOutput>\n");
    hash.update(tail);
    produced += tail.length;
    yield tail;
  }
  return { stream: Readable.from(chunks()), sha256: () => hash.digest("hex"), length: () => produced };
}

/** SHA-256 and length of a whole body; rejects when the body breaks off. */
async function digest(reader: ReadableStreamDefaultReader<Uint8Array>, first?: Uint8Array) {
  const hash = createHash("sha256");
  let length = 0;
  if (first) {
    hash.update(first);
    length += first.length;
  }
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { sha256: hash.digest("hex"), length };
    hash.update(value);
    length += value.length;
  }
}

describe("results downloads through the dashboard (issue 23, defect 1)", () => {
  let reader: string;
  let dashboardJobId: string;
  let jobApiJobId: string;
  let expected: { sha256: string; length: number };

  const download = (content: string) =>
    fetch(`${stack.info.functions_url}/api/blast/jobs/${dashboardJobId}/results?content=${content}`, {
      headers: { Authorization: `Bearer ${reader}` },
    });

  beforeAll(async () => {
    reader = await mintToken(stack, "Reader");
    const contributor = await mintToken(stack, "Contributor");
    const base = `${stack.info.functions_url}/api`;
    const submitted = await fetch(`${base}/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        program: "blastn",
        db: DEMO_DB,
        query_fasta: demoQueries(1),
        execution_profile: "sharded",
        title: "large result",
      }),
    });
    expect(submitted.status).toBe(200);
    dashboardJobId = ((await submitted.json()) as { job_id: string }).job_id;
    const job = await eventually(
      async () => {
        const view = (await (
          await fetch(`${base}/blast/jobs/${dashboardJobId}`, { headers: { Authorization: `Bearer ${reader}` } })
        ).json()) as { status: string; openapi_job_id: string | null };
        return view.status === "completed" ? view : undefined;
      },
      90_000,
      200,
    );
    jobApiJobId = String(job.openapi_job_id);
    // The large merged result, stored where the job API keeps it.
    const artifacts = ArtifactStore.fromConnectionString(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};` +
        `BlobEndpoint=${stack.info.blob_endpoint};TableEndpoint=${stack.info.table_endpoint};`,
    );
    const xml = syntheticXml(RESULT_BYTES);
    await artifacts.uploadStream(jobApiJobId, MERGED_ARTIFACT, xml.stream, { through: createGzip({ level: 1 }) });
    expected = { sha256: xml.sha256(), length: xml.length() };
  }, 180_000);

  it("B-008 B-024 B-102 a result that takes longer than the call timeout downloads through the dashboard byte-identical to the job API's", async () => {
    const direct = await fetch(`${stack.info.jobapi_url}/v1/jobs/${jobApiJobId}/results?content=xml`, {
      headers: { "X-SVC-API-Token": readApiToken(stack) },
    });
    expect(direct.status).toBe(200);
    const fromJobApi = await digest((direct.body as ReadableStream<Uint8Array>).getReader());
    expect(fromJobApi).toEqual(expected);

    const res = await download("xml");
    expect(res.status).toBe(200);
    const body = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await body.read();
    // The job API pauses mid-stream for longer than the dashboard's call timeout (as a large
    // result's storage reads and gunzip do): the download must wait for it, not be cut.
    const jobApiPid = jobApiPidOf(stack.process.pid as number);
    expect(jobApiPid).toBeDefined();
    process.kill(jobApiPid as number, "SIGSTOP");
    try {
      await new Promise((resolve) => setTimeout(resolve, 2 * CALL_TIMEOUT_MS + 500));
    } finally {
      process.kill(jobApiPid as number, "SIGCONT");
    }
    expect(await digest(body, first.value)).toEqual(expected);
  }, 120_000);

  it("B-008 a download whose job API dies mid-way is an error at the client, never a short file that ends cleanly", async () => {
    const res = await download("xml");
    expect(res.status).toBe(200);
    const body = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await body.read();
    expect(first.done).toBe(false);
    const jobApiPid = jobApiPidOf(stack.process.pid as number);
    expect(jobApiPid).toBeDefined();
    process.kill(jobApiPid as number, "SIGKILL");
    const outcome = await digest(body, first.value).then(
      (whole) => ({ ended: whole }),
      (error: unknown) => ({ error }),
    );
    expect(outcome).toEqual({ error: expect.any(Error) });
  }, 120_000);
});
