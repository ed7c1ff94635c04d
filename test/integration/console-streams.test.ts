import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  stack = await startStack();
  for (const role of ["Reader", "Approver", "Owner"]) tokens[role] = await mintToken(stack, role);
});
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
