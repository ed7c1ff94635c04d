import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { createGzip } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArtifactStore, MERGED_ARTIFACT } from "../../jobapi/jobs/artifact-store.js";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { DEMO_DB, demoQueries, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";
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
  let stack: TestStack;
  let reader: string;
  let dashboardJobId: string;
  let jobApiJobId: string;
  let expected: { sha256: string; length: number };

  const download = (content: string) =>
    fetch(`${stack.info.functions_url}/api/blast/jobs/${dashboardJobId}/results?content=${content}`, {
      headers: { Authorization: `Bearer ${reader}` },
    });

  beforeAll(async () => {
    stack = await startStack({
      env: { JOB_POLL_INTERVAL_SECONDS: "1", JOBAPI_TIMEOUT_MS: String(CALL_TIMEOUT_MS) },
    });
    reader = await mintToken(stack, "Reader");
    const contributor = await mintToken(stack, "Contributor");
    const base = `${stack.info.functions_url}/api`;
    const submitted = await fetch(`${base}/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
      body: JSON.stringify({ program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1), title: "large result" }),
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

  afterAll(async () => {
    await stack?.stop();
    stack?.cleanup();
  });

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
