import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
  return (await res.json()) as { kind: string; approval_id?: string; text: string };
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

    const rejected = await chatAs(
      tokens.Owner as string,
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
