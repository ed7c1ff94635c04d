import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createOutboxNotifier } from "../../shared/notify/outbox-notifier.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

const stacks: TestStack[] = [];
const folders: string[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
  for (const f of folders) rmSync(f, { recursive: true, force: true });
});

const APPROVERS = "oid-approver-1";
async function started(options: Parameters<typeof startStack>[0]) {
  const stack = await startStack(options);
  stacks.push(stack);
  return stack;
}
const storage = (stack: TestStack) =>
  `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;

async function chat(stack: TestStack, token: string, text: string) {
  const res = await fetch(`${stack.info.functions_url}/api/chat`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as {
    kind: string;
    text: string;
    approval_id?: string;
    tool_results: { status: string; data?: Record<string, unknown>; error?: Record<string, unknown> }[];
  };
}
async function instance(stack: TestStack, id: string) {
  return (await (await fetch(`${stack.info.durable_rpc_url}instances/${id}`)).json()) as {
    runtimeStatus: string;
    output: Record<string, unknown> | null;
  };
}

describe("the approvalRequest orchestration on the local stack", () => {
  it("a stack killed with SIGKILL while an approval is pending, restarted, then approved, executes the action exactly once", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-approval-"));
    folders.push(dataDir);
    const env = { SVC_CONSOLE_APPROVERS: APPROVERS };
    const first = await started({ dataDir, inMemory: false, env });
    // A Contributor asks for an Owner-floor action: it is parked for approval, not executed.
    const filed = await chat(
      first,
      await mintToken(first, "Contributor", { oid: "oid-cora" }),
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
    );
    expect(filed.kind).toBe("approval_filed");
    const approvalId = filed.approval_id ?? "";
    // The orchestration parked it and delivered the request to the approver (the signal to wait on).
    const outbox = createOutboxNotifier(storage(first));
    const delivered = await eventually(
      async () => ((await outbox.list()).some((m) => m.correlation_id === approvalId) ? true : undefined),
      30_000,
    );
    expect(delivered).toBe(true);
    expect((await instance(first, approvalId)).runtimeStatus).toBe("Running");
    await first.kill();

    const second = await started({ dataDir, inMemory: false, env });
    const approver = await mintToken(second, "Owner", { oid: "oid-owner-2" });
    const approved = await chat(
      second,
      approver,
      `approve_hil approval_id=${approvalId} decision=approve justification="restart drill"`,
    );
    expect(approved.tool_results[0]).toMatchObject({
      status: "ok",
      data: { outcome: "recorded", state: "approved", execution: { status: "succeeded" } },
    });
    // The orchestration resumed after the restart, received the decision and ended without executing again.
    const done = await eventually(async () => {
      const s = await instance(second, approvalId);
      return s.runtimeStatus === "Completed" ? s : undefined;
    }, 30_000);
    expect(done.output).toMatchObject({
      approval_id: approvalId,
      state: "approved",
      execution: { status: "succeeded" },
    });
    const audit = createAuditLog(storage(second));
    const executions = (await audit.list({ action: "console.action_executed", limit: 1000 })).filter(
      (e) => e.target === approvalId,
    );
    expect(executions).toHaveLength(1);
    // The effect is real: with the kill switch on, the verifier now denies other actions.
    const dry = await chat(
      second,
      await mintToken(second, "Contributor"),
      'run_runbook name=retry_failed_job params={"job_id":"j-1"} dry_run=true',
    );
    expect(dry.tool_results[0]?.data).toMatchObject({ verifier_report: { verdict: "deny" } });
    // A replayed approval changes nothing.
    const replay = await chat(
      second,
      approver,
      `approve_hil approval_id=${approvalId} decision=approve justification="restart drill"`,
    );
    expect(replay.tool_results[0]).toMatchObject({ status: "ok", data: { outcome: "existing" } });
    expect(
      (await audit.list({ action: "console.action_executed", limit: 1000 })).filter((e) => e.target === approvalId),
    ).toHaveLength(1);
    // Turning it on was announced once as an A2 operational alert, with its audit entry.
    const alerts = (await createOutboxNotifier(storage(second)).list()).filter((m) => m.category === "A2");
    expect(alerts.map((m) => [m.template_key, m.recipient])).toEqual([["kill_switch.on", "oid-approver-1"]]);
    expect(await audit.list({ action: "console.kill_switch_on", limit: 1000 })).toMatchObject([
      { actor: { oid: "oid-owner-2" }, outcome: "succeeded" },
    ]);
    // Hang guard, not a timing claim: two stack starts on a loaded 2-core machine took over 30 s once.
  }, 180_000);

  it("C-284 C-285 C-286: the TTL timer times the request out (one audit entry); a late approval returns the timeout and executes nothing", async () => {
    const stack = await started({
      env: {
        SVC_CONSOLE_APPROVERS: APPROVERS,
        // The reminder is due 5 s after filing and 5 s before expiry: the orchestration schedules
        // only reminders still ahead of its clock, so filing and planning must finish inside 5 s.
        SVC_APPROVAL_TTL_SECONDS: "10",
        SVC_APPROVAL_REMINDER_OFFSETS_SECONDS: "5",
      },
    });
    const filed = await chat(
      stack,
      await mintToken(stack, "Contributor", { oid: "oid-cora" }),
      'run_runbook name=kill_switch params={"on":true} dry_run=false',
    );
    const approvalId = filed.approval_id ?? "";
    const done = await eventually(async () => {
      const s = await instance(stack, approvalId);
      return s.runtimeStatus === "Completed" ? s : undefined;
    }, 30_000);
    expect(done.output).toMatchObject({ state: "timeout", execution: null });
    const late = await chat(
      stack,
      await mintToken(stack, "Approver", { oid: "oid-approver-1" }),
      `approve_hil approval_id=${approvalId} decision=approve justification="too late"`,
    );
    expect(late.tool_results[0]).toMatchObject({
      status: "ok",
      data: { outcome: "timeout", state: "timeout", execution: null },
    });
    const audit = createAuditLog(storage(stack));
    expect(
      (await audit.list({ action: "console.approval_timeout", limit: 1000 })).filter((e) => e.target === approvalId),
    ).toHaveLength(1);
    expect(
      (await audit.list({ action: "console.action_executed", limit: 1000 })).filter((e) => e.target === approvalId),
    ).toHaveLength(0);
    // The one reminder went out 5 s before expiry, before the timeout.
    const reminders = (await audit.list({ action: "console.approval_reminder", limit: 1000 })).filter(
      (e) => e.target === approvalId,
    );
    expect(reminders).toHaveLength(1);
  }, 120_000);

  it("C-281: with SVC_APPROVAL_LOAD_POLICY grouping requests, each filed request goes out in exactly one digest and never alone", async () => {
    const policyDir = mkdtempSync(path.join(tmpdir(), "bp-load-policy-"));
    folders.push(policyDir);
    const policy = path.join(policyDir, "approval-load.yaml");
    writeFileSync(policy, "version: 1\ngroup_interval_seconds: 5\n");
    const stack = await started({ env: { SVC_CONSOLE_APPROVERS: APPROVERS, SVC_APPROVAL_LOAD_POLICY: policy } });
    const token = await mintToken(stack, "Contributor", { oid: "oid-cora" });
    const ids: string[] = [];
    for (const pool of ["a", "b", "c"]) {
      const filed = await chat(
        stack,
        token,
        `run_runbook name=scale_node_pool params={"pool":"${pool}","node_count":3} dry_run=false`,
      );
      expect(filed.kind).toBe("approval_filed");
      ids.push(filed.approval_id ?? "");
    }
    const outbox = createOutboxNotifier(storage(stack));
    const audit = createAuditLog(storage(stack));
    // The signal: every filed id named by a digest (requests filed across a 5 s boundary fall in two
    // groups) and by its audit entry, which is written after the delivery's record.
    const digests = await eventually(async () => {
      const sent = (await outbox.list()).filter((m) => m.template_key === "approval.digest");
      const auditedMembers = (await audit.list({ action: "console.approval_digest", limit: 1000 })).flatMap(
        (e) => (e.details?.members as string[] | undefined) ?? [],
      );
      const covered = ids.every((id) => sent.some((m) => m.body_markdown.includes(id)) && auditedMembers.includes(id));
      return covered ? sent : undefined;
    }, 60_000);
    for (const id of ids) expect(digests.filter((m) => m.body_markdown.includes(id))).toHaveLength(1);
    expect(digests.every((m) => m.category === "A1" && m.recipient === "oid-approver-1")).toBe(true);
    expect((await outbox.list()).filter((m) => m.template_key === "approval.request")).toEqual([]);
    const audited = await audit.list({ action: "console.approval_digest", limit: 1000 });
    expect(audited).toHaveLength(digests.length);
    expect(audited.flatMap((e) => e.details?.members as string[]).sort()).toEqual([...ids].sort());
  }, 120_000);
});
