import { XMLValidator } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";

interface Envelope {
  job_id: string;
  job_id_kind: string;
  status: string;
  operation: { operation_id: string; [k: string]: unknown };
  operation_status_url: string;
  target: unknown;
  admission: unknown;
  meta: { request_id: string };
}

interface JobView {
  job_id: string;
  status: string;
  openapi_job_id: string | null;
  status_times?: Record<string, string>;
  [k: string]: unknown;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const FAST_POLL = { JOB_POLL_INTERVAL_SECONDS: "1" };

function dashboard(stack: TestStack) {
  const base = `${stack.info.functions_url}/api`;
  const call = async (token: string | undefined, method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, {
      method,
      headers: {
        ...(token ? { Authorization: `Bearer ${token}` } : {}),
        ...(body ? { "Content-Type": "application/json" } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  return {
    call,
    async operationDone(token: string, operationId: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
      return eventually(
        async () => {
          const op = (await (await call(token, "GET", `/operations/${operationId}`)).json()) as Record<string, unknown>;
          return ["succeeded", "failed", "cancelled"].includes(String(op.state)) ? op : undefined;
        },
        timeoutMs,
        200,
      );
    },
  };
}

/*
 * One stack for the file's ordinary tests, kept on disk (not in memory) with one shard at a time, so
 * that its last test can kill it with SIGKILL mid-poll and restart it on the same data folder. The
 * cancel that arrives after the job finished needs polls far apart, so it has a stack of its own.
 */
const STACK_ENV = { ...FAST_POLL, JOBAPI_SHARD_CONCURRENCY: "1" };

describe("dashboard jobs through the submit orchestration", () => {
  let stack: TestStack;
  /** The stack restarted on `stack`'s data folder by the kill -9 test. */
  let restarted: TestStack | undefined;
  let d: ReturnType<typeof dashboard>;
  let contributor: string;
  let reader: string;

  beforeAll(async () => {
    stack = await startStack({ inMemory: false, env: STACK_ENV });
    d = dashboard(stack);
    contributor = await mintToken(stack, "Contributor", { name: "Cora" });
    reader = await mintToken(stack, "Reader");
  });

  afterAll(async () => {
    await restarted?.stop();
    await stack?.stop();
    stack?.cleanup();
  });

  it("B-169 B-153 B-167 B-168 B-170 B-035 B-008 B-007 B-105 B-106 B-107 B-108 B-109 B-110 B-111 B-112 B-113 B-114 B-115 B-116 B-117 B-119 B-120 B-121 B-123 B-018 B-200 submits, polls the operation to succeeded, reads the job and downloads XML", async () => {
    const res = await d.call(contributor, "POST", "/blast/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(2),
      options: { evalue: 1e-5 },
      title: "two 16S queries",
    });
    expect(res.status).toBe(200);
    const env = (await res.json()) as Envelope;
    expect(env.job_id).toMatch(UUID);
    expect(env.job_id_kind).toBe("dashboard");
    expect(env.status).toBe("submitting");
    expect(env.operation).toMatchObject({
      operation_id: expect.stringMatching(/^op-[0-9a-f]{32}$/),
      operation_type: "blast.submit",
      state: "queued",
      poll_after_seconds: 1,
      links: { self: `/api/operations/${env.operation.operation_id}` },
    });
    // The self link polls the operation.
    const self = await fetch(`${stack.info.functions_url}${String((env.operation.links as { self: string }).self)}`, {
      headers: { Authorization: `Bearer ${reader}` },
    });
    expect(self.status).toBe(200);
    expect(await self.json()).toMatchObject({
      operation_id: env.operation.operation_id,
      operation_type: "blast.submit",
    });
    expect(env.operation_status_url).toBe(`/api/operations/${env.operation.operation_id}`);
    expect(env.target).toEqual({
      resource_type: "blast_job",
      job_id_kind: "dashboard",
      dashboard_job_id: env.job_id,
      openapi_job_id: null,
    });
    expect(env.admission).toMatchObject({ decision: "accepted", reason: expect.any(String) });
    expect(env.meta.request_id).toEqual(expect.any(String));
    expect(env.meta.request_id).toBe(res.headers.get("x-request-id"));

    const op = await d.operationDone(contributor, env.operation.operation_id);
    expect(op).toMatchObject({ state: "succeeded", poll_after_seconds: 0, operation_type: "blast.submit" });
    // The target's dashboard id works on the dashboard's job route.
    const target = env.target as { dashboard_job_id: string };
    const read = await d.call(reader, "GET", `/blast/jobs/${target.dashboard_job_id}`);
    expect(read.status).toBe(200);
    const job = (await read.json()) as JobView;
    expect(job).toMatchObject({
      job_id: env.job_id,
      status: "completed",
      title: "two 16S queries",
      created_by: { name: "Cora" },
      error: "",
    });
    // The envelope only adds to the job's own fields: every field the job route shows is there too.
    expect(Object.keys(env)).toEqual(expect.arrayContaining(Object.keys(job)));
    expect(job.openapi_job_id).toMatch(/^[a-z0-9]{12}$/);
    const xml = await d.call(reader, "GET", `/blast/jobs/${env.job_id}/results?content=xml`);
    expect(xml.status).toBe(200);
    expect(xml.headers.get("content-type")).toBe("application/xml");
    // Issue 23 item 9: saved as <title or job>-<kind>.<ext>, whichever content.
    expect(xml.headers.get("content-disposition")).toBe('attachment; filename="two-16S-queries-results.xml"');
    // Issue 23 item 8: the job keeps when it reached each status (the timeline after a reload).
    expect(job.status_times?.submitting).toBe(job.created_at);
    expect(job.status_times?.completed).toEqual(expect.any(String));
    const text = await xml.text();
    expect(XMLValidator.validate(text)).toBe(true);
    expect((text.match(/<Iteration>/g) ?? []).length).toBe(2);
    // Issue 23: a single-use link the browser downloads by itself, no Authorization header.
    const ticket = async (content: string) => {
      const res = await d.call(reader, "POST", `/blast/jobs/${env.job_id}/results/ticket?content=${content}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("cache-control")).toBe("no-store");
      return `${stack.info.functions_url}${((await res.json()) as { download_url: string }).download_url}`;
    };
    const link = await ticket("xml");
    expect(link).not.toContain(reader);
    const linked = await fetch(link);
    expect(linked.status).toBe(200);
    expect(linked.headers.get("content-disposition")).toBe('attachment; filename="two-16S-queries-results.xml"');
    expect(await linked.text()).toBe(text);
    const again = await fetch(link);
    expect(again.status).toBe(401);
    expect(await again.json()).toMatchObject({
      detail: expect.stringContaining("used"),
      request_id: expect.any(String),
    });
    const tabularLink = await ticket("tabular");
    expect((await fetch(tabularLink.replace("content=tabular", "content=xml"))).status).toBe(401);
    expect((await fetch(link.replace(/ticket=[^&]+/, "ticket="))).status).toBe(401);
    expect(
      (await d.call(reader, "POST", "/blast/jobs/00000000-0000-4000-8000-000000000000/results/ticket")).status,
    ).toBe(404);
    const list = (await (await d.call(reader, "GET", "/blast/jobs?status=completed")).json()) as {
      jobs: { job_id: string }[];
      total: number;
    };
    expect(list.jobs.map((j) => j.job_id)).toContain(env.job_id);
  });

  it("refuses a Reader's submit with 403 and a missing token with 401, before any work", async () => {
    const before = (await (await d.call(reader, "GET", "/blast/jobs")).json()) as { total: number };
    const body = { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1) };
    const forbidden = await d.call(reader, "POST", "/blast/jobs", body);
    expect(forbidden.status).toBe(403);
    expect(await forbidden.json()).toMatchObject({
      detail: expect.stringContaining("Contributor"),
      request_id: expect.any(String),
    });
    expect((await d.call(undefined, "POST", "/blast/jobs", body)).status).toBe(401);
    const after = (await (await d.call(reader, "GET", "/blast/jobs")).json()) as { total: number };
    expect(after.total).toBe(before.total);
  });

  it("answers 400 for an OpenAPI job id on a dashboard route, 404 for an unknown UUID and operation, 422 for a bad body", async () => {
    const wrongKind = await d.call(reader, "GET", "/blast/jobs/abcdefghijkl");
    expect(wrongKind.status).toBe(400);
    expect(((await wrongKind.json()) as { detail: string }).detail).toContain("OpenAPI job id");
    expect((await d.call(reader, "GET", `/blast/jobs/${crypto.randomUUID()}`)).status).toBe(404);
    expect((await d.call(reader, "GET", `/operations/op-${"0".repeat(32)}`)).status).toBe(404);
    expect((await d.call(reader, "GET", "/operations/nope")).status).toBe(400);
    const bad = await d.call(contributor, "POST", "/blast/jobs", {
      program: "blastz",
      db: DEMO_DB,
      query_fasta: ">q\nACGT",
      options: { bogus: 1 },
    });
    expect(bad.status).toBe(422);
    const detail = ((await bad.json()) as { detail: { loc: unknown[] }[] }).detail;
    expect(detail.map((x) => x.loc.join("."))).toEqual(expect.arrayContaining(["body.program", "body.options.bogus"]));
  });

  it("returns the same dashboard job for a retried submit with the same idempotency key", async () => {
    const body = {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 400, 3),
      idempotency_key: "dash-retry-1",
    };
    const a = (await (await d.call(contributor, "POST", "/blast/jobs", body)).json()) as {
      job_id: string;
      operation: { operation_id: string };
    };
    const b = (await (await d.call(contributor, "POST", "/blast/jobs", body)).json()) as {
      job_id: string;
      operation: { operation_id: string };
    };
    expect(b.job_id).toBe(a.job_id);
    expect(b.operation.operation_id).toBe(a.operation.operation_id);
    await d.operationDone(contributor, a.operation.operation_id);
  });

  it("B-237 B-021 refuses the same idempotency key with another query (409) and keeps the first request's search", async () => {
    const key = "dash-retry-other-query";
    const first = await d.call(contributor, "POST", "/blast/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 400, 4),
      idempotency_key: key,
    });
    expect(first.status).toBe(200);
    const a = (await first.json()) as { job_id: string; operation: { operation_id: string } };
    const other = await d.call(contributor, "POST", "/blast/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(2, 400, 5),
      idempotency_key: key,
    });
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({
      detail: expect.stringContaining("idempotency_key"),
      request_id: expect.any(String),
    });
    // The search that runs is the first one: one query, not the two of the refused retry.
    expect((await d.operationDone(contributor, a.operation.operation_id)).state).toBe("succeeded");
    const job = (await (await d.call(reader, "GET", `/blast/jobs/${a.job_id}`)).json()) as {
      query_count: number;
      status: string;
    };
    expect(job).toMatchObject({ query_count: 1, status: "completed" });
    const xml = await (await d.call(reader, "GET", `/blast/jobs/${a.job_id}/results?content=xml`)).text();
    expect((xml.match(/<Iteration>/g) ?? []).length).toBe(1);
  });

  it("B-021 B-054 B-055 concurrent identical submits with one key make one job and one operation", async () => {
    const body = {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 400, 6),
      idempotency_key: "dash-concurrent-1",
    };
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => d.call(contributor, "POST", "/blast/jobs", body)),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(8).fill(200));
    const envelopes = (await Promise.all(answers.map((r) => r.json()))) as {
      job_id: string;
      operation: { operation_id: string };
    }[];
    expect(new Set(envelopes.map((e) => e.job_id)).size).toBe(1);
    expect(new Set(envelopes.map((e) => e.operation.operation_id)).size).toBe(1);
    expect((await d.operationDone(contributor, envelopes[0]?.operation.operation_id as string)).state).toBe(
      "succeeded",
    );
  });

  it("a retry starts the orchestration when the first attempt stored the job but its orchestration is gone", async () => {
    const body = {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(1, 400, 7),
      idempotency_key: "dash-never-started",
    };
    const a = (await (await d.call(contributor, "POST", "/blast/jobs", body)).json()) as {
      job_id: string;
      operation: { operation_id: string };
    };
    // What a start that failed after the job was stored leaves behind: the job, and no instance.
    const rpc = stack.info.durable_rpc_url;
    await fetch(`${rpc}instances/${a.operation.operation_id}/terminate?reason=test`, { method: "POST" });
    await eventually(
      async () =>
        (await fetch(`${rpc}instances/${a.operation.operation_id}`, { method: "DELETE" })).status === 200
          ? true
          : undefined,
      10_000,
    );
    expect((await d.call(reader, "GET", `/operations/${a.operation.operation_id}`)).status).toBe(404);

    const retry = await d.call(contributor, "POST", "/blast/jobs", body);
    expect(retry.status).toBe(200);
    const b = (await retry.json()) as { job_id: string; operation: { operation_id: string } };
    expect(b.job_id).toBe(a.job_id);
    expect(b.operation.operation_id).toBe(a.operation.operation_id);
    expect((await d.operationDone(contributor, a.operation.operation_id)).state).toBe("succeeded");
    expect(((await (await d.call(reader, "GET", `/blast/jobs/${a.job_id}`)).json()) as { status: string }).status).toBe(
      "completed",
    );
  });

  it("B-014 B-152 B-118 B-122 cancels through the orchestration: the operation ends cancelled and the job API job stops", async () => {
    const res = await d.call(contributor, "POST", "/blast/jobs", {
      program: "tblastx",
      db: DEMO_DB,
      query_fasta: demoQueries(4, 1500, 60),
      execution_profile: "sharded",
    });
    const env = (await res.json()) as { job_id: string; operation: { operation_id: string } };
    await eventually(async () => {
      const j = (await (await d.call(reader, "GET", `/blast/jobs/${env.job_id}`)).json()) as {
        openapi_job_id: string | null;
      };
      return j.openapi_job_id ? true : undefined;
    }, 20_000);
    expect((await d.call(reader, "DELETE", `/blast/jobs/${env.job_id}`)).status).toBe(403);
    const del = await d.call(contributor, "DELETE", `/blast/jobs/${env.job_id}`);
    expect(del.status).toBe(200);
    // Once the job reached the job API, the envelope's target names its job-API id.
    const target = ((await del.json()) as { target: { openapi_job_id: string } }).target;
    expect(target.openapi_job_id).toMatch(/^[a-z0-9]{12}$/);
    const op = await d.operationDone(contributor, env.operation.operation_id);
    expect(op.state).toBe("cancelled");
    const job = (await (await d.call(reader, "GET", `/blast/jobs/${env.job_id}`)).json()) as {
      status: string;
      openapi_job_id: string;
    };
    expect(job.status).toBe("cancelled");
    expect(job.openapi_job_id).toBe(target.openapi_job_id);
    // That id works on the job API's routes.
    const api = jobApi(stack, readApiToken(stack));
    const upstream = await api.get(`/v1/jobs/${target.openapi_job_id}/status`);
    expect(upstream.status).toBe(200);
    expect(((await upstream.json()) as { status: string }).status).toBe("cancelled");
  });

  it("issue 23: result pages through the dashboard (summaries, a query's hits, a hit's alignment) and their refusals", async () => {
    const res = await d.call(contributor, "POST", "/blast/jobs", {
      program: "blastn",
      db: DEMO_DB,
      query_fasta: demoQueries(3),
      options: { evalue: 1e-5 },
    });
    const env = (await res.json()) as Envelope;
    await d.operationDone(contributor, env.operation.operation_id);
    const base = `/blast/jobs/${env.job_id}/results/queries`;
    const queries = (await (await d.call(reader, "GET", `${base}?limit=2`)).json()) as {
      total: number;
      next_offset: number;
      xml_bytes: number;
      queries: { n: number; hits: number }[];
    };
    expect(queries).toMatchObject({ total: 3, next_offset: 2, program: "blastn" });
    expect(queries.xml_bytes).toBeGreaterThan(0);
    const hits = (await (await d.call(reader, "GET", `${base}/3/hits?limit=5`)).json()) as {
      query: { n: number };
      hits: { num: number; accession: string; title: string }[];
    };
    expect(hits.query.n).toBe(3);
    expect(hits.hits[0]).toMatchObject({ num: 1, accession: expect.any(String), title: expect.any(String) });
    const hit = (await (await d.call(reader, "GET", `${base}/3/hits/1`)).json()) as {
      hsp_list: { qseq: string; midline: string; hseq: string }[];
    };
    expect(hit.hsp_list[0]?.midline.length).toBe(hit.hsp_list[0]?.qseq.length);
    for (const [path, status, detail] of [
      [`${base}?limit=501`, 400, /'limit'/],
      [`${base}?offset=-3`, 400, /'offset'/],
      [`${base}/0/hits`, 400, /'n'/],
      [`${base}/1/hits/x`, 400, /'k'/],
      [`${base}/4/hits`, 404, /query 4 does not exist/],
      [`${base}/1/hits/999`, 404, /hit 999 of query 1 does not exist/],
      ["/blast/jobs/00000000-0000-4000-8000-000000000000/results/queries", 404, /./],
    ] as const) {
      const refused = await d.call(reader, "GET", path);
      expect(refused.status, path).toBe(status);
      const body = (await refused.json()) as { detail: unknown; request_id: string };
      expect(JSON.stringify(body.detail), path).toMatch(detail);
      expect(body.request_id).toEqual(expect.any(String));
    }
    const anonymous = await fetch(`${stack.info.functions_url}/api${base}`);
    expect(anonymous.status).toBe(401);
  });

  // Last: it kills the file's stack and restarts it on the same data folder.
  it("dashboard submit survives kill -9 while polling: reaches the job API's terminal state after restart with no duplicate job-API submission", async () => {
    const api1 = jobApi(stack, readApiToken(stack));
    const earlier = ((await (await api1.get("/v1/jobs?limit=500")).json()) as { jobs: { job_id: string }[] }).jobs;
    const env = (await (
      await d.call(contributor, "POST", "/blast/jobs", {
        program: "tblastx",
        db: DEMO_DB,
        query_fasta: demoQueries(3, 1500, 70),
      })
    ).json()) as {
      job_id: string;
      operation: { operation_id: string };
    };
    // Wait until the orchestration is polling a submitted job, then kill everything.
    await eventually(async () => {
      const j = (await (await d.call(reader, "GET", `/blast/jobs/${env.job_id}`)).json()) as {
        openapi_job_id: string | null;
      };
      return j.openapi_job_id ? true : undefined;
    }, 30_000);
    const children = childPids(stack.info.pid);
    await stack.kill();
    // Its children (Azurite, the Functions host, the job API) notice and stop; Azurite saves its
    // tables on the way out, and the restart must read what was saved.
    await eventually(async () => (children.every((pid) => !alive(pid)) ? true : undefined), 15_000);

    restarted = await startStack({ dataDir: stack.dataDir, inMemory: false, env: STACK_ENV });
    const token2 = await mintToken(restarted, "Contributor");
    const d2 = dashboard(restarted);
    const op = await d2.operationDone(token2, env.operation.operation_id, 120_000);
    expect(op.state).toBe("succeeded");
    const job = (await (await d2.call(token2, "GET", `/blast/jobs/${env.job_id}`)).json()) as {
      status: string;
      openapi_job_id: string;
    };
    expect(job.status).toBe("completed");
    // One job-API job more than before the submit: this one, submitted once.
    const api = jobApi(restarted, readApiToken(restarted));
    const all = (await (await api.get("/v1/jobs?limit=500")).json()) as { jobs: { job_id: string }[] };
    const known = new Set(earlier.map((j) => j.job_id));
    expect(all.jobs.filter((j) => !known.has(j.job_id)).map((j) => j.job_id)).toEqual([job.openapi_job_id]);
    expect(all.jobs).toHaveLength(earlier.length + 1);
  }, 240_000);
});

describe("dashboard cancel that arrives after the job finished", () => {
  it("B-014 B-152 keeps the finished job and its results: the operation succeeds and the job API job is not deleted", async () => {
    // Polls far apart: the job API finishes the job long before the orchestration looks again.
    const slow = await startStack({ env: { JOB_POLL_INTERVAL_SECONDS: "600" } });
    try {
      const token = await mintToken(slow, "Contributor");
      const d = dashboard(slow);
      const api = jobApi(slow, readApiToken(slow));
      const env = (await (
        await d.call(token, "POST", "/blast/jobs", {
          program: "blastn",
          db: DEMO_DB,
          query_fasta: demoQueries(1, 300, 80),
        })
      ).json()) as {
        job_id: string;
        operation: { operation_id: string };
      };
      const openapiJobId = await eventually(async () => {
        const j = (await (await d.call(token, "GET", `/blast/jobs/${env.job_id}`)).json()) as {
          openapi_job_id: string | null;
        };
        return j.openapi_job_id ?? undefined;
      }, 20_000);
      expect((await api.finished(openapiJobId)).status).toBe("completed");
      // The dashboard has not polled yet, so it still offers the cancel.
      const before = (await (await d.call(token, "GET", `/blast/jobs/${env.job_id}`)).json()) as { status: string };
      expect(before.status).not.toBe("completed");
      expect((await d.call(token, "DELETE", `/blast/jobs/${env.job_id}`)).status).toBe(200);

      const op = await d.operationDone(token, env.operation.operation_id);
      expect(op.state).toBe("succeeded");
      const job = (await (await d.call(token, "GET", `/blast/jobs/${env.job_id}`)).json()) as { status: string };
      expect(job.status).toBe("completed");
      expect((await api.status(openapiJobId)).status).toBe("completed");
      const xml = await d.call(token, "GET", `/blast/jobs/${env.job_id}/results?content=xml`);
      expect(xml.status).toBe(200);
      expect(XMLValidator.validate(await xml.text())).toBe(true);
    } finally {
      await slow.stop();
      slow.cleanup();
    }
  }, 90_000);
});
