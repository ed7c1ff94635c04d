import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { odata, TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog } from "../../shared/ops/events.js";
import { API_TOKEN_SECRET, type ApiTokenState } from "../../shared/secrets/api-tokens.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

// One stack for the file; a short grace period lets the rotation test watch the old token expire.
// It must outlast the job API's 2 s token cache by enough that a stalled machine still checks the
// old token inside it.
const GRACE_SECONDS = 8;
const ROLES = ["Reader", "Contributor", "Approver", "Owner"] as const;
type Who = "none" | (typeof ROLES)[number];

let stack: TestStack;
let connectionString: string;
const bearer = new Map<Who, string>();
/** Every API token value the tests saw; none may appear in logs, audit or events. */
const seenTokens = new Set<string>();

/** A distinct, stable identity per role, so audit entries can be traced to the caller. */
function identity(role: string): { oid: string; name: string } {
  const n = (ROLES as readonly string[]).indexOf(role) + 1;
  return { oid: `0000000${n}-aaaa-4bbb-8ccc-dddddddddddd`, name: `Test ${role}` };
}

beforeAll(async () => {
  stack = await startStack({ env: { API_TOKEN_GRACE_SECONDS: String(GRACE_SECONDS) } });
  connectionString = `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;
  for (const role of ROLES) bearer.set(role, await mintToken(stack, role, identity(role)));
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

const workspace = {
  subscription_id: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
  resource_group: "rg-blast-test",
  location: "westeurope",
  storage_account: "blaststore01",
  registry: "blastacr01",
  cluster_name: "aks-blast",
  node_size: "Standard_D4s_v5",
  node_count: 2,
};

interface Call {
  who?: Who;
  body?: unknown;
  headers?: Record<string, string>;
  requestId?: string;
}

function newRequestId(): string {
  return `test-${randomUUID()}`;
}

async function call(method: string, route: string, options: Call = {}): Promise<Response> {
  const headers: Record<string, string> = { "X-Request-Id": options.requestId ?? newRequestId(), ...options.headers };
  const token = options.who && options.who !== "none" ? bearer.get(options.who) : undefined;
  if (token) headers.Authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(`${stack.info.functions_url}${route}`, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
}

/** Status of `GET /v1/databases` at the job API with `token` in X-SVC-API-Token. */
async function jobApiStatus(token: string | undefined): Promise<number> {
  const res = await fetch(`${stack.info.jobapi_url}/v1/databases`, {
    headers: token === undefined ? {} : { "X-SVC-API-Token": token },
  });
  await res.body?.cancel();
  return res.status;
}

function storedTokenState(): ApiTokenState {
  return JSON.parse(
    readFileSync(path.join(stack.dataDir, "jobapi", "secrets", API_TOKEN_SECRET), "utf8"),
  ) as ApiTokenState;
}

function table(name: string): TableClient {
  return TableClient.fromConnectionString(connectionString, name, { allowInsecureConnection: true });
}

async function entities(name: string, filter?: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const e of table(name).listEntities<Record<string, unknown>>(filter ? { queryOptions: { filter } } : {}))
    out.push(e);
  return out;
}

async function reveal(): Promise<string> {
  const res = await call("POST", "/api/settings/api-token/reveal", { who: "Owner" });
  expect(res.status).toBe(200);
  const token = ((await res.json()) as { api_token: string }).api_token;
  seenTokens.add(token);
  return token;
}

describe("the dashboard API's description", () => {
  it("B-175 serves GET /api/openapi.json without a token, equal to the committed copy the linters check", async () => {
    const res = await call("GET", "/api/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const fixture = path.resolve(import.meta.dirname, "../fixtures/dashboard-openapi.json");
    expect(await res.json()).toEqual(JSON.parse(readFileSync(fixture, "utf8")));
  });

  it("B-175 serves the schema UI at /api/docs from the bundled assets, pointed at /api/openapi.json", async () => {
    const docs = await call("GET", "/api/docs");
    expect(docs.status).toBe(200);
    const html = await docs.text();
    expect(html).toContain("swagger-ui");
    expect(html).not.toMatch(/https?:\/\/(cdn|unpkg|jsdelivr)/);
    const init = await call("GET", "/api/docs/init.js");
    expect(await init.text()).toContain('"/api/openapi.json"');
    const bundle = await call("GET", "/api/docs/swagger-ui-bundle.js");
    expect(bundle.status).toBe(200);
    expect((await bundle.text()).length).toBeGreaterThan(100_000);
    expect((await call("GET", "/api/docs/..%2Fpackage.json")).status).toBe(404);
  });
});

describe("workspace configuration (server-side)", () => {
  it("B-002 saves, reads back, refuses a stale If-Match with 412 (RFC 9110 §13.1.1) and accepts the fresh one", async () => {
    const missing = await call("GET", "/api/workspace", { who: "Reader" });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({
      detail: expect.any(String),
      request_id: missing.headers.get("x-request-id"),
    });

    const createId = newRequestId();
    const created = await call("PUT", "/api/workspace", { who: "Contributor", body: workspace, requestId: createId });
    expect(created.status).toBe(200);
    const first = (await created.json()) as {
      workspace: unknown;
      etag: string;
      updated_at: string;
      updated_by: unknown;
    };
    expect(first).toEqual({
      workspace,
      etag: expect.any(String),
      updated_at: expect.any(String),
      updated_by: identity("Contributor"),
    });
    expect(created.headers.get("etag")).toBe(first.etag);

    // A reload (another caller, another role) sees the saved values and the same version.
    const read = await call("GET", "/api/workspace", { who: "Reader" });
    expect(read.status).toBe(200);
    expect(read.headers.get("etag")).toBe(first.etag);
    expect(await read.json()).toEqual(first);

    const moved = { ...workspace, node_count: 4 };
    const updated = await call("PUT", "/api/workspace", {
      who: "Owner",
      body: moved,
      headers: { "If-Match": first.etag },
    });
    expect(updated.status).toBe(200);
    const second = (await updated.json()) as { etag: string };
    expect(second.etag).not.toBe(first.etag);

    const stale = await call("PUT", "/api/workspace", {
      who: "Contributor",
      body: { ...workspace, node_count: 9 },
      headers: { "If-Match": first.etag },
    });
    expect(stale.status).toBe(412);
    expect(await stale.json()).toMatchObject({
      detail: expect.stringContaining("changed"),
      request_id: expect.any(String),
    });

    const fresh = await call("PUT", "/api/workspace", {
      who: "Contributor",
      body: { ...workspace, node_count: 5 },
      headers: { "If-Match": second.etag },
    });
    expect(fresh.status).toBe(200);
    const third = (await fresh.json()) as { etag: string; workspace: { node_count: number } };
    expect(third.workspace.node_count).toBe(5);
    expect((await (await call("GET", "/api/workspace", { who: "Approver" })).json()) as unknown).toMatchObject({
      etag: third.etag,
      workspace: { node_count: 5 },
    });

    // The create is audited with the caller and the request id.
    const [entry] = await createAuditLog(connectionString)
      .list({ action: "workspace.update" })
      .then((all) => all.filter((e) => e.request_id === createId));
    expect(entry).toMatchObject({
      actor: identity("Contributor"),
      action: "workspace.update",
      target: "workspace",
      outcome: "succeeded",
      details: { created: true, changed_fields: Object.keys(workspace), etag: first.etag },
    });
  });

  it("refuses an update without If-Match with 428: a save must name the version it replaces", async () => {
    const res = await call("PUT", "/api/workspace", { who: "Contributor", body: workspace });
    expect(res.status).toBe(428);
    expect(await res.json()).toMatchObject({
      detail: expect.stringContaining("If-Match"),
      request_id: expect.any(String),
    });
  });

  it("B-125 B-126 answers 422 listing each failing field", async () => {
    const body = {
      ...workspace,
      location: "West Europe",
      storage_account: "Bad-Name",
      node_count: 0,
      cluster_name: undefined,
      colour: "blue",
    };
    const res = await call("PUT", "/api/workspace", { who: "Contributor", body });
    expect(res.status).toBe(422);
    const payload = (await res.json()) as {
      detail: { loc: string[]; msg: string; type: string }[];
      request_id: string;
    };
    expect(payload.request_id).toBe(res.headers.get("x-request-id"));
    expect(payload.detail.map((d) => d.loc.join(".")).sort()).toEqual(
      ["body.cluster_name", "body.colour", "body.location", "body.node_count", "body.storage_account"].sort(),
    );
    for (const d of payload.detail)
      expect(d).toEqual({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
  });
});

describe("role matrix of the settings routes", () => {
  it("B-158 answers each route per role: 401 without a token, 403 below the floor", async () => {
    const who: Who[] = ["none", ...ROLES];
    const expected = {
      "GET /api/workspace": { none: 401, Reader: 200, Contributor: 200, Approver: 200, Owner: 200 },
      "PUT /api/workspace": { none: 401, Reader: 403, Contributor: 200, Approver: 200, Owner: 200 },
      "GET /api/settings/api-token": { none: 401, Reader: 200, Contributor: 200, Approver: 200, Owner: 200 },
      "POST /api/settings/api-token/reveal": { none: 401, Reader: 403, Contributor: 403, Approver: 403, Owner: 200 },
      "POST /api/settings/api-token/regenerate": {
        none: 401,
        Reader: 403,
        Contributor: 403,
        Approver: 403,
        Owner: 200,
      },
    };
    const actual: Record<string, Record<string, number>> = {};
    for (const key of Object.keys(expected)) {
      const [method = "", route = ""] = key.split(" ");
      actual[key] = {};
      for (const w of who) {
        const options: Call = { who: w };
        if (method === "PUT") {
          // A fresh version for each save, so only the role decides the answer.
          const current = (await (await call("GET", "/api/workspace", { who: "Owner" })).json()) as { etag: string };
          options.body = workspace;
          options.headers = { "If-Match": current.etag };
        }
        const res = await call(method, route, options);
        const body = (await res.json()) as Record<string, unknown>;
        if (res.status >= 400) expect(Object.keys(body).sort()).toEqual(["detail", "request_id"]);
        if (typeof body.api_token === "string") seenTokens.add(body.api_token);
        (actual[key] as Record<string, number>)[w] = res.status;
      }
    }
    expect(actual).toEqual(expected);
  });
});

describe("API token panel", () => {
  it("B-030 status shows the last four of the token the job API accepts, never the token", async () => {
    const stored = storedTokenState().current.value;
    seenTokens.add(stored);
    // The job API accepts the stored token (its cache may lag a recent rotation by 2 s).
    await eventually(async () => ((await jobApiStatus(stored)) === 200 ? true : undefined), 8000);
    const res = await call("GET", "/api/settings/api-token", { who: "Reader" });
    expect(res.status).toBe(200);
    const status = (await res.json()) as Record<string, unknown>;
    expect(status).toMatchObject({
      configured: true,
      last_four: stored.slice(-4),
      created_at: storedTokenState().current.created_at,
    });
    expect(Object.keys(status).sort()).toEqual([
      "configured",
      "created_at",
      "last_four",
      "previous_valid_until",
      "rotated_at",
    ]);
    expect(JSON.stringify(status)).not.toContain(stored);
  });

  it("B-203 B-030 B-197 B-199 reveal as Owner returns the token the job API accepts, uncached", async () => {
    const res = await call("POST", "/api/settings/api-token/reveal", { who: "Owner" });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { api_token } = (await res.json()) as { api_token: string };
    seenTokens.add(api_token);
    expect(api_token).toBe(storedTokenState().current.value);
    await eventually(async () => ((await jobApiStatus(api_token)) === 200 ? true : undefined), 8000);
    expect(await jobApiStatus(undefined)).toBe(401);
    expect(await jobApiStatus(`${api_token}x`)).toBe(401);
  });

  it("B-201 B-202 B-198 regenerate: the new token works, the old one works inside the grace period and fails after it", async () => {
    const oldToken = await reveal();
    const requestId = newRequestId();
    const res = await call("POST", "/api/settings/api-token/regenerate", { who: "Owner", requestId });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as { api_token: string; created_at: string; previous_valid_until: string };
    seenTokens.add(body.api_token);
    expect(body.api_token).not.toBe(oldToken);
    const validUntil = Date.parse(body.previous_valid_until);
    expect(validUntil - Date.parse(body.created_at)).toBe(GRACE_SECONDS * 1000);

    // The job API reads tokens with a 2 s cache: poll until it sees the new one.
    await eventually(async () => ((await jobApiStatus(body.api_token)) === 200 ? true : undefined), 8000, 50);
    const oldDuringGrace = await jobApiStatus(oldToken);
    expect(Date.now()).toBeLessThan(validUntil);
    expect(oldDuringGrace).toBe(200);

    const status = (await (await call("GET", "/api/settings/api-token", { who: "Reader" })).json()) as Record<
      string,
      unknown
    >;
    expect(status).toMatchObject({
      last_four: body.api_token.slice(-4),
      rotated_at: body.created_at,
      previous_valid_until: body.previous_valid_until,
    });

    const refusedAt = await eventually(
      async () => ((await jobApiStatus(oldToken)) === 401 ? Date.now() : undefined),
      20_000,
      100,
    );
    expect(refusedAt).toBeGreaterThanOrEqual(validUntil);
    expect(await jobApiStatus(body.api_token)).toBe(200);
    const after = (await (await call("GET", "/api/settings/api-token", { who: "Reader" })).json()) as Record<
      string,
      unknown
    >;
    expect(after.previous_valid_until).toBeNull();

    // Audited with the caller and request id; a token.rotated event correlates to the request.
    const audits = await entities("audit", odata`request_id eq ${requestId}`);
    expect(audits).toHaveLength(1);
    expect(audits[0]).toMatchObject({
      action: "api_token.regenerate",
      outcome: "succeeded",
      actor_oid: identity("Owner").oid,
      actor_name: "Test Owner",
    });
    const rotated = (await createEventLog(connectionString).list({ event_type: "token.rotated" })).filter(
      (e) => e.correlation_id === requestId,
    );
    expect(rotated).toEqual([
      {
        event_id: expect.any(String),
        idempotency_key: expect.any(String),
        source: "dashboard",
        event_type: "token.rotated",
        detected_at: body.created_at,
        ingested_at: expect.any(String),
        mode: "shadow",
        correlation_id: requestId,
        resource_ref: "api_token",
        payload: expect.objectContaining({
          rotated_at: body.created_at,
          previous_valid_until: body.previous_valid_until,
        }),
      },
    ]);
  }, 60_000);

  it("refuses reveal and regenerate with 403 below Owner, and audits each refusal as denied", async () => {
    const before = storedTokenState().current.value;
    for (const role of ["Reader", "Contributor", "Approver"] as const) {
      for (const action of ["reveal", "regenerate"] as const) {
        const requestId = newRequestId();
        const res = await call("POST", `/api/settings/api-token/${action}`, { who: role, requestId });
        expect(res.status).toBe(403);
        const body = (await res.json()) as Record<string, unknown>;
        expect(body).toEqual({ detail: expect.stringContaining("Owner"), request_id: requestId });
        const rows = await entities("audit", odata`request_id eq ${requestId}`);
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({
          action: `api_token.${action}`,
          target: "api_token",
          outcome: "denied",
          request_id: requestId,
          actor_oid: identity(role).oid,
          actor_name: `Test ${role}`,
        });
      }
    }
    // Nothing was rotated by the refused calls.
    expect(storedTokenState().current.value).toBe(before);
  });

  it("keeps every token out of logs, audit entries and events", async () => {
    seenTokens.add(storedTokenState().current.value);
    expect(seenTokens.size).toBeGreaterThanOrEqual(3);
    const haystacks = [
      stack.output(),
      JSON.stringify(await entities("audit")),
      JSON.stringify(await entities("events")),
    ];
    for (const token of seenTokens) for (const text of haystacks) expect(text.includes(token)).toBe(false);
  });
});

describe("audit and event stores on Azurite", () => {
  it("lists audit entries newest first across days, filtered by since and action", async () => {
    let clock = new Date("2031-03-01T23:59:59.000Z");
    const log = createAuditLog(connectionString, { now: () => clock });
    const actor = { oid: "o-1", name: "Clock" };
    const recorded = [];
    for (const [at, action] of [
      ["2031-03-01T23:59:59.000Z", "test.first"],
      ["2031-03-02T00:00:01.000Z", "test.second"],
      ["2031-03-02T08:00:00.000Z", "test.first"],
    ] as const) {
      clock = new Date(at);
      recorded.push(
        await log.record({
          actor,
          action,
          target: "t",
          outcome: "succeeded",
          request_id: "r",
          details: { n: at, api_token: "bpt_secret" },
        }),
      );
    }
    const all = await log.list({ since: new Date("2031-03-01T00:00:00.000Z") });
    expect(all.map((e) => e.at)).toEqual([
      "2031-03-02T08:00:00.000Z",
      "2031-03-02T00:00:01.000Z",
      "2031-03-01T23:59:59.000Z",
    ]);
    expect(all[0]).toEqual(recorded[2]);
    expect(all[0]?.details).toEqual({ n: "2031-03-02T08:00:00.000Z", api_token: "[redacted]" });
    expect((await log.list({ since: new Date("2031-03-02T00:00:01.000Z") })).map((e) => e.action)).toEqual([
      "test.first",
      "test.second",
    ]);
    expect(
      (await log.list({ since: new Date("2031-03-01T00:00:00.000Z"), action: "test.first", limit: 1 })).map(
        (e) => e.at,
      ),
    ).toEqual(["2031-03-02T08:00:00.000Z"]);
  });

  it("records an event once per idempotency key", async () => {
    const events = createEventLog(connectionString);
    const key = `test-${randomUUID()}`;
    const input = {
      idempotency_key: key,
      source: "test",
      event_type: "job.failed",
      correlation_id: "c-1",
      resource_ref: "job/abc",
      payload: { reason: "x" },
    };
    const first = await events.record(input);
    const again = await events.record({ ...input, payload: { reason: "different" } });
    expect(again).toEqual(first);
    expect(first).toMatchObject({ mode: "shadow", payload: { reason: "x" } });
    const listed = (await events.list({ event_type: "job.failed" })).filter((e) => e.idempotency_key === key);
    expect(listed).toEqual([first]);
  });
});
