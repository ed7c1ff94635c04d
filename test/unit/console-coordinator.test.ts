import { describe, expect, it } from "vitest";
import {
  ACTION_CONTEXT_ABSTENTION,
  GLOSSARY,
  LIFECYCLE_ABSTENTION,
} from "../../shared/console/coordinator/coordinator.js";
import { parseCommand } from "../../shared/console/coordinator/verb-parser.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("coord");

function harness(options: Parameters<typeof consoleHarness>[1] = {}) {
  return consoleHarness(azurite.tables(), options);
}
const auditOf = async (h: ReturnType<typeof harness>, requestId: string) =>
  (await h.audit.list({ limit: 1000 })).filter((e) => e.request_id === requestId).reverse();

describe("canonical verb parser", () => {
  it("splits key=value, quoted values, JSON values and a bare JSON object into raw arguments", () => {
    expect(parseCommand('query_audit actor=oid-1 limit=20 decision="deny"')).toEqual({
      ok: true,
      verb: "query_audit",
      args: { actor: "oid-1", limit: "20", decision: "deny" },
    });
    expect(parseCommand('run_runbook name=cancel_job params={"job_id":"a b"} dry_run=true')).toEqual({
      ok: true,
      verb: "run_runbook",
      args: { name: "cancel_job", params: { job_id: "a b" }, dry_run: "true" },
    });
    expect(parseCommand('describe_event {"event_type":"job.failed"}', "payload")).toEqual({
      ok: true,
      verb: "describe_event",
      args: { payload: { event_type: "job.failed" } },
    });
    expect(parseCommand("query_audit limit=1 limit=2")).toMatchObject({ ok: false, error: "limit is given twice" });
    expect(parseCommand("query_audit just words")).toMatchObject({ ok: false });
    expect(parseCommand('describe_event {"broken"')).toMatchObject({
      ok: false,
      error: "the JSON argument is not valid JSON",
    });
  });
});

describe("coordinator", () => {
  it("meets the spec's numbered coordinator rules in order, one rule per entry (narrator rules 2–7 slot in before rule 11's canned reply)", () => {
    expect(harness().coordinator.rules).toEqual([
      { id: "rule-8-agent-match", rule: 8 },
      { id: "rule-1-explicit-command", rule: 1 },
      { id: "rule-9-glossary", rule: 9 },
      { id: "rule-11-t0-direct-hit", rule: 11 },
      { id: "rule-10-action-context", rule: 10 },
      { id: "rule-11-reasoning-unavailable", rule: 11 },
    ]);
  });

  it("C-011 C-067 C-270 C-271: classifies each turn's intent and writes each read call's audit entry, with its class, before the reply returns", async () => {
    const h = harness();
    const turns = [
      ["query_audit limit=1", "read", "read"],
      ['simulate_change {"event_type":"job.failed","resource_ref":"blast_job/j-failed"}', "simulate", "simulate"],
      ['run_runbook name=retry_failed_job params={"job_id":"j-failed"} dry_run=false', "approve", "execute"],
      ['activate_break_glass reason="coordinator intent classification check"', "breakglass", "breakglass"],
    ] as const;
    for (const [text, intent, cls] of turns) {
      const requestId = `intent-${intent}`;
      const reply = await h.coordinator.handleTurn(callerWith("Owner"), { text }, requestId);
      expect(reply.intent).toBe(intent);
      const entry = (await auditOf(h, requestId)).find((e) => e.action === "console.tool_call");
      expect(entry?.details).toMatchObject({ intent, side_effect_class: cls });
      expect(reply.audit_ids).toContain(entry?.audit_id);
    }
  });

  it("C-272 C-273 C-274: a write-class call proceeds only when the verifier passes and the role is met; its audit entry opens before the work and is closed with the final result", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(
      callerWith("Owner"),
      { text: 'run_runbook name=retry_failed_job params={"job_id":"j-failed"} dry_run=false' },
      "write-pass",
    );
    expect(reply.tool_results[0]?.status).toBe("ok");
    const [opened, closed] = await auditOf(h, "write-pass");
    expect(opened).toMatchObject({
      action: "console.tool_started",
      details: { verifier_report: { verdict: "eligible" } },
    });
    expect(closed).toMatchObject({
      action: "console.tool_call",
      outcome: "succeeded",
      details: { opened_audit_id: opened?.audit_id, status: "ok" },
    });
    expect(h.executed).toHaveLength(1);
  });

  it("C-275 C-277 C-278: when the verifier abstains, the write call is replaced by enqueue_hil; the reply gives the filed id and the audit reason is verifier_abstained", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(
      callerWith("Owner"),
      { text: "run_runbook name=redeploy_job_api dry_run=false" },
      "write-abstain",
    );
    expect(reply.kind).toBe("approval_filed");
    expect(reply.text).toContain(`Filed human approval ${reply.approval_id}`);
    expect(reply.text).toContain("missing evidence: cluster_reachable");
    const item = await h.approvalStore.get(reply.approval_id ?? "");
    expect(item).toMatchObject({
      state: "pending",
      reason: "verifier_abstained",
      action: { action_type: "redeploy_job_api", target: "job_api/default" },
    });
    const entries = await auditOf(h, "write-abstain");
    expect(entries.find((e) => e.action === "console.tool_call")?.details).toMatchObject({
      reason: "verifier_abstained",
      approval_id: reply.approval_id,
    });
    expect(entries.find((e) => e.action === "console.enqueue_hil")?.target).toBe(reply.approval_id);
    expect(h.executed).toEqual([]);
  });

  it("C-276: a write call below its argument-dependent floor is filed for approval and not executed", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(
      callerWith("Contributor"),
      { text: 'run_runbook name=cancel_job params={"job_id":"j-running"} dry_run=false' },
      "write-rbac",
    );
    expect(reply.kind).toBe("approval_filed");
    expect((await h.approvalStore.listPending()).map((i) => i.approval_id)).toEqual([reply.approval_id]);
    expect((await auditOf(h, "write-rbac")).find((e) => e.action === "console.tool_call")?.details).toMatchObject({
      reason: "verifier_abstained",
      cause: "rbac_floor_not_met",
    });
    expect(h.executed).toEqual([]);
  });

  it("C-053: a chosen agent that differs from the incident link's agent blocks before any evidence is gathered", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(
      callerWith("Owner"),
      { text: "query_audit limit=1", target_agent: "jobs", incident_agent: "databases" },
      "agent-mismatch",
    );
    expect(reply.kind).toBe("blocked");
    expect(reply.tool_results).toEqual([]);
    expect(await auditOf(h, "agent-mismatch")).toEqual([]);
  });

  it("C-054: a description question about T2 eligibility or insufficient evidence is answered from the glossary with no tool call", async () => {
    const h = harness();
    expect((await h.coordinator.handleTurn(callerWith("Reader"), { text: "What is T2 eligibility?" }, "g1")).text).toBe(
      GLOSSARY.t2_eligibility,
    );
    expect(
      (
        await h.coordinator.handleTurn(
          callerWith("Reader"),
          { text: "explain how insufficient evidence is handled" },
          "g2",
        )
      ).text,
    ).toBe(GLOSSARY.insufficient_evidence);
    expect([...(await auditOf(h, "g1")), ...(await auditOf(h, "g2"))]).toEqual([]);
  });

  it("C-055: a question with an exact approval or idempotency selector is not answered from the glossary; it asks for lifecycle evidence", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(callerWith("Reader"), {
      text: "what is the T2 eligibility of approval apr_0123456789abcdef01234567?",
    });
    expect(reply.kind).toBe("lifecycle_abstention");
    expect(reply.text).toBe(LIFECYCLE_ABSTENTION);
  });

  it("C-056 C-057: a context-free lifecycle question gets the deterministic action-context abstention, with no mutation", async () => {
    const h = harness();
    for (const text of ["can you retry it?", "was it approved?", "is the execution idempotent?"]) {
      const reply = await h.coordinator.handleTurn(callerWith("Owner"), { text }, `ctx-${text}`);
      expect(reply.kind).toBe("action_context_abstention");
      expect(reply.text).toBe(ACTION_CONTEXT_ABSTENTION);
      expect(await auditOf(h, `ctx-${text}`)).toEqual([]);
    }
    expect(await h.approvalStore.listPending()).toEqual([]);
    expect(h.executed).toEqual([]);
  });

  it("C-058 C-059: with no narrator a T0 direct hit is still answered, and other free text gets the canned reply with the lookup surface and the role's tools", async () => {
    const h = harness();
    const hit = await h.coordinator.handleTurn(callerWith("Reader"), { text: "tell me about R-JOB-001 please" });
    expect(hit.kind).toBe("tool_result");
    expect(hit.tool_results[0]).toMatchObject({ status: "ok", tool: "explore_catalog" });
    expect(JSON.stringify(hit.tool_results[0])).toContain("retry_job");
    const canned = await h.coordinator.handleTurn(callerWith("Reader"), { text: "why is everything slow today" });
    expect(canned.kind).toBe("reasoning_unavailable");
    expect(canned.text).toContain("The reasoning layer is temporarily unavailable");
    expect(canned.text).toContain("Direct lookups still work");
    for (const name of h.registry.search("Reader").map((d) => d.name)) expect(canned.text).toContain(name);
    expect(canned.text).not.toContain("list_hil");
  });

  it("C-008: search_tools lists the pipeline stages describe_event, explain_verdict and simulate_change", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(callerWith("Contributor"), { text: "search_tools" });
    const names = (reply.tool_results[0] as { data: { tools: { name: string }[] } }).data.tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(["describe_event", "explain_verdict", "simulate_change"]));
  });

  it("C-063 C-064: a parser-valid call with a tool-invalid argument is a typed tool error and runs no part of the call", async () => {
    const h = harness();
    const reply = await h.coordinator.handleTurn(
      callerWith("Reader"),
      { text: 'activate_break_glass reason="a perfectly good reason here" expiry=999999' },
      "partial",
    );
    expect(reply.tool_results[0]).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments", issues: [{ loc: ["expiry"] }] },
    });
    expect(await h.notifier.list()).toEqual([]);
    expect((await auditOf(h, "partial")).map((e) => e.action)).toEqual(["console.tool_call"]);
  });

  it("C-068 C-069: a failing provider becomes a tool result with status error and a structured error, never a stack trace", async () => {
    const h = harness({
      providers: {
        subscription: {
          scope: async () => {
            throw new Error("socket hang up\n    at TLSSocket.onConnectEnd (node:_tls_wrap:1:1)");
          },
          health: async () => {
            throw new Error("nope");
          },
        },
      },
    });
    const reply = await h.coordinator.handleTurn(callerWith("Reader"), { text: "query_subscription_scope" });
    expect(reply.tool_results[0]).toMatchObject({ status: "error", error: { type: "internal" } });
    expect(reply.text).not.toMatch(/\bat \w+|node:|socket hang up/);
    expect(JSON.stringify(reply)).not.toMatch(/node:_tls_wrap|socket hang up/);
  });
});
