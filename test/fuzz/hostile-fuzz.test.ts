/**
 * Property-based fuzzing of every route of both services (the dashboard backend through the local
 * Functions host, and the job API), for every role: generated bodies, headers, path and query
 * values — valid, boundary and hostile. Each answer must be no 5xx (502–504 only as the spec's
 * envelope), the error envelope on every 4xx, no secret, storage URL or host path in a body or a
 * header (unless the request itself carried that text), and the processes' memory bounded.
 *
 * `FUZZ_RUNS` sets the generated cases per service (default 150 in `npm test`); every
 * route × role pair is also sent once. The console's routes also get tool commands from every
 * role with secrets planted in their argument values (`FUZZ_RUNS` / 3 of them).
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { readApiToken } from "../support/jobapi-client.js";
import { mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { jobApiPidOf } from "../support/processes.js";

const RUNS = Math.max(1, Number(process.env.FUZZ_RUNS ?? 150));
/** Resident memory a process may gain over a whole run (the bodies sent are at most a few MB each). */
const MAX_RSS_GROWTH_BYTES = 512 * 1024 * 1024;

interface Route {
  service: "dashboard" | "jobapi";
  method: string;
  /** With `{name}` placeholders. */
  template: string;
}

let stack: TestStack;
let routes: Route[];
const dashboardTokens = new Map<string, string | undefined>();
let apiToken: string;
let forbidden: string[];
let cases = 0;

/** The dashboard's routes, read from the Functions app's own registrations (every `route(...)` call). */
function dashboardRoutes(): Route[] {
  const out: Route[] = [];
  const dir = path.join(ROOT, "functions");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(path.join(dir, file), "utf8");
    for (const m of text.matchAll(/route\("\w+", \{ methods: \[([^\]]*)\], route: "([^"]+)"/g)) {
      for (const method of (m[1] ?? "").match(/[A-Z]+/g) ?? [])
        out.push({ service: "dashboard", method, template: `/api/${m[2]}` });
    }
  }
  return out;
}

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").match(/VmRSS:\s+(\d+) kB/);
  return Number(line?.[1] ?? 0) * 1024;
}

function servicePids(): number[] {
  const jobApi = jobApiPidOf(stack.info.pid);
  return jobApi ? [stack.info.pid, jobApi] : [stack.info.pid];
}

beforeAll(async () => {
  stack = await startStack({ env: { JOBAPI_MAX_QUEUED_JOBS: "20" } });
  const doc = (await (await fetch(`${stack.info.jobapi_url}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  routes = [
    ...dashboardRoutes(),
    ...Object.entries(doc.paths).flatMap(([template, ops]) =>
      Object.keys(ops).map((method) => ({ service: "jobapi" as const, method: method.toUpperCase(), template })),
    ),
  ];
  for (const role of ["Reader", "Contributor", "Owner"]) dashboardTokens.set(role, await mintToken(stack, role));
  dashboardTokens.set("none", undefined);
  dashboardTokens.set(
    "unsigned",
    `${Buffer.from('{"alg":"none","typ":"JWT"}').toString("base64url")}.${Buffer.from('{"roles":["Owner"]}').toString("base64url")}.`,
  );
  apiToken = readApiToken(stack);
  const blob = new URL(stack.info.blob_endpoint);
  const table = new URL(stack.info.table_endpoint);
  forbidden = [
    DEV_ACCOUNT_KEY,
    "AccountKey=",
    "SharedAccessSignature",
    "sig=",
    blob.host,
    table.host,
    stack.dataDir,
    ROOT,
    "/node_modules/",
    ".ts:",
    ".js:",
  ];
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

const HOSTILE_TEXT = [
  "",
  " ",
  "../../../../etc/passwd",
  "..%2F..%2Fetc%2Fpasswd",
  "%2e%2e%2f%2e%2e%2f",
  "'; rm -rf / #",
  "$(id)",
  "`id`",
  "-outfmt 0 -out /tmp/x",
  "--help",
  "\u0000",
  "\ud800",
  "\ufeff",
  "%00",
  "%E0%A4%A",
  "' or 1 eq 1 or PartitionKey ne '",
  "PartitionKey eq 'job'",
  "<script>alert(1)</script>",
  "{{7*7}}",
  // A log4shell-style lookup, sent as literal text.
  "$" + "{jndi:ldap://x/a}",
  "__proto__",
  "constructor",
  "NaN",
  "-1",
  "1e309",
  "9007199254740993",
  "null",
  "caf\u00e9 \u{1F600}",
  "A".repeat(5000),
  "\r\nX-Injected: 1",
];

const hostileString = fc.oneof(
  fc.constantFrom(...HOSTILE_TEXT),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.uuid(),
  fc.uuid().map((u) => u.toUpperCase()),
  fc.uuid().map((u) => `{${u}}`),
  fc.stringMatching(/^[a-z0-9]{12}$/),
  fc.integer().map(String),
);

const PROGRAMS = ["blastn", "blastp", "blastx", "tblastn", "tblastx"];
const OPTION_KEYS = [
  "evalue",
  "max_target_seqs",
  "outfmt",
  "word_size",
  "dust",
  "task",
  "matrix",
  "strand",
  "query_gencode",
  "threshold",
  "gapopen",
  "gapextend",
];
const fasta = fc.oneof(
  fc.constantFrom(
    ">q1\nACGTACGTACGTACGTACGTACGTAC\n",
    "ACGTNNNNACGT",
    ">p\nMKTAYIAKQRQISFVKSHFSRQ\n",
    ">\nACGT",
    ">a\n\n",
    ">é\nACGT\n",
  ),
  hostileString,
  fc.array(fc.constantFrom(">s", "ACGT", "acgu-", "MKV*", "", ">x y", "12"), { maxLength: 8 }).map((l) => l.join("\n")),
);
const options = fc.dictionary(
  fc.oneof(fc.constantFrom(...OPTION_KEYS), hostileString),
  fc.oneof(fc.jsonValue({ maxDepth: 2 }), hostileString),
  { maxKeys: 4 },
);
const submitLike = fc.record(
  {
    program: fc.oneof(fc.constantFrom(...PROGRAMS), hostileString),
    db: fc.oneof(fc.constant("16s_rrna_demo"), hostileString),
    query_fasta: fasta,
    blast_options: options,
    options,
    execution_profile: fc.oneof(fc.constantFrom("standard", "sharded"), hostileString),
    priority: fc.oneof(fc.constantFrom("low", "normal", "high"), fc.integer({ min: -5, max: 105 })),
    idempotency_key: hostileString,
    title: hostileString,
  },
  { requiredKeys: [] },
);

/** A raw body: JSON of any shape, a submit-like object, deep nesting, or not JSON at all. */
const body = fc.oneof(
  { weight: 4, arbitrary: submitLike.map((v) => JSON.stringify(v)) },
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.integer({ min: 500, max: 20_000 }).map((n) => `${"[".repeat(n)}${"]".repeat(n)}`) },
  { weight: 1, arbitrary: fc.integer({ min: 500, max: 20_000 }).map((n) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`) },
  { weight: 1, arbitrary: hostileString },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '{"a":1,"a":2}',
      '{"__proto__":{"admin":true}}',
      "{",
      "\u0000\u0001",
      `{"x":"${"y".repeat(3 * 1024 * 1024)}"}`,
    ),
  },
);

const headers = fc.record(
  {
    "content-type": fc.oneof(
      fc.constantFrom(
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/merge-patch+json",
        "multipart/form-data; boundary=x",
      ),
      hostileString,
    ),
    "x-request-id": hostileString,
    "if-match": hostileString,
    "if-none-match": hostileString,
    accept: fc.constantFrom("*/*", "application/json", "text/html", "application/xml"),
    "accept-encoding": fc.constantFrom("gzip", "identity", "br, gzip;q=0", "x"),
  },
  { requiredKeys: [] },
);

const query = fc.dictionary(
  fc.oneof(
    fc.constantFrom(
      "status",
      "page",
      "page_size",
      "content",
      "wait",
      "message",
      "cursor",
      "limit",
      "format",
      "file_id",
      "db",
    ),
    hostileString,
  ),
  hostileString,
  { maxKeys: 4 },
);

interface Case {
  route: Route;
  role: string;
  methodOverride: string | null;
  params: string[];
  query: Record<string, string>;
  headers: Record<string, string>;
  body: string;
}

const ROLES = {
  dashboard: ["none", "unsigned", "Reader", "Contributor", "Owner"],
  jobapi: ["none", "wrong", "valid"],
} as const;

function caseFor(route: Route): fc.Arbitrary<Case> {
  return fc.record({
    route: fc.constant(route),
    role: fc.constantFrom(...ROLES[route.service]),
    methodOverride: fc.option(fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"), {
      freq: 10,
    }),
    params: fc.array(fc.oneof(hostileString, fc.constant("16s_rrna_demo")), { minLength: 3, maxLength: 3 }),
    query,
    headers,
    body,
  });
}

/** Text that must not appear in an answer (unless the request itself carried it). */
function leaks(answer: string, request: string, c: Case): string[] {
  const found = forbidden.filter((s) => answer.includes(s) && !request.includes(s));
  // The reveal and regenerate routes exist to hand the Owner the token; everywhere else it is a leak.
  const tokenRoute = /settings\/api-token\/(reveal|regenerate)$/.test(c.route.template);
  if (!tokenRoute && answer.includes(apiToken) && !request.includes(apiToken)) found.push("the job API token");
  return found;
}

async function send(c: Case): Promise<void> {
  cases += 1;
  let i = 0;
  // A lone surrogate cannot travel in a URL (the client sends U+FFFD), so it is made well-formed first.
  const pathname = c.route.template.replace(/\{[^}]+\}/g, () =>
    encodeURIComponent((c.params[i++] ?? "x").replace(/\p{Cs}/gu, "\ufffd")),
  );
  const base = c.route.service === "dashboard" ? stack.info.functions_url : stack.info.jobapi_url;
  const url = new URL(`${base}${pathname}`);
  for (const [k, v] of Object.entries(c.query)) url.searchParams.append(k, v);
  // Long polls answer at once here: no job id the fuzz makes up exists, and `wait` is capped anyway.
  url.searchParams.delete("wait");
  const method = c.methodOverride ?? c.route.method;
  const h = new Headers();
  for (const [k, v] of Object.entries(c.headers)) {
    // Only what HTTP can carry (the client refuses to send the rest, so no server ever sees it).
    if (/^[\t\x20-\x7e]*$/.test(v)) h.set(k, v);
  }
  if (c.route.service === "dashboard") {
    const token = dashboardTokens.get(c.role);
    if (token) h.set("authorization", `Bearer ${token}`);
  } else if (c.role !== "none") {
    h.set("x-svc-api-token", c.role === "valid" ? apiToken : `bpt_${"x".repeat(43)}`);
  }
  const withBody = method !== "GET" && method !== "HEAD";
  const res = await fetch(url, {
    method,
    headers: h,
    body: withBody ? c.body : undefined,
    signal: AbortSignal.timeout(60_000),
  });
  const text = method === "HEAD" ? "" : await res.text();
  const label = `${method} ${url.pathname}${url.search} as ${c.role} → ${res.status}: ${text.slice(0, 300)}`;
  const serverError = res.status >= 500;
  expect(serverError && ![502, 503, 504].includes(res.status), label).toBe(false);
  if (res.status >= 400 && method !== "HEAD") {
    const envelope = JSON.parse(text) as { detail?: unknown; request_id?: unknown };
    expect(envelope.detail, label).toBeDefined();
    if (c.route.service === "dashboard" || serverError) expect(typeof envelope.request_id, label).toBe("string");
  }
  const answer = `${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n${text}`;
  const request = `${url.href}\n${[...h].map(([k, v]) => `${k}: ${v}`).join("\n")}\n${withBody ? c.body : ""}`;
  expect(leaks(answer, request, c), label).toEqual([]);
  expect(res.headers.get("x-injected"), label).toBeNull();
}

describe("fuzz: both services, every route, every role", () => {
  it("B-227 B-228 B-126 B-196 B-022 B-104 every route × role answers a hostile request within the envelope, with nothing leaked", async () => {
    const before = new Map(servicePids().map((pid) => [pid, rssBytes(pid)]));
    let seed = 1;
    for (const route of routes) {
      for (const role of ROLES[route.service]) {
        const [c] = fc.sample(caseFor(route), { numRuns: 1, seed: seed++ });
        await send({ ...(c as Case), role, methodOverride: null });
      }
    }
    for (const [pid, rss] of before) expect(rssBytes(pid) - rss, `process ${pid}`).toBeLessThan(MAX_RSS_GROWTH_BYTES);
  }, 300_000);

  it("B-227 B-228 B-126 B-196 B-022 B-104 generated requests (FUZZ_RUNS per service) get no 5xx, the envelope on every error, no leak, bounded memory", async () => {
    const before = new Map(servicePids().map((pid) => [pid, rssBytes(pid)]));
    for (const service of ["dashboard", "jobapi"] as const) {
      const mine = routes.filter((r) => r.service === service);
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...mine).chain(caseFor), (c) => send(c)),
        { numRuns: RUNS, endOnFailure: true },
      );
    }
    for (const [pid, rss] of before) expect(rssBytes(pid) - rss, `process ${pid}`).toBeLessThan(MAX_RSS_GROWTH_BYTES);
    process.stdout.write(`fuzz: ${cases} requests sent (FUZZ_RUNS=${RUNS})\n`);
  }, 1_800_000);
});

/** Secrets as an operator might paste them; `core` is what must never come back. */
const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const credential = fc
  .tuple(fc.array(fc.constantFrom(...B64URL.split("")), { minLength: 24, maxLength: 48 }), fc.nat(9))
  .map(([chars, digit]) => `${chars.join("")}${digit}`);
const plantedSecret = fc.oneof(
  credential.map((c) => ({ text: `bpt_${c}`, core: c })),
  fc.tuple(credential, credential).map(([h, p]) => ({ text: `eyJ${h}.${p}.sig0123456789`, core: `${h}.${p}` })),
  fc
    .tuple(fc.constantFrom("Bearer ", "bearer:", "Bearer%20", "Authorization: Bearer\t"), credential)
    .map(([lead, c]) => ({ text: `${lead}${c}`, core: c })),
  credential.map((c) => ({
    text: `DefaultEndpointsProtocol=https;AccountName=a;AccountKey=${c}==;EndpointSuffix=core.windows.net`,
    core: c,
  })),
  credential.map((c) => ({ text: `https://a.blob.core.windows.net/c/b?sv=2024-01-01&sig=${c}`, core: c })),
  credential.map((c) => ({ text: `-----BEGIN PRIVATE KEY-----\n${c}\n-----END PRIVATE KEY-----`, core: c })),
);
/** Console commands with a free-text argument, `{s}` standing for the planted value (quoted). */
const CONSOLE_COMMANDS = [
  "explore_catalog query={s}",
  "query_audit actor={s}",
  "activate_break_glass reason={s}",
  "approve_hil approval_id=apr_000000000000000000000000 decision=reject justification={s}",
  'run_runbook name=cancel_job params={"job_id":{s}} dry_run=false',
  'simulate_change {"event_type":"job.failed","resource_ref":"blast_job/j-1","note":{s}}',
  "query_inventory filter={s}",
  "query_log query={s} window=30m",
  "{raw}",
];
const CONSOLE_ROLES = ["Reader", "Contributor", "Approver", "Owner"] as const;

describe("fuzz: the console's routes and tool arguments, every role, secrets in the values", () => {
  it("C-236 C-534 C-131 tool commands from every role with secrets planted in their arguments answer within the envelope; no secret comes back, in the reply or later from the audit; a Reader sees no approval content", async () => {
    const tokens = new Map<string, string>();
    for (const role of CONSOLE_ROLES) tokens.set(role, await mintToken(stack, role, { oid: `oid-fuzz-${role}` }));
    const cores: string[] = [];
    const chat = async (role: string, text: string) => {
      const res = await fetch(`${stack.info.functions_url}/api/chat`, {
        method: "POST",
        headers: { authorization: `Bearer ${tokens.get(role)}`, "content-type": "application/json" },
        body: JSON.stringify({ text }),
        signal: AbortSignal.timeout(60_000),
      });
      return { status: res.status, text: await res.text() };
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...CONSOLE_COMMANDS),
        plantedSecret,
        fc.constantFrom(...CONSOLE_ROLES),
        fc.constantFrom("", " ", "note: ", "x\t"),
        async (command, secret, role, lead) => {
          cores.push(secret.core);
          const value = `${lead}${secret.text}`;
          const text = command.replace("{s}", JSON.stringify(value)).replace("{raw}", value);
          const res = await chat(role, text);
          const label = `${role}: ${text.slice(0, 200)} → ${res.status}: ${res.text.slice(0, 300)}`;
          expect(res.status < 500, label).toBe(true);
          if (res.status >= 400) expect((JSON.parse(res.text) as { detail?: unknown }).detail, label).toBeDefined();
          expect(res.text.includes(secret.core), label).toBe(false);
          expect(
            leaks(res.text, text, { route: { service: "dashboard", method: "POST", template: "/api/chat" } } as Case),
            label,
          ).toEqual([]);
          // Tool discovery takes free text too.
          const rpc = await fetch(`${stack.info.functions_url}/api/rpc`, {
            method: "POST",
            headers: { authorization: `Bearer ${tokens.get(role)}`, "content-type": "application/json" },
            body: JSON.stringify({
              jsonrpc: "2.0",
              id: 1,
              method: "tools.search",
              params: { query: value.slice(0, 200) },
            }),
          });
          expect(rpc.status < 500, label).toBe(true);
          expect((await rpc.text()).includes(secret.core), label).toBe(false);
        },
      ),
      { numRuns: Math.max(10, Math.ceil(RUNS / 3)), endOnFailure: true },
    );
    // Afterwards: what the audit returns, to an Owner or a Reader, holds none of the planted secrets.
    for (const role of ["Owner", "Reader"] as const) {
      let all = "";
      let cursor = "";
      for (let page = 0; page < 20; page++) {
        const res = await chat(role, `query_audit limit=100${cursor ? ` cursor=${cursor}` : ""}`);
        expect(res.status).toBe(200);
        all += res.text;
        const next = /"next_cursor":\s*"([^"]+)"/.exec(res.text)?.[1];
        if (!next) break;
        cursor = next;
      }
      for (const core of cores) {
        const at = all.indexOf(core);
        expect(
          at,
          `${role}'s query_audit holds ${core}: …${all.slice(Math.max(0, at - 300), at + core.length + 100)}…`,
        ).toBe(-1);
      }
      if (role === "Reader") expect(all).not.toMatch(/apr_[0-9a-f]{24}/);
    }
  }, 1_800_000);
});
