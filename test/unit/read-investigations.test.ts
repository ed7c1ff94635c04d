import { describe, expect, it } from "vitest";
import { z } from "zod";
import { agentFramesOf } from "../../shared/console/activity.js";
import { followAudit, relayAudit } from "../../shared/console/live-feed.js";
import {
  chooseExecution,
  detachedInvestigationView,
  type InvestigationInstance,
  type InvestigationRunner,
  latencyEvidence,
  planInvestigation,
  runInvestigation,
} from "../../shared/console/read-investigations.js";
import { createToolRegistry } from "../../shared/console/tools/registry.js";
import { defineTool, type ToolResult } from "../../shared/console/tools/tool.js";
import { ForbiddenError, NotFoundError, ValidationError } from "../../shared/errors.js";
import { createSseStream } from "../../shared/http/sse.js";
import type { AuditEntry, AuditLog } from "../../shared/ops/audit.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";

const tool = (name: string, floor: "Reader" | "Approver", cls: "read" | "execute" = "read") =>
  defineTool({
    descriptor: {
      name,
      description: `${name}.`,
      argument_hint: `${name} [id=<text>]`,
      rbac_floor: floor,
      side_effect_class: cls,
      failure_modes: [],
    },
    args: z.strictObject({ id: z.string().max(20).optional() }),
    run: async () => ({ data: {}, evidence_ref: `${name}:1` }),
  });
const registry = createToolRegistry([
  tool("read_a", "Reader"),
  tool("read_b", "Reader"),
  tool("list_secret", "Approver"),
  tool("do_thing", "Reader", "execute"),
]);

let n = 0;
const call = (target: string, durationMs: unknown, outcome: AuditEntry["outcome"] = "succeeded"): AuditEntry => ({
  audit_id: `00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`,
  at: new Date(Date.UTC(2026, 10, 27, 10, 0, 0, n)).toISOString(),
  actor: { oid: "oid-x", name: "X" },
  action: "console.tool_call",
  target,
  outcome,
  request_id: `req-${n}`,
  details: { duration_ms: durationMs },
  visibility_floor: "Reader",
});

describe("read investigations: the plan (shared/console/read-investigations.ts)", () => {
  it("C-324: every command is checked before anything runs; a tool above the role is refused by name", () => {
    expect(planInvestigation(registry, "Reader", ["read_a id=1", "read_b"])).toEqual({
      steps: [
        { index: 0, tool: "read_a", command: "read_a id=1" },
        { index: 1, tool: "read_b", command: "read_b" },
      ],
      visibilityFloor: "Reader",
    });
    expect(planInvestigation(registry, "Owner", ["list_secret"]).visibilityFloor).toBe("Approver");
    const invalid = (() => {
      try {
        planInvestigation(registry, "Reader", ["nope", "do_thing", `read_a id=${"x".repeat(30)}`, "read_b", "read_b"]);
      } catch (error) {
        return error;
      }
    })();
    expect(invalid).toBeInstanceOf(ValidationError);
    expect((invalid as ValidationError).issues.map((i) => [i.loc[2], i.type])).toEqual([
      [0, "unknown_tool"],
      [1, "not_read"],
      [2, "invalid_command"],
      [4, "duplicate"],
    ]);
    expect(() => planInvestigation(registry, "Reader", ["read_a", "list_secret"])).toThrow(ForbiddenError);
  });
});

describe("read investigations: the choice from persisted latency", () => {
  const steps = planInvestigation(registry, "Reader", ["read_a", "read_b"]).steps;

  it("C-324: p90 of each tool's latest samples, summed over the serial reads, picks direct, streamed or detached", () => {
    // Newest first, as the audit log lists: 20 samples of read_a count, older ones do not.
    const fast = [...Array.from({ length: 20 }, () => call("read_a", 100)), call("read_a", 99_000)];
    const evidence = latencyEvidence([...fast, call("read_b", 300), call("other", 50_000)], ["read_a", "read_b"]);
    expect(evidence).toEqual([
      { tool: "read_a", samples: 20, p90_ms: 100 },
      { tool: "read_b", samples: 1, p90_ms: 300 },
    ]);
    expect(chooseExecution(steps, evidence)).toMatchObject({
      mode: "direct",
      estimate_ms: 400,
      reason: "fast_history",
    });

    const moderate = latencyEvidence(
      [...Array.from({ length: 9 }, () => call("read_a", 200)), call("read_a", 9000), call("read_b", 3000)],
      ["read_a", "read_b"],
    );
    // Nearest-rank p90 of ten samples is the ninth: one slow outlier does not decide.
    expect(moderate[0]).toEqual({ tool: "read_a", samples: 10, p90_ms: 200 });
    expect(chooseExecution(steps, moderate)).toMatchObject({ mode: "streamed", reason: "moderate_history" });

    const slow = latencyEvidence([call("read_a", 25_000), call("read_b", 10_000)], ["read_a", "read_b"]);
    expect(chooseExecution(steps, slow)).toMatchObject({
      mode: "detached",
      estimate_ms: 35_000,
      reason: "slow_history",
    });
  });

  it("C-324: a tool without usable history (none, or entries without a duration) streams; the estimate says unknown", () => {
    const evidence = latencyEvidence(
      [call("read_a", 50), call("read_b", "fast"), call("read_b", -1)],
      ["read_a", "read_b"],
    );
    expect(evidence[1]).toEqual({ tool: "read_b", samples: 0, p90_ms: null });
    expect(chooseExecution(steps, evidence)).toMatchObject({
      mode: "streamed",
      estimate_ms: null,
      reason: "no_latency_evidence",
    });
  });
});

describe("read investigations: running the reads", () => {
  const caller = { oid: "oid-r", name: "R", tenant_id: "t", roles: ["Reader" as const] };
  const ok = (tool: string): ToolResult => ({
    status: "ok",
    tool,
    data: {},
    evidence_ref: `${tool}:1`,
    observed_at: "2026-11-27T10:00:00.000Z",
  });
  const runner = (failOn?: string): InvestigationRunner & { calls: string[] } => {
    const calls: string[] = [];
    return {
      calls,
      handleTurn: async (_caller, turn) => {
        calls.push(turn.text);
        const name = turn.text.split(" ")[0] as string;
        const result: ToolResult =
          name === failOn
            ? { status: "unavailable", tool: name, error: { type: "unavailable", message: "no provider" } }
            : ok(name);
        return {
          kind: "tool_result",
          text: `${name}: ${result.status}`,
          tool_results: [result],
          evidence_refs: result.status === "ok" ? [result.evidence_ref] : [],
          audit_ids: [`audit-${name}`],
        };
      },
    };
  };

  it("reads run serially; one unavailable read stops the rest and the answer is the unverified abstention", async () => {
    const plan = planInvestigation(registry, "Reader", ["read_a", "read_b", "list_secret"].slice(0, 2));
    const good = runner();
    const seen: string[] = [];
    const answered = await runInvestigation(good, {
      caller,
      plan,
      requestId: "r1",
      onActivity: (a) => seen.push(`${a.tool}:${a.status}`),
    });
    expect(answered).toMatchObject({ outcome: "answered", evidence_refs: ["read_a:1", "read_b:1"] });
    expect(seen).toEqual(["read_a:ok", "read_b:ok"]);

    const failing = runner("read_a");
    const abstained = await runInvestigation(failing, { caller, plan, requestId: "r2" });
    expect(failing.calls).toEqual(["read_a"]);
    expect(abstained.outcome).toBe("abstained");
    expect(abstained.text).toMatch(/^One of the reads this answer needs failed or is unavailable.*Step 1 \(read_a\)/);
    expect(abstained.activities).toEqual([{ index: 0, tool: "read_a", input_kind: "query", status: "unavailable" }]);
  });

  it("a cancelled investigation starts no further read", async () => {
    const plan = planInvestigation(registry, "Reader", ["read_a", "read_b"]);
    const controller = new AbortController();
    const r = runner();
    const result = await runInvestigation(r, {
      caller,
      plan,
      requestId: "r3",
      abortSignal: controller.signal,
      onActivity: () => controller.abort(),
    });
    expect(r.calls).toEqual(["read_a"]);
    expect(result.outcome).toBe("abstained");
  });
});

describe("agent runtime-state frames (GET /api/agents/stream)", () => {
  it("C-322 C-447: agent runs become ordered frames with their state; other entries make none", () => {
    const inventory = { ...call("query_inventory", 10, "failed") };
    expect(agentFramesOf(inventory, false)).toEqual([
      {
        kind: "observed_execution",
        activity: "inventory_scan",
        input_kind: "query",
        tool: "query_inventory",
        state: "failed",
        authority: "read",
        at: inventory.at,
        audit_id: inventory.audit_id,
        replay: false,
      },
    ]);
    expect(agentFramesOf(call("search_tools", 1), false)).toEqual([]);
    const investigation: AuditEntry = {
      ...call("x", 1),
      action: "console.read_investigation",
      target: "op-0",
      details: { mode: "detached", steps: [{}, {}] },
    };
    expect(agentFramesOf(investigation, true)[0]).toMatchObject({
      activity: "read_investigation",
      mode: "detached",
      steps: 2,
      state: "completed",
      replay: true,
    });
  });

  it("C-323: with no broker and nothing happening, the stream still sends keep-alive comments", async () => {
    const audit: AuditLog = { record: async () => Promise.reject(new Error("read only")), list: async () => [] };
    const { body, channel } = createSseStream({ heartbeatMs: 50, maxBacklogBytes: 64 * 1024 });
    const relay = relayAudit(
      channel,
      "agent",
      followAudit(
        { audit, pollMs: 20, retentionMs: 60_000 },
        { role: "Reader", abortSignal: channel.abortSignal },
        agentFramesOf,
      ),
    );
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes(": heartbeat\n\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toContain(": heartbeat\n\n");
    expect(text).not.toContain("event:");
    await reader.cancel();
    await relay;
    expect(await channel.ended).toBe("client_closed");
  });
});

describe("read investigations: a detached one's result, as GET /api/read-investigations/{id} shows it", () => {
  const id = `op-${"a".repeat(32)}`;
  const starter = { oid: "oid-april", name: "April", tenant_id: "t1", roles: ["Approver" as const] };
  const result = {
    outcome: "answered" as const,
    text: "ok",
    activities: [],
    tool_results: [],
    evidence_refs: ["approvals:none"],
    audit_ids: ["a1"],
  };
  const instance = (over: Partial<InvestigationInstance> = {}): InvestigationInstance => ({
    name: Orchestrations.readInvestigation,
    input: {
      investigation_id: id,
      request_id: "r1",
      caller: starter,
      plan: planInvestigation(registry, "Approver", ["list_secret"]),
      choice: { mode: "detached", estimate_ms: 45_000, reason: "slow_history" },
    },
    output: undefined,
    runtimeStatus: "Running",
    createdAt: new Date("2026-11-28T03:00:00Z"),
    ...over,
  });

  it("C-324: `running` (no result) until the operation ends, whatever the runtime reports before that", () => {
    for (const runtimeStatus of ["Pending", "Running", "ContinuedAsNew", "Suspended"])
      expect(detachedInvestigationView(id, instance({ runtimeStatus }), starter, "Approver")).toEqual({
        status: "running",
        started_at: "2026-11-28T03:00:00.000Z",
      });
    // Completed, but its output not yet readable: still running, never a succeeded without a result.
    expect(detachedInvestigationView(id, instance({ runtimeStatus: "Completed" }), starter, "Approver").status).toBe(
      "running",
    );
  });

  it("C-324: the orchestration's outcome and result once it ended; a failed or terminated instance is failed", () => {
    expect(
      detachedInvestigationView(
        id,
        instance({ runtimeStatus: "Completed", output: { outcome: "succeeded", audit_id: "a2", result } }),
        starter,
        "Approver",
      ),
    ).toEqual({ status: "succeeded", started_at: "2026-11-28T03:00:00.000Z", result });
    for (const runtimeStatus of ["Failed", "Terminated"])
      expect(detachedInvestigationView(id, instance({ runtimeStatus }), starter, "Approver").status).toBe("failed");
  });

  it("only its starter reads it, and only while the starter's role holds the plan's highest floor (403 naming both roles)", () => {
    const ended = instance({ runtimeStatus: "Completed", output: { outcome: "succeeded", audit_id: "a2", result } });
    expect(() => detachedInvestigationView(id, ended, starter, "Reader")).toThrow(
      new ForbiddenError("this investigation's reads need the Approver role; your current role is Reader"),
    );
    expect(detachedInvestigationView(id, ended, { ...starter, oid: "OID-APRIL" }, "Owner").status).toBe("succeeded");
    // Another principal's, another orchestration's and no instance at all: the same 404.
    const notFound = new NotFoundError(`no read investigation ${id}`);
    expect(() => detachedInvestigationView(id, ended, { ...starter, oid: "oid-other" }, "Owner")).toThrow(notFound);
    expect(() => detachedInvestigationView(id, { ...ended, name: "provisionCluster" }, starter, "Owner")).toThrow(
      notFound,
    );
    expect(() => detachedInvestigationView(id, undefined, starter, "Owner")).toThrow(notFound);
  });
});
