import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readApiToken } from "../support/jobapi-client.js";
import { mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { childPids } from "../support/processes.js";

/**
 * Issue 23's done-when at full size (an opt-in deep run; `npm test` does not include test/deep):
 * a real search of LARGE_SEARCH_QUERIES (default 1,440) 16S queries — the demo FASTA's 480
 * sequences, copied under new names — against the demo database, submitted through the dashboard.
 * It completes; the results page's data (the query list, query 1,200's hits, one hit's alignments)
 * is served a page at a time; and the result downloads through the dashboard byte-identical to the
 * job API's, while the stack's processes grow by less than LARGE_SEARCH_MEMORY_MB.
 *
 *   npx vitest run --config test/deep/vitest.config.ts
 *   LARGE_SEARCH_QUERIES=144 npx vitest run --config test/deep/vitest.config.ts   # a quick check
 *
 * Timings (submit to completed, each page read, each download) are printed, not asserted:
 * performance belongs in bench/ (docs/test-deep-runs.md records runs).
 */
const QUERIES = positive("LARGE_SEARCH_QUERIES", 1440);
const PROFILE = process.env.LARGE_SEARCH_PROFILE === "sharded" ? "sharded" : "standard";
const DEADLINE_MS = positive("LARGE_SEARCH_MINUTES", 90) * 60_000;
const MEMORY_BOUND_BYTES = positive("LARGE_SEARCH_MEMORY_MB", 512) * 1024 * 1024;
const DOWNLOADS = (process.env.LARGE_SEARCH_DOWNLOADS ?? "tabular,xml").split(",").map((c) => c.trim());

function positive(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!(value > 0)) throw new Error(`${name} must be a positive number, got ${process.env[name]}`);
  return value;
}

/** `count` 16S queries: the demo FASTA's sequences in order, copied under new names as often as needed. */
function queries(count: number): string {
  const records = readFileSync(`${ROOT}/local/demo/16s-rrna-demo.fasta`, "utf8")
    .split(/^>/m)
    .filter((r) => r.trim() !== "");
  return Array.from({ length: count }, (_, i) => {
    const [header = "", ...lines] = (records[i % records.length] ?? "").split("\n");
    const copy = Math.floor(i / records.length);
    return `>q${i + 1}_c${copy}_${header.split(/\s/)[0]} ${header.replace(/^\S+\s*/, "")}\n${lines.join("\n").trim()}\n`;
  }).join("");
}

/** Resident memory of a process and all its descendants (bytes), from /proc. */
function treeRss(pid: number): number {
  let rss = 0;
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    rss += Number(match?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
  for (const child of childPids(pid)) rss += treeRss(child);
  return rss;
}

/** Reads a response body to its end: its SHA-256, its length and how long it took. */
async function digest(res: Response): Promise<{ sha256: string; length: number; ms: number }> {
  const started = Date.now();
  const hash = createHash("sha256");
  let length = 0;
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    hash.update(value);
    length += value.length;
  }
  return { sha256: hash.digest("hex"), length, ms: Date.now() - started };
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

let stack: TestStack;
let reader: string;
let jobId: string;
let jobApiJobId: string;

const dashboard = (path: string) =>
  fetch(`${stack.info.functions_url}/api${path}`, { headers: { Authorization: `Bearer ${reader}` } });

beforeAll(async () => {
  stack = await startStack({ env: { JOB_POLL_INTERVAL_SECONDS: "5" } });
  reader = await mintToken(stack, "Reader");
}, 300_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe(`issue 23 done-when: a ${QUERIES}-query search (${PROFILE}), 1,440 by default`, () => {
  it(
    "completes, and reports the result's size",
    async () => {
      const contributor = await mintToken(stack, "Contributor");
      const fasta = queries(QUERIES);
      const started = Date.now();
      const submitted = await fetch(`${stack.info.functions_url}/api/blast/jobs`, {
        method: "POST",
        headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          program: "blastn",
          db: "16s_rrna_demo",
          query_fasta: fasta,
          execution_profile: PROFILE,
          title: `${QUERIES} 16S queries`,
        }),
      });
      expect(submitted.status).toBe(200);
      jobId = ((await submitted.json()) as { job_id: string }).job_id;
      console.log(`submitted ${jobId}: ${QUERIES} queries, ${mb(Buffer.byteLength(fasta))} of FASTA`);
      let last = "";
      for (;;) {
        const job = (await (await dashboard(`/blast/jobs/${jobId}`)).json()) as {
          status: string;
          openapi_job_id: string | null;
          storing?: { stored_bytes?: number } | null;
          result_bytes?: { xml: number; gzip: number } | null;
          error: string;
        };
        const line = `${job.status}${job.storing ? `, storing ${JSON.stringify(job.storing)}` : ""}`;
        if (line !== last) console.log(`${((Date.now() - started) / 1000).toFixed(0)} s: ${line}`);
        last = line;
        expect(["failed", "cancelled"], job.error).not.toContain(job.status);
        if (job.status === "completed") {
          jobApiJobId = String(job.openapi_job_id);
          expect(job.result_bytes?.xml).toBeGreaterThan(0);
          console.log(
            `completed in ${((Date.now() - started) / 1000).toFixed(0)} s: XML ${mb(job.result_bytes?.xml ?? 0)}, stored ${mb(job.result_bytes?.gzip ?? 0)}`,
          );
          return;
        }
        if (Date.now() - started > DEADLINE_MS) throw new Error(`not completed after ${DEADLINE_MS / 60_000} minutes`);
        await new Promise((resolve) => setTimeout(resolve, 5000));
      }
    },
    DEADLINE_MS + 60_000,
  );

  it("the results page's data is served a page at a time: the query list, query 1,200's hits and one hit's alignments", async () => {
    const n = Math.min(1200, QUERIES);
    const read = async (path: string) => {
      const started = Date.now();
      const res = await dashboard(path);
      const text = await res.text();
      console.log(`${path}: ${res.status}, ${text.length} bytes, ${Date.now() - started} ms`);
      expect(res.status, text.slice(0, 300)).toBe(200);
      return JSON.parse(text) as Record<string, unknown>;
    };
    const first = await read(`/blast/jobs/${jobId}/results/queries?offset=0&limit=10`);
    expect(first.total).toBe(QUERIES);
    console.log(`the whole XML: ${mb(Number(first.xml_bytes))}, stored ${mb(Number(first.stored_bytes))}`);
    const around = await read(`/blast/jobs/${jobId}/results/queries?offset=${n - 10}&limit=10`);
    const listed = around.queries as { n: number; hits: number }[];
    expect(listed.map((q) => q.n).at(-1)).toBe(n);
    const hits = await read(`/blast/jobs/${jobId}/results/queries/${n}/hits?offset=0&limit=50`);
    expect(Number(hits.total)).toBeGreaterThan(0);
    const detail = await read(`/blast/jobs/${jobId}/results/queries/${n}/hits/1`);
    expect((detail.hsp_list as { midline: string }[])[0]?.midline.length).toBeGreaterThan(0);
    // A page is kilobytes, whatever the result's size.
    for (const page of [first, around, hits, detail]) expect(JSON.stringify(page).length).toBeLessThan(1024 * 1024);
  }, 300_000);

  for (const content of DOWNLOADS) {
    it(`downloads ${content} through the dashboard byte-identical to the job API's, with the stack's memory bounded`, async () => {
      const direct = await fetch(`${stack.info.jobapi_url}/v1/jobs/${jobApiJobId}/results?content=${content}`, {
        headers: { "X-SVC-API-Token": readApiToken(stack) },
      });
      expect(direct.status).toBe(200);
      const fromJobApi = await digest(direct);

      const pid = stack.process.pid as number;
      const before = treeRss(pid);
      let peak = before;
      const sampler = setInterval(() => {
        peak = Math.max(peak, treeRss(pid));
      }, 250);
      let throughDashboard: Awaited<ReturnType<typeof digest>>;
      try {
        const res = await dashboard(`/blast/jobs/${jobId}/results?content=${content}`);
        expect(res.status).toBe(200);
        throughDashboard = await digest(res);
      } finally {
        clearInterval(sampler);
      }
      console.log(
        `${content}: ${mb(throughDashboard.length)}; job API ${fromJobApi.ms} ms, dashboard ${throughDashboard.ms} ms; ` +
          `stack memory ${mb(before)} → peak ${mb(peak)} (+${mb(peak - before)})`,
      );
      expect({ sha256: throughDashboard.sha256, length: throughDashboard.length }).toEqual({
        sha256: fromJobApi.sha256,
        length: fromJobApi.length,
      });
      expect(peak - before).toBeLessThan(MEMORY_BOUND_BYTES);
    }, 3_600_000);
  }
});
