import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createEventLog } from "../../shared/ops/events.js";
import { eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  // The operations core's loop every 2 s, so a test waits seconds (not a minute) for its signal.
  stack = await startStack({ env: { SVC_OPS_LOOP_SCHEDULE: "*/2 * * * * *" } });
  for (const role of ["Reader", "Contributor", "Owner"]) tokens[role] = await mintToken(stack, role);
});
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

function call(path: string, options: { token?: string; body?: unknown; method?: string } = {}) {
  return fetch(`${stack.info.functions_url}/api/${path}`, {
    method: options.method ?? (options.body === undefined ? "GET" : "POST"),
    headers: {
      ...(options.token ? { Authorization: `Bearer ${options.token}` } : {}),
      ...(options.body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
}
const chat = async (role: string, text: string) => {
  const res = await call("chat", { token: tokens[role], body: { text } });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    text: string;
    kind: string;
    tool_results: { status: string; tool: string; data?: unknown }[];
    evidence_refs: string[];
    audit_ids: string[];
    request_id: string;
  };
};

describe("console routes on the local stack", () => {
  it("C-310 C-317 C-344: /chat, /chat/health, /agents/activity and the RPC need a validated bearer token", async () => {
    for (const [path, body] of [
      ["chat", { text: "search_tools" }],
      ["chat/health", undefined],
      ["agents/activity", undefined],
      ["rpc", { jsonrpc: "2.0", id: 1, method: "tools.search" }],
    ] as const) {
      const res = await call(path, { body });
      expect(res.status, path).toBe(401);
      expect(await res.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
      expect((await call(path, { body, token: "not-a-jwt" })).status).toBe(401);
    }
  });

  it("C-001 C-311 C-345: a JSON turn gets a JSON reply with the tool results' evidence references, at the role of the token", async () => {
    const reply = await chat("Reader", "explore_catalog query=R-JOB-001");
    expect(reply.kind).toBe("tool_result");
    expect(reply.tool_results[0]).toMatchObject({ status: "ok", tool: "explore_catalog" });
    expect(reply.evidence_refs).toEqual(["catalog:rules@1,action_types@1"]);
    expect(reply.audit_ids).toHaveLength(1);
    const refused = await chat("Reader", "list_hil");
    expect(refused.text).toBe(
      "Refused: the tool list_hil requires the Approver role; your current role is Reader. The tool was not invoked.",
    );
  });

  it("answers malformed turns with the 422 envelope listing loc, msg and type", async () => {
    const res = await call("chat", { token: tokens.Reader, body: { text: "" } });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({
      detail: [{ loc: ["body", "text"], msg: expect.any(String), type: expect.any(String) }],
      request_id: expect.any(String),
    });
    const extra = await call("chat", { token: tokens.Reader, body: { text: "search_tools", role: "Owner" } });
    expect(extra.status).toBe(422);
  });

  it("C-088: on npm start the console answers inventory questions from the control plane's own resources", async () => {
    const reply = await chat("Reader", "query_inventory resource_type=blast_database");
    expect(reply.tool_results[0]?.status).toBe("ok");
    const data = reply.tool_results[0]?.data as { records: { name: string; type: string }[]; scope: string };
    expect(data.scope).toBe("local control plane");
    expect(data.records.length).toBeGreaterThan(0);
    expect(data.records.every((r) => r.type === "blast_database")).toBe(true);
  });

  it("C-318: /agents/activity returns the bounded inventory-scan, ontology-conversion and current-state read history", async () => {
    await chat("Reader", "query_inventory kind=count");
    await chat("Reader", "explore_catalog query=warm");
    await chat("Reader", "correlate_incident incident_id=INC-000000000000");
    const res = await call("agents/activity", { token: tokens.Reader });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { activities: { activity: string; input_kind: string }[]; limit: number };
    expect(new Set(body.activities.map((a) => a.activity))).toEqual(
      new Set(["inventory_scan", "ontology_conversion", "current_state_read"]),
    );
    expect(body.activities.length).toBeLessThanOrEqual(body.limit);
    expect(body.activities.every((a) => a.input_kind === "query")).toBe(true);
  });

  it("C-327 C-328: /healthz reports liveness only, with no channel, principal or credential data", async () => {
    const res = await call("healthz");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
  });

  it("C-329 C-330: the RPC methods return descriptors only, at the token's role whatever role the caller passes", async () => {
    const res = await call("rpc", {
      token: tokens.Reader,
      body: { jsonrpc: "2.0", id: 7, method: "tools.search", params: { role: "Owner" } },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: number; result: { role: string; tools: Record<string, unknown>[] } };
    expect(body.id).toBe(7);
    expect(body.result.role).toBe("Reader");
    const names = body.result.tools.map((t) => t.name);
    expect(names).toContain("query_audit");
    expect(names).not.toContain("list_hil");
    expect(names).not.toContain("simulate_change");
    for (const t of body.result.tools)
      expect(Object.keys(t).sort()).toEqual([
        "argument_hint",
        "description",
        "failure_modes",
        "name",
        "rbac_floor",
        "side_effect_class",
        "verb",
      ]);
    const hidden = await call("rpc", {
      token: tokens.Reader,
      body: { jsonrpc: "2.0", id: 8, method: "tools.describe", params: { name: "approve_hil", role: "Owner" } },
    });
    expect(hidden.status).toBe(404);
    const shown = await call("rpc", {
      token: tokens.Owner,
      body: { jsonrpc: "2.0", id: 9, method: "tools.describe", params: { name: "approve_hil" } },
    });
    expect(((await shown.json()) as { result: { rbac_floor: string } }).result.rbac_floor).toBe("Approver");
  });

  it("C-078: the operations core processes the control plane's own events, so explain_verdict reads a real event's verdict", async () => {
    const rotated = await call("settings/api-token/regenerate", { token: tokens.Owner, body: {} });
    expect(rotated.status).toBe(200);
    const events = createEventLog(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
    );
    const [event] = await events.list({ event_type: "token.rotated" });
    expect(event).toBeDefined();
    const explained = await eventually(async () => {
      const reply = await chat("Reader", `explain_verdict event_id=${event?.event_id}`);
      return reply.tool_results[0]?.status === "ok" ? reply.tool_results[0] : undefined;
    }, 30_000);
    expect(explained.data).toMatchObject({
      event_id: event?.event_id,
      tier: "T0",
      decision: "record",
      rule_ids: ["R-TOK-001"],
      verifier_report: null,
      mode: "shadow",
    });
  });

  it("C-316: /chat/health reads the narrator's readiness from the process: none, with the deterministic path ready", async () => {
    const res = await call("chat/health", { token: tokens.Reader });
    expect(await res.json()).toEqual({
      status: "ok",
      narrator: "none",
      narrator_ready: false,
      deterministic_ready: true,
    });
  });
});

describe("npx blastplane console", () => {
  const cli = (...args: string[]) =>
    promisify(execFile)(process.execPath, [path.join(ROOT, "bin/blastplane.mjs"), "console", ...args], {
      env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir },
    });

  it("C-001: --eval signs in with the local identity provider for a role and prints one deterministic reply per turn", async () => {
    const { stdout } = await cli("--role", "Reader", "--eval", "explore_catalog query=R-DB-001", "--eval", "list_hil");
    expect(stdout).toContain("explore_catalog: ok (evidence catalog:rules@1,action_types@1");
    expect(stdout).toContain(
      "Refused: the tool list_hil requires the Approver role; your current role is Reader. The tool was not invoked.",
    );
  });

  it("takes a token instead of a role, prints JSON replies with --json, and fails on a refused token", async () => {
    const { stdout } = await cli(
      "--token",
      tokens.Contributor ?? "",
      "--json",
      "--eval",
      'simulate_change {"event_type":"job.failed","resource_ref":"blast_job/x"}',
    );
    expect(JSON.parse(stdout)).toMatchObject({
      kind: "tool_result",
      intent: "simulate",
      tool_results: [{ status: "ok", tool: "simulate_change" }],
    });
    await expect(cli("--token", "not-a-jwt", "--eval", "search_tools")).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("refused the token (401)"),
    });
  });
});
