import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  stack = await startStack();
  for (const role of ["Reader", "Approver", "Owner"]) tokens[role] = await mintToken(stack, role);
  tokens.Contributor = await mintToken(stack, "Contributor", { oid: "oid-cora" });
}, 300_000);
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

const url = (path: string) => `${stack.info.functions_url}/api/${path}`;

interface Frame {
  event: string;
  data: Record<string, unknown>;
}

/** One chat turn over `/api/chat/stream` with a real EventSource client; resolves with every frame. */
function streamTurn(token: string, text: string): Promise<Frame[]> {
  return new Promise((resolve, reject) => {
    const frames: Frame[] = [];
    const es = new EventSource(url("chat/stream"), {
      fetch: (input, init) =>
        fetch(input, {
          ...init,
          method: "POST",
          headers: { ...init.headers, Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
          body: JSON.stringify({ text }),
        }),
    });
    for (const event of ["turn", "delta", "activity", "answer", "final", "error"])
      es.addEventListener(event, (message) => {
        frames.push({ event, data: JSON.parse(message.data) as Record<string, unknown> });
        if (event === "final" || event === "error") {
          es.close();
          resolve(frames);
        }
      });
    es.addEventListener("error", (error) => {
      es.close();
      reject(new Error(`stream failed: ${error.message ?? "no detail"}`));
    });
  });
}

describe("POST /api/chat/stream on the local stack", () => {
  it("C-312 C-344: needs a validated bearer token (401 envelope, before any stream opens)", async () => {
    for (const headers of [{}, { Authorization: "Bearer not-a-jwt" }] as Record<string, string>[]) {
      const res = await fetch(url("chat/stream"), {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json" },
        body: JSON.stringify({ text: "search_tools" }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(await res.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    }
  });

  it("refuses a malformed turn with the 422 envelope (loc, msg, type) and malformed JSON with 400", async () => {
    const post = (body: string) =>
      fetch(url("chat/stream"), {
        method: "POST",
        headers: { Authorization: `Bearer ${tokens.Reader}`, "Content-Type": "application/json" },
        body,
      });
    const empty = await post(JSON.stringify({ text: "" }));
    expect(empty.status).toBe(422);
    expect(await empty.json()).toMatchObject({
      detail: [{ loc: ["body", "text"], msg: expect.any(String), type: expect.any(String) }],
      request_id: expect.any(String),
    });
    // A caller-chosen role is not part of a turn.
    expect((await post(JSON.stringify({ text: "search_tools", role: "Owner" }))).status).toBe(422);
    const broken = await post("{not json");
    expect(broken.status).toBe(400);
    expect(await broken.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
  });

  it("C-004 C-313 C-337: a turn streams as text/event-stream through the Functions host: activity, answer, then final", async () => {
    const res = await fetch(url("chat/stream"), {
      method: "POST",
      headers: { Authorization: `Bearer ${tokens.Reader}`, "Content-Type": "application/json" },
      body: JSON.stringify({ text: "search_tools" }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(res.headers.get("x-request-id")).toEqual(expect.any(String));
    await res.body?.cancel();

    const frames = await streamTurn(tokens.Reader as string, "explore_catalog query=R-JOB-001");
    expect(frames.map((f) => f.event)).toEqual(["turn", "activity", "answer", "final"]);
    const answer = frames[2]?.data as { kind: string; evidence_refs: string[]; request_id: string };
    expect(answer.kind).toBe("tool_result");
    expect(answer.evidence_refs).toEqual(["catalog:rules@1,action_types@1"]);
    expect(frames[1]?.data).toMatchObject({ tool: "explore_catalog", evidence_ref: "catalog:rules@1,action_types@1" });
    expect(frames[3]?.data).toMatchObject({
      request_id: answer.request_id,
      plan_source: "deterministic",
      fallback_reason: "no_planner",
    });
  });

  it("C-343: the JSON path and the stream give the same reply; the stream's refusals are the deterministic texts", async () => {
    const frames = await streamTurn(tokens.Reader as string, "list_hil");
    const answer = frames.find((f) => f.event === "answer")?.data as { kind: string; text: string };
    expect(answer.kind).toBe("refused");
    expect(answer.text).toBe(
      "Refused: the tool list_hil requires the Approver role; your current role is Reader. The tool was not invoked.",
    );
    const json = await fetch(url("chat"), {
      method: "POST",
      headers: { Authorization: `Bearer ${tokens.Reader}`, "Content-Type": "application/json" },
      body: JSON.stringify({ text: "list_hil" }),
    });
    expect(((await json.json()) as { text: string }).text).toBe(answer.text);
  });
});

interface LiveFrame {
  kind: string;
  audit_id: string;
  replay: boolean;
  approval_id?: string;
  decision?: string;
  link: string;
  [key: string]: unknown;
}

/** Follows `/api/live/stream` with a real EventSource client, optionally resuming after `lastEventId`. */
function follow(token: string, lastEventId?: string) {
  const frames: { frame: LiveFrame; id: string }[] = [];
  const es = new EventSource(url("live/stream"), {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...init.headers,
          Authorization: `Bearer ${token}`,
          ...(lastEventId && !(init.headers as Record<string, string>)["Last-Event-ID"]
            ? { "Last-Event-ID": lastEventId }
            : {}),
        },
      }),
  });
  const opened = new Promise<void>((resolve) => es.addEventListener("open", () => resolve()));
  es.addEventListener("live", (message) => {
    frames.push({ frame: JSON.parse(message.data) as LiveFrame, id: message.lastEventId });
  });
  const until = (check: (f: LiveFrame) => boolean) =>
    eventually(async () => frames.find((f) => check(f.frame)), 30_000, 50);
  return { es, frames, opened, until };
}

async function chatAs(token: string, text: string) {
  const res = await fetch(url("chat"), {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    kind: string;
    approval_id?: string;
    text: string;
    tool_results?: { status: string; error?: { type: string } }[];
  };
}

describe("GET /api/live/stream on the local stack", () => {
  it("C-320: needs a validated bearer token; a malformed Last-Event-ID is a 422 envelope", async () => {
    expect((await fetch(url("live/stream"))).status).toBe(401);
    const bad = await fetch(url("live/stream"), {
      headers: { Authorization: `Bearer ${tokens.Reader}`, "Last-Event-ID": "'; drop table audit" },
    });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({
      detail: [{ loc: ["header", "last-event-id"], msg: expect.any(String), type: expect.any(String) }],
      request_id: expect.any(String),
    });
  });

  it("C-320 C-321: approval-needed and denied frames reach an Approver live (not a Reader), ids resume by Last-Event-ID as replay", async () => {
    const approver = follow(tokens.Approver as string);
    const reader = follow(tokens.Reader as string);
    await Promise.all([approver.opened, reader.opened]);
    const filed = await chatAs(
      tokens.Contributor as string,
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
    );
    expect(filed.kind).toBe("approval_filed");
    const needed = await approver.until((f) => f.kind === "approval_needed" && f.approval_id === filed.approval_id);
    expect(needed.frame).toMatchObject({ replay: false, action_type: "kill_switch", link: "/console" });
    // Allow-listed scalars only: no target resource, no justification, no approval control.
    expect(Object.keys(needed.frame).sort()).toEqual(
      ["action_type", "approval_id", "at", "audit_id", "kind", "link", "replay"].sort(),
    );
    expect(needed.id).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z~[0-9a-f-]+$/);

    // A decision needs a fresh sign-in (C-372): a token minted now, not the one from the start of the file.
    const rejected = await chatAs(
      await mintToken(stack, "Owner"),
      `approve_hil approval_id=${filed.approval_id} decision=reject justification="not tonight"`,
    );
    expect(rejected.kind).toBe("tool_result");
    const denied = await approver.until((f) => f.kind === "denied" && f.approval_id === filed.approval_id);
    expect(denied.frame).toMatchObject({ decision: "reject", replay: false });
    expect(JSON.stringify(denied.frame)).not.toContain("not tonight");
    approver.es.close();

    // Approval details are Approver-scoped: the Reader's stream carried neither frame.
    expect(reader.frames.some((f) => f.frame.approval_id === filed.approval_id)).toBe(false);
    reader.es.close();

    // A client that reconnects after the approval-needed frame gets the denial again, marked as replay.
    const resumed = follow(tokens.Approver as string, needed.id);
    const replayed = await resumed.until((f) => f.kind === "denied" && f.approval_id === filed.approval_id);
    expect(replayed.frame.replay).toBe(true);
    expect(
      resumed.frames.some((f) => f.frame.kind === "approval_needed" && f.frame.approval_id === filed.approval_id),
    ).toBe(false);
    resumed.es.close();
  });
});

describe("projections without a model (docs/decisions/0021)", () => {
  it("spec §4 /forecast-learning and /dynamic-assurance need a token, then answer a typed 501 unavailable", async () => {
    for (const path of ["forecast-learning", "dynamic-assurance"]) {
      expect((await fetch(url(path))).status, path).toBe(401);
      const res = await fetch(url(path), { headers: { Authorization: `Bearer ${tokens.Reader}` } });
      expect(res.status, path).toBe(501);
      expect(await res.json()).toEqual({
        detail: expect.stringMatching(/^unavailable: /),
        request_id: expect.any(String),
      });
    }
  });
});

/** Follows `/api/agents/stream` with a real EventSource client, optionally resuming after `lastEventId`. */
function followAgents(token: string, lastEventId?: string) {
  const frames: { frame: Record<string, unknown>; id: string }[] = [];
  const runtime: Record<string, unknown>[] = [];
  const es = new EventSource(url("agents/stream"), {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...init.headers,
          Authorization: `Bearer ${token}`,
          ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}),
        },
      }),
  });
  const opened = new Promise<Record<string, unknown>>((resolve) =>
    es.addEventListener("runtime", (message) => {
      const data = JSON.parse(message.data) as Record<string, unknown>;
      runtime.push(data);
      resolve(data);
    }),
  );
  es.addEventListener("agent", (message) => {
    frames.push({ frame: JSON.parse(message.data) as Record<string, unknown>, id: message.lastEventId });
  });
  const until = (check: (f: Record<string, unknown>) => boolean) =>
    eventually(async () => frames.find((f) => check(f.frame)), 30_000, 50);
  return { es, frames, opened, until };
}

const investigate = (token: string | undefined, body: unknown) =>
  fetch(url("read-investigations"), {
    method: "POST",
    headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

/** The stack's own audit log (its Azurite tables): where the latency evidence is persisted. */
const stackAudit = () =>
  createAuditLog(
    `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
  );

/** Records `count` earlier calls of `tool` that each took `ms`: the history the next choice reads. */
async function seedLatency(tool: string, ms: number, count = 20) {
  const audit = stackAudit();
  for (let i = 0; i < count; i++)
    await audit.record({
      actor: { oid: "oid-seed", name: "seed" },
      action: "console.tool_call",
      target: tool,
      outcome: "succeeded",
      request_id: `seed-${tool}-${ms}-${i}`,
      details: { side_effect_class: "read", intent: "read", args: {}, duration_ms: ms },
      visibility_floor: "Reader",
    });
}

describe("GET /api/agents/stream and POST /api/read-investigations on the local stack", () => {
  it("C-322 C-323 C-447: needs a token; says the broker is absent, then streams agent runtime-state frames in order, resumable by Last-Event-ID", async () => {
    expect((await fetch(url("agents/stream"))).status).toBe(401);
    const bad = await fetch(url("agents/stream"), {
      headers: { Authorization: `Bearer ${tokens.Reader}`, "Last-Event-ID": "nope" },
    });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({
      detail: [{ loc: ["header", "last-event-id"] }],
      request_id: expect.any(String),
    });

    const agents = followAgents(tokens.Reader as string);
    expect(await agents.opened).toEqual({ broker: "absent", source: "audit_log", keepalive_ms: 15000, poll_ms: 2000 });
    await chatAs(tokens.Reader as string, "explore_catalog query=R-JOB-001");
    await chatAs(tokens.Reader as string, "search_tools");
    await chatAs(tokens.Reader as string, "query_detection_readiness");
    const catalog = await agents.until((f) => f.tool === "explore_catalog");
    expect(catalog.frame).toMatchObject({
      kind: "observed_execution",
      activity: "ontology_conversion",
      input_kind: "query",
      state: "completed",
      authority: "read",
      replay: false,
    });
    const readiness = await agents.until((f) => f.tool === "query_detection_readiness");
    expect(readiness.frame.activity).toBe("current_state_read");
    // Ordered as recorded; tools that are not agent runs (search_tools) make no frame.
    const order = agents.frames.map((f) => f.frame.tool);
    expect(order.indexOf("explore_catalog")).toBeLessThan(order.indexOf("query_detection_readiness"));
    expect(order).not.toContain("search_tools");
    agents.es.close();

    const resumed = followAgents(tokens.Reader as string, catalog.id);
    const again = await resumed.until((f) => f.audit_id === readiness.frame.audit_id);
    expect(again.frame.replay).toBe(true);
    expect(resumed.frames.some((f) => f.frame.audit_id === catalog.frame.audit_id)).toBe(false);
    resumed.es.close();
  });

  it("C-324: refuses before anything runs: no token 401, an invalid plan 422 (loc per command), a tool above the role 403", async () => {
    expect((await investigate(undefined, { commands: ["search_tools"] })).status).toBe(401);
    for (const body of [
      { commands: [] },
      { commands: ["search_tools"], mode: "direct" },
      { commands: ["a", "b", "c", "d"] },
    ]) {
      const res = await investigate(tokens.Reader, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    const invalid = await investigate(tokens.Owner, {
      commands: ["no_such_tool", 'run_runbook name=kill_switch params={"on":true} dry_run=true', "explore_catalog"],
    });
    expect(invalid.status).toBe(422);
    const detail = ((await invalid.json()) as { detail: { loc: unknown[]; type: string }[] }).detail;
    expect(detail.map((d) => [d.loc, d.type])).toEqual([
      [["body", "commands", 0], "unknown_tool"],
      [["body", "commands", 1], "not_read"],
      [["body", "commands", 2], "invalid_command"],
    ]);
    const duplicate = await investigate(tokens.Reader, {
      commands: ["explore_catalog query=R-JOB-001", "explore_catalog   query=R-JOB-001"],
    });
    expect(duplicate.status).toBe(422);
    const above = await investigate(tokens.Reader, { commands: ["explore_catalog query=R-JOB-001", "list_hil"] });
    expect(above.status).toBe(403);
    expect(await above.json()).toEqual({
      detail:
        "Refused: the tool list_hil requires the Approver role; your current role is Reader. The tool was not invoked.",
      request_id: expect.any(String),
    });
  });

  it("C-324: the execution follows the persisted latency of the same tool: fast history direct, seeded 5 s history streamed, seeded 45 s history detached", async () => {
    const agents = followAgents(tokens.Reader as string);
    await agents.opened;
    const commands = ["explore_catalog query=R-JOB-001"];
    // Fast history (the calls above took milliseconds): direct, a JSON answer with the reads' evidence.
    const direct = await investigate(tokens.Reader, { commands });
    expect(direct.status).toBe(200);
    const body = (await direct.json()) as {
      investigation_id: string;
      mode: string;
      decision: { reason: string; estimate_ms: number; latency: { tool: string; samples: number }[] };
      result: { outcome: string; evidence_refs: string[]; activities: unknown[]; audit_ids: string[] };
    };
    expect(body.mode).toBe("direct");
    expect(body.decision.reason).toBe("fast_history");
    expect(body.decision.latency[0]).toMatchObject({ tool: "explore_catalog", samples: expect.any(Number) });
    expect(body.decision.estimate_ms).toBeLessThanOrEqual(2000);
    expect(body.result).toMatchObject({
      outcome: "answered",
      evidence_refs: ["catalog:rules@1,action_types@1"],
      activities: [{ index: 0, tool: "explore_catalog", input_kind: "query", status: "ok" }],
    });
    const recorded = await agents.until((f) => f.tool === "read_investigation" && f.mode === "direct");
    expect(recorded.frame).toMatchObject({
      activity: "read_investigation",
      input_kind: "query",
      state: "completed",
      steps: 1,
    });

    // The same plan after slower history: streamed, with the decision first and a heartbeat-kept stream.
    await seedLatency("explore_catalog", 5000);
    const frames: { event: string; data: Record<string, unknown> }[] = await new Promise((resolve, reject) => {
      const got: { event: string; data: Record<string, unknown> }[] = [];
      const es = new EventSource(url("read-investigations"), {
        fetch: (input, init) =>
          fetch(input, {
            ...init,
            method: "POST",
            headers: { ...init.headers, Authorization: `Bearer ${tokens.Reader}`, "Content-Type": "application/json" },
            body: JSON.stringify({ commands }),
          }),
      });
      for (const event of ["decision", "activity", "result", "error"])
        es.addEventListener(event, (message) => {
          got.push({ event, data: JSON.parse(message.data) as Record<string, unknown> });
          if (event === "result" || event === "error") {
            es.close();
            resolve(got);
          }
        });
      es.addEventListener("error", (error) => {
        es.close();
        reject(new Error(`stream failed: ${error.message ?? "no detail"}`));
      });
    });
    expect(frames.map((f) => f.event)).toEqual(["decision", "activity", "result"]);
    expect(frames[0]?.data).toMatchObject({
      mode: "streamed",
      decision: { reason: "moderate_history", estimate_ms: 5000 },
    });
    expect(frames[2]?.data).toMatchObject({
      result: { outcome: "answered", evidence_refs: ["catalog:rules@1,action_types@1"] },
    });

    // Slow history: detached, a durable operation; the reads still run and are recorded.
    await seedLatency("explore_catalog", 45_000);
    const detached = await investigate(tokens.Reader, { commands });
    expect(detached.status).toBe(200);
    const started = (await detached.json()) as {
      investigation_id: string;
      mode: string;
      decision: { reason: string };
      operation_status_url: string;
    };
    expect(started).toMatchObject({ mode: "detached", decision: { reason: "slow_history" } });
    expect(started.operation_status_url).toBe(`/api/operations/${started.investigation_id}`);
    const done = await eventually(
      async () => {
        const res = await fetch(`${stack.info.functions_url}${started.operation_status_url}`, {
          headers: { Authorization: `Bearer ${tokens.Reader}` },
        });
        const op = (await res.json()) as { state: string; operation_type: string };
        return op.state === "succeeded" || op.state === "failed" ? op : undefined;
      },
      120_000,
      250,
    );
    expect(done).toMatchObject({ state: "succeeded", operation_type: "console.read_investigation" });
    const entry = (await stackAudit().list({ action: "console.read_investigation", limit: 100 })).find(
      (e) => e.target === started.investigation_id,
    );
    expect(entry?.details).toMatchObject({
      mode: "detached",
      outcome: "answered",
      steps: [{ tool: "explore_catalog", status: "ok", evidence_ref: "catalog:rules@1,action_types@1" }],
    });

    // C-324: the detached result is retrievable by the principal that started it, as a direct answer carries it.
    const resultOf = (token: string, id = started.investigation_id) =>
      fetch(url(`read-investigations/${id}`), { headers: { Authorization: `Bearer ${token}` } });
    const fetched = await resultOf(tokens.Reader as string);
    expect(fetched.status).toBe(200);
    expect(await fetched.json()).toMatchObject({
      investigation_id: started.investigation_id,
      mode: "detached",
      status: "succeeded",
      operation_status_url: started.operation_status_url,
      result: {
        outcome: "answered",
        evidence_refs: ["catalog:rules@1,action_types@1"],
        activities: [{ index: 0, tool: "explore_catalog", input_kind: "query", status: "ok" }],
        tool_results: [{ status: "ok", tool: "explore_catalog" }],
        audit_ids: expect.arrayContaining([entry?.audit_id]),
      },
      meta: { request_id: expect.any(String) },
    });
    // No token 401; another principal's investigation and an unknown id are the same 404; a malformed id 400.
    expect((await fetch(url(`read-investigations/${started.investigation_id}`))).status).toBe(401);
    const foreign = await resultOf(await mintToken(stack, "Owner", { oid: "oid-someone-else" }));
    const unknown = await resultOf(tokens.Reader as string, `op-${"0".repeat(32)}`);
    for (const res of [foreign, unknown]) {
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({
        detail: expect.stringMatching(/^no read investigation op-/),
        request_id: expect.any(String),
      });
    }
    expect((await resultOf(tokens.Reader as string, "op-nothex")).status).toBe(400);

    // A list_hil investigation carries the Approver floor: its starter, now signed in as a Reader, is refused.
    await seedLatency("list_hil", 45_000);
    const approver = await mintToken(stack, "Approver", { oid: "oid-april" });
    const approvals = (await (await investigate(approver, { commands: ["list_hil"] })).json()) as {
      investigation_id: string;
      mode: string;
    };
    expect(approvals.mode).toBe("detached");
    await eventually(async () => {
      const body = (await (await resultOf(approver, approvals.investigation_id)).json()) as { status: string };
      return body.status === "running" ? undefined : body;
    }, 120_000);
    const demoted = await resultOf(await mintToken(stack, "Reader", { oid: "oid-april" }), approvals.investigation_id);
    expect(demoted.status).toBe(403);
    expect(await demoted.json()).toMatchObject({
      detail: "this investigation's reads need the Approver role; your current role is Reader",
      request_id: expect.any(String),
    });
    agents.es.close();
  }, 240_000);
});

describe("GET /api/approvals on the local stack", () => {
  it("C-348 C-349: Readers get the count only; Approvers and Owners each item with the server's may_decide (the kill switch needs an Owner; never one's own)", async () => {
    expect((await fetch(url("approvals"))).status).toBe(401);
    const filed = await chatAs(
      tokens.Contributor as string,
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
    );
    expect(filed.kind).toBe("approval_filed");
    const queue = async (token: string) => {
      const res = await fetch(url("approvals"), { headers: { Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      return (await res.json()) as {
        role: string;
        count: number;
        details: string;
        items: {
          approval_id: string;
          may_decide: boolean;
          refusal?: string;
          required_role: string;
          action_hash: string;
        }[];
      };
    };
    const reader = await queue(tokens.Reader as string);
    expect(reader).toMatchObject({ role: "Reader", details: "count_only", items: [] });
    expect(reader.count).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(reader)).not.toContain(filed.approval_id);

    const approverItem = (await queue(tokens.Approver as string)).items.find(
      (i) => i.approval_id === filed.approval_id,
    );
    expect(approverItem).toMatchObject({
      may_decide: false,
      refusal: "decider_role_below_action_floor",
      required_role: "Owner",
      action_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    const ownerItem = (await queue(tokens.Owner as string)).items.find((i) => i.approval_id === filed.approval_id);
    expect(ownerItem).toMatchObject({ may_decide: true, required_role: "Owner" });
    // The filer, were it an Owner, may not decide its own item, whatever its role.
    const ownerFiler = await mintToken(stack, "Owner", { oid: "oid-cora" });
    expect((await queue(ownerFiler)).items.find((i) => i.approval_id === filed.approval_id)).toMatchObject({
      may_decide: false,
      refusal: "no_self_approval",
    });

    // The decision the page sends: approve_hil with the item's action_hash; the item leaves the queue.
    const decided = await chatAs(
      await mintToken(stack, "Owner"),
      `approve_hil approval_id=${filed.approval_id} decision=reject justification="not tonight" action_hash=${ownerItem?.action_hash}`,
    );
    expect(decided.kind).toBe("tool_result");
    expect((await queue(tokens.Owner as string)).items.some((i) => i.approval_id === filed.approval_id)).toBe(false);
  });

  it("C-372 C-374: POST /api/approvals/{id}/decision needs a fresh sign-in (401 step-up challenge, nothing decided) and the item's action_hash; approve_hil in the chat refuses the same stale token", async () => {
    const filed = await chatAs(
      tokens.Contributor as string,
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
    );
    expect(filed.kind).toBe("approval_filed");
    const approvalId = filed.approval_id as string;
    const item = async () => {
      const res = await fetch(url("approvals"), {
        headers: { Authorization: `Bearer ${await mintToken(stack, "Owner")}` },
      });
      return ((await res.json()) as { items: { approval_id: string; action_hash: string }[] }).items.find(
        (i) => i.approval_id === approvalId,
      );
    };
    const actionHash = (await item())?.action_hash as string;
    const decide = (token: string, body: unknown, id = approvalId) =>
      fetch(url(`approvals/${id}/decision`), {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    const body = { decision: "reject", justification: "not during the run", action_hash: actionHash };

    // Before anything: a token, then the Approver floor.
    expect((await decide("", body)).status).toBe(401);
    expect((await decide(tokens.Reader as string, body)).status).toBe(403);

    // Signed in an hour ago: a valid token, but no recent sign-in. RFC 9470's challenge, the envelope, nothing decided.
    const stale = await mintToken(stack, "Owner", { oid: "oid-olga", auth_age_seconds: 3600 });
    const refused = await decide(stale, body);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toBe(
      'Bearer error="insufficient_user_authentication", error_description="a recent sign-in is required", max_age="300"',
    );
    const envelope = (await refused.json()) as { detail: string; request_id: string };
    expect(envelope.detail).toMatch(/^re-authentication required: sign in again \(within the last 300 s\)/);
    expect(envelope.request_id).toBe(refused.headers.get("x-request-id"));
    const viaChat = await chatAs(
      stale,
      `approve_hil approval_id=${approvalId} decision=reject justification="not during the run" action_hash=${actionHash}`,
    );
    expect(viaChat.tool_results?.[0]).toMatchObject({ status: "error", error: { type: "reauthentication_required" } });
    expect(await item()).toBeDefined();

    // Fresh: malformed input is refused in the envelopes, a different action_hash is a conflict.
    const fresh = await mintToken(stack, "Owner", { oid: "oid-olga" });
    expect((await decide(fresh, body, "apr_nothex")).status).toBe(400);
    const invalid = await decide(fresh, { decision: "maybe", justification: "x" });
    expect(invalid.status).toBe(422);
    expect(((await invalid.json()) as { detail: { loc: unknown[] }[] }).detail.map((i) => i.loc)).toEqual(
      expect.arrayContaining([
        ["body", "decision"],
        ["body", "action_hash"],
      ]),
    );
    expect((await decide(fresh, { ...body, action_hash: "0".repeat(64) })).status).toBe(409);
    expect((await decide(fresh, body, "apr_000000000000000000000000")).status).toBe(404);

    const decided = await decide(fresh, body);
    expect(decided.status).toBe(200);
    expect(await decided.json()).toMatchObject({
      outcome: "recorded",
      approval_id: approvalId,
      state: "rejected",
      decision: { decision: "reject", actor: { oid: "oid-olga" } },
    });
    expect(await item()).toBeUndefined();
    // The same decider and decision again: the existing evidence.
    expect(await (await decide(fresh, body)).json()).toMatchObject({ outcome: "existing", state: "rejected" });
  });
});
