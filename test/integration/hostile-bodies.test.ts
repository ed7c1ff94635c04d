import { readFileSync } from "node:fs";
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
let token: string;

beforeAll(async () => {
  stack = await startStack();
  token = await mintToken(stack, "Contributor");
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

const MiB = 1024 * 1024;

interface ChunkedOutcome {
  status: number;
  body: string;
  /** Bytes the client had written when the answer arrived. */
  sentWhenAnswered: number;
}

/**
 * Uploads up to `maxBytes` with chunked framing (no Content-Length), a chunk at a time and only
 * as fast as the server reads, stopping as soon as the answer arrives.
 */
function chunkedUpload(url: string, method: string, maxBytes: number): Promise<ChunkedOutcome> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method,
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "Transfer-Encoding": "chunked" },
    });
    let sent = 0;
    let answered = false;
    const chunk = Buffer.alloc(256 * 1024, "a");
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
        sent += chunk.length;
        if (!req.write(sent === chunk.length ? Buffer.concat([Buffer.from('{"x":"'), chunk.subarray(6)]) : chunk)) {
          req.once("drain", pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    pump();
  });
}

describe("request bodies over the limit, whatever the framing", () => {
  it("B-227 B-126 PUT /api/workspace stops reading a chunked body at its limit and answers 413 in the envelope", async () => {
    const out = await chunkedUpload(`${stack.info.functions_url}/api/workspace`, "PUT", 96 * MiB);
    expect(out.status).toBe(413);
    expect(JSON.parse(out.body)).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    // Answered while the upload was still under way: the body was counted while read, not held whole.
    expect(out.sentWhenAnswered).toBeLessThan(32 * MiB);
  });

  it("B-227 B-126 POST /api/blast/jobs stops reading a chunked body at its limit and answers 413 in the envelope", async () => {
    const out = await chunkedUpload(`${stack.info.functions_url}/api/blast/jobs`, "POST", 192 * MiB);
    expect(out.status).toBe(413);
    expect(JSON.parse(out.body)).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    expect(out.sentWhenAnswered).toBeLessThan(64 * MiB);
  });

  it("B-164 a route that reads no body answers without taking the rest of a huge upload", async () => {
    const out = await chunkedUpload(
      `${stack.info.functions_url}/api/health/queue/enqueue-noop?message=hi`,
      "POST",
      192 * MiB,
    );
    expect([200, 429]).toContain(out.status);
    expect(out.sentWhenAnswered).toBeLessThan(64 * MiB);
  });

  it("B-227 the host stays healthy after refusing oversized bodies", async () => {
    const res = await fetch(`${stack.info.functions_url}/api/health`);
    expect(res.status).toBe(200);
  });
});

describe("dashboard submits the job API could never run are refused up front", () => {
  async function submit(body: Record<string, unknown>): Promise<Response> {
    return fetch(`${stack.info.functions_url}/api/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  it("B-238 B-125 an unknown database is 422 naming body.db, not an accepted job that fails later", async () => {
    const res = await submit({ program: "blastn", db: "no_such_database", query_fasta: ">q1\nACGTACGTACGTACGT\n" });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; msg: string; type: string }[]; request_id: string };
    expect(body.detail).toEqual([
      { loc: ["body", "db"], msg: "unknown database 'no_such_database' (see GET /v1/databases)", type: "value_error" },
    ]);
    expect(body.request_id).toEqual(expect.any(String));
  });

  it("B-238 a protein program against the nucleotide demo database is 422 naming body.db", async () => {
    const res = await submit({ program: "blastp", db: "16s_rrna_demo", query_fasta: ">p1\nMKTAYIAKQR\n" });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; msg: string }[] };
    expect(body.detail[0]?.loc).toEqual(["body", "db"]);
    expect(body.detail[0]?.msg).toContain("protein database");
  });

  it("B-238 a header BLAST cannot write (non-ASCII) is 422 naming the record on the dashboard too", async () => {
    const res = await submit({
      program: "blastn",
      db: "16s_rrna_demo",
      query_fasta: ">ok\nACGTACGTAC\n>\u00e9t\u00e9\nACGTACGTAC\n",
    });
    expect(res.status).toBe(422);
    const body = (await res.json()) as { detail: { loc: unknown[]; msg: string }[] };
    expect(body.detail[0]?.loc).toEqual(["body", "query_fasta", 1]);
    expect(body.detail[0]?.msg).toContain("non-ASCII character U+00E9");
  });
});

describe("the local durable management API", () => {
  /** Local addresses listening on `port`, from /proc/net/tcp{,6} (hex, as the kernel writes them). */
  function listeners(port: number): string[] {
    const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
    const out: string[] = [];
    for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
      let text = "";
      try {
        text = readFileSync(file, "utf8");
      } catch {
        continue;
      }
      for (const line of text.split("\n").slice(1)) {
        const [, local, , state] = line.trim().split(/\s+/);
        if (state === "0A" && local?.endsWith(`:${hexPort}`)) out.push(local.slice(0, -5));
      }
    }
    return out;
  }

  it("B-196 refuses calls without its key, and listens on loopback only", async () => {
    const keyed = new URL(stack.info.durable_rpc_url);
    const key = keyed.pathname.split("/").filter(Boolean).at(-1) as string;
    const unkeyedBase = `${keyed.origin}${keyed.pathname.slice(0, -(key.length + 1))}`;
    expect((await fetch(`${unkeyedBase}instances/`)).status).toBe(401);
    expect((await fetch(`${unkeyedBase}instances/?code=not-the-key`)).status).toBe(401);
    expect((await fetch(`${unkeyedBase}orchestrators/anything`, { method: "POST", body: "{}" })).status).toBe(401);
    expect((await fetch(`${unkeyedBase}instances/?code=${key}`)).status).toBe(200);
    expect((await fetch(`${unkeyedBase}instances/`, { headers: { "x-functions-key": key } })).status).toBe(200);
    expect((await fetch(`${stack.info.durable_rpc_url}instances/`)).status).toBe(200);
    // A malformed escape is a 400, not a failure of the API.
    expect((await fetch(`${stack.info.durable_rpc_url}instances/%E0%A4%A`)).status).toBe(400);
    expect(listeners(Number(keyed.port))).toEqual(["0100007F"]);
  });
});

describe("the unauthenticated no-op diagnostic's rate limit", () => {
  function noopFrom(localAddress: string, headers: Record<string, string> = {}): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = http.request(`${stack.info.functions_url}/api/health/queue/enqueue-noop?message=hi`, {
        method: "POST",
        localAddress,
        headers,
      });
      req.on("response", (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end();
    });
  }

  it("B-239 B-240 is per client: one caller draining its share leaves another theirs, and a forged X-Forwarded-For does not help", async () => {
    let status = 0;
    for (let i = 0; i < 40 && status !== 429; i++) status = await noopFrom("127.0.0.1");
    expect(status).toBe(429);
    expect(await noopFrom("127.0.0.1", { "X-Forwarded-For": "198.51.100.23" })).toBe(429);
    expect(await noopFrom("127.0.0.2")).toBe(200);
  });
});

describe("dashboard job ids", () => {
  it("B-234 B-231 an upper-case id names the same job, and a braced one is 400, never 404 or 200", async () => {
    const res = await fetch(`${stack.info.functions_url}/api/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify({ program: "blastn", db: "16s_rrna_demo", query_fasta: ">q1\nACGTACGTACGTACGTACGTACGT\n" }),
    });
    expect(res.status).toBe(200);
    const id = ((await res.json()) as { job_id: string }).job_id;
    const get = (form: string) =>
      fetch(`${stack.info.functions_url}/api/blast/jobs/${form}`, { headers: { Authorization: `Bearer ${token}` } });
    const upper = await get(id.toUpperCase());
    expect(upper.status).toBe(200);
    expect(((await upper.json()) as { job_id: string }).job_id).toBe(id);
    for (const braced of [`{${id}}`, `%7B${id}%7D`, `%7B${id.toUpperCase()}%7D`]) {
      const res = await get(braced);
      expect(res.status, braced).toBe(400);
      expect(await res.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    }
  });
});
