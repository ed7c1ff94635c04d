import { describe, expect, it } from "vitest";
import { createApprovalActivities } from "../../shared/console/approvals/approval-activities.js";
import { createApprovalService, NO_SELF_APPROVAL } from "../../shared/console/approvals/approval-service.js";
import { ActionInProgressError } from "../../shared/ops/actions/action-executor.js";
import { actionHash } from "../../shared/console/approvals/approval-store.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { actions, callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("appr");

/** A console whose clock the test moves. */
function harness(options: Parameters<typeof consoleHarness>[1] = {}) {
  const clock = { now: new Date("2026-03-01T10:00:00Z") };
  const tables = azurite.tables();
  const h = consoleHarness(tables, { now: () => clock.now, ...options });
  return { ...h, clock, tables };
}
type H = ReturnType<typeof harness>;

/** Files an approval the way the coordinator does: an Owner's write call the verifier abstains on. */
async function fileFor(
  h: H,
  requester: ReturnType<typeof callerWith>,
  text = "run_runbook name=redeploy_job_api dry_run=false",
) {
  h.state.clusterReachable = undefined;
  const reply = await h.coordinator.handleTurn(requester, { text });
  if (!reply.approval_id) throw new Error(reply.text);
  // Evidence arrives afterwards, so an approver's re-check can pass.
  h.state.clusterReachable = true;
  return reply.approval_id;
}
async function decide(
  h: H,
  who: ReturnType<typeof callerWith>,
  approvalId: string,
  decision = "approve",
  requestId?: string,
): Promise<ToolResult> {
  const reply = await h.coordinator.handleTurn(
    who,
    { text: `approve_hil approval_id=${approvalId} decision=${decision} justification="checked the cluster"` },
    requestId,
  );
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}

describe("human approvals", () => {
  it("C-348 C-349 C-350: the requester cannot approve its own item, even as an Owner; the audit reason names the invariant", async () => {
    const h = harness();
    const owner = callerWith("Owner", "oid-olga");
    const id = await fileFor(h, owner);
    const result = await decide(h, owner, id, "approve", "self");
    expect(result).toMatchObject({ status: "error", error: { type: "self_approval" } });
    const entry = (await h.audit.list()).find((e) => e.request_id === "self" && e.action === "console.approve_hil");
    expect(entry).toMatchObject({
      outcome: "denied",
      details: { reason: NO_SELF_APPROVAL, invariant: NO_SELF_APPROVAL },
    });
    expect((await h.approvalStore.get(id))?.state).toBe("pending");
    expect(h.executed).toEqual([]);
  });

  it("C-117 C-120 C-373: list_hil shows target, action and requester; approve_hil resolves only the named item and executes it once, a replay changing nothing", async () => {
    const h = harness();
    const owner = callerWith("Owner", "oid-olga");
    const first = await fileFor(h, owner);
    h.clock.now = new Date(h.clock.now.getTime() + 1000);
    const second = await fileFor(
      h,
      owner,
      'run_runbook name=scale_node_pool params={"pool":"blast","node_count":3} dry_run=false',
    );
    const listed = await h.coordinator.handleTurn(callerWith("Approver"), { text: "list_hil" });
    const items = (listed.tool_results[0] as { data: { items: Record<string, unknown>[] } }).data.items;
    expect(
      items.map((i) => [i.approval_id, i.target, i.proposed_action, (i.requester as { oid: string }).oid]),
    ).toEqual([
      [first, "job_api/default", "redeploy_job_api", "oid-olga"],
      [second, "node_pool/blast", "scale_node_pool", "oid-olga"],
    ]);
    const approved = await decide(h, callerWith("Owner", "oid-abe"), first);
    expect(approved).toMatchObject({
      status: "ok",
      data: { outcome: "recorded", state: "approved", execution: { status: "succeeded" } },
    });
    expect((await h.approvalStore.get(second))?.state).toBe("pending");
    const replay = await decide(h, callerWith("Owner", "oid-abe"), first);
    expect(replay).toMatchObject({ status: "ok", data: { outcome: "existing", state: "approved" } });
    expect(h.executed.map((e) => e.idempotencyKey)).toEqual([first]);
    expect((await h.audit.list()).filter((e) => e.action === "console.action_executed")).toHaveLength(1);
  });

  it("an approval recorded by a host that died before executing it is carried out once: by the approver's retry, or at the TTL by the expiry step", async () => {
    const h = harness();
    const owner = callerWith("Owner", "oid-olga");
    const approver = { oid: "oid-abe", name: "Abe" };
    const recordOnly = async (id: string) => {
      // What the dying host managed: the decision is recorded, the action not executed, no event raised.
      const item = await h.approvalStore.get(id);
      const outcome = await h.approvalStore.decide(
        id,
        {
          actor: approver,
          role: "Owner",
          decision: "approve",
          justification: "checked",
          action_hash: item?.action_hash ?? "",
        },
        h.clock.now,
      );
      expect(outcome?.kind).toBe("recorded");
      expect((await h.approvalStore.get(id))?.execution).toBeUndefined();
    };
    const retried = await fileFor(h, owner);
    await recordOnly(retried);
    const retry = await decide(h, callerWith("Owner", "oid-abe"), retried);
    expect(retry).toMatchObject({
      status: "ok",
      data: { outcome: "existing", state: "approved", execution: { status: "succeeded" } },
    });
    await decide(h, callerWith("Owner", "oid-abe"), retried);
    expect(h.executed.map((e) => e.idempotencyKey)).toEqual([retried]);

    const atTtl = await fileFor(h, owner);
    await recordOnly(atTtl);
    const activities = createApprovalActivities({
      approvals: h.approvals,
      store: h.approvalStore,
      loadPolicy: { groupIntervalSeconds: 0 },
      now: () => h.clock.now,
    });
    h.clock.now = new Date(Date.parse((await h.approvalStore.get(atTtl))?.expires_at ?? "") + 1000);
    expect(await activities.expire({ approval_id: atTtl, request_id: "ttl" })).toMatchObject({
      state: "approved",
      execution: { status: "succeeded" },
    });
    expect(await activities.expire({ approval_id: atTtl, request_id: "ttl-replayed" })).toMatchObject({
      state: "approved",
    });
    expect(h.executed.map((e) => e.idempotencyKey)).toEqual([retried, atTtl]);
    expect((await h.audit.list()).filter((e) => e.action === "console.action_executed")).toHaveLength(2);
  });

  it("an execution another request is still running is not recorded as failed by a second caller; the holder's outcome is what is recorded", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    const busy = createApprovalService({
      store: h.approvalStore,
      audit: h.audit,
      notifier: h.notifier,
      verify: h.verify,
      executor: {
        execute: () => Promise.reject(new ActionInProgressError("scale_node_pool", "held by the deciding request")),
      },
      killSwitch: h.killSwitch,
      actionTypes: actions,
      approvers: ["oid-Approver", "oid-Owner"],
      ttlSeconds: 3600,
      reminderOffsetsSeconds: [],
    });
    const item = await h.approvalStore.get(id);
    await h.approvalStore.decide(
      id,
      {
        actor: { oid: "oid-abe", name: "Abe" },
        role: "Owner",
        decision: "approve",
        justification: "checked",
        action_hash: item?.action_hash ?? "",
      },
      h.clock.now,
    );
    expect((await busy.executeApproved(id, "second-caller", h.clock.now))?.execution).toBeUndefined();
    expect((await h.audit.list()).filter((e) => e.action === "console.action_executed")).toEqual([]);
    expect((await h.approvals.executeApproved(id, "holder", h.clock.now))?.execution).toMatchObject({
      status: "succeeded",
    });
  });

  it("a request delivery that failed part-way is sent again when its activity is retried, to every approver, and then not again", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    let failNext = true;
    const flaky = createApprovalService({
      store: h.approvalStore,
      audit: h.audit,
      notifier: {
        send: (message) => {
          if (message.recipient === "oid-Owner" && failNext) {
            failNext = false;
            return Promise.reject(new Error("channel hiccup"));
          }
          return h.notifier.send(message);
        },
      },
      verify: h.verify,
      executor: h.executor,
      killSwitch: h.killSwitch,
      actionTypes: actions,
      approvers: ["oid-Approver", "oid-Owner"],
      ttlSeconds: 3600,
      reminderOffsetsSeconds: [],
    });
    await expect(flaky.deliverRequest(id, "d1", h.clock.now)).rejects.toThrow("channel hiccup");
    expect(await flaky.deliverRequest(id, "d1", h.clock.now)).toBe("sent");
    expect(await h.approvals.deliverRequest(id, "d1", h.clock.now)).toBe("skipped");
    const requests = (await h.notifier.list()).filter((m) => m.template_key === "approval.request");
    expect(requests.map((m) => m.recipient).sort()).toEqual(["oid-Approver", "oid-Owner"]);
    expect((await h.audit.list()).filter((e) => e.action === "console.approval_request")).toHaveLength(1);
  });

  it("C-118: approve_hil re-checks the verifier; while it abstains the approval is not applied", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    h.state.clusterReachable = undefined;
    expect(await decide(h, callerWith("Owner", "oid-abe"), id)).toMatchObject({
      status: "error",
      error: { type: "verifier_abstained", details: { missing_evidence: ["cluster_reachable"] } },
    });
    expect((await h.approvalStore.get(id))?.state).toBe("pending");
    expect(h.executed).toEqual([]);
  });

  it("a different actor or decision after a recorded one is a conflict; the same actor and decision returns the existing evidence", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    await decide(h, callerWith("Owner", "oid-abe"), id, "reject");
    expect(await decide(h, callerWith("Owner", "oid-abe"), id, "reject")).toMatchObject({
      status: "ok",
      data: { outcome: "existing", state: "rejected" },
    });
    expect(await decide(h, callerWith("Owner", "oid-abe"), id, "approve")).toMatchObject({
      status: "error",
      error: { type: "conflict" },
    });
    expect(await decide(h, callerWith("Owner", "oid-otto"), id, "reject")).toMatchObject({
      status: "error",
      error: { type: "conflict" },
    });
    expect(h.executed).toEqual([]);
  });

  it("C-374: a decision presenting another action_hash is refused", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    const reply = await h.coordinator.handleTurn(callerWith("Owner", "oid-abe"), {
      text: `approve_hil approval_id=${id} decision=approve justification="looks fine" action_hash=${"0".repeat(64)}`,
    });
    expect(reply.tool_results[0]).toMatchObject({ status: "error", error: { type: "conflict" } });
    const item = await h.approvalStore.get(id);
    expect(item?.state).toBe("pending");
    expect(item?.action_hash).toBe(actionHash(item?.action ?? { action_type: "", target: "", params: {} }));
  });

  it("C-284 C-285 C-286: past its TTL an item times out once (one audit entry) and a late approval returns the existing timeout and runs nothing", async () => {
    const h = harness({ ttlSeconds: 600 });
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    h.clock.now = new Date(h.clock.now.getTime() + 601_000);
    const expired = await h.approvals.expire(id, "expiry-1", h.clock.now);
    expect(expired?.state).toBe("timeout");
    await h.approvals.expire(id, "expiry-2", h.clock.now);
    const late = await decide(h, callerWith("Owner", "oid-abe"), id);
    expect(late).toMatchObject({ status: "ok", data: { outcome: "timeout", state: "timeout", execution: null } });
    expect((await h.audit.list()).filter((e) => e.action === "console.approval_timeout")).toHaveLength(1);
    expect(h.executed).toEqual([]);
  });

  it("a late decision arriving before the expiry worker records the timeout itself, once", async () => {
    const h = harness({ ttlSeconds: 600 });
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    h.clock.now = new Date(h.clock.now.getTime() + 700_000);
    expect(await decide(h, callerWith("Owner", "oid-abe"), id)).toMatchObject({
      status: "ok",
      data: { outcome: "timeout" },
    });
    await h.approvals.expire(id, "expiry", h.clock.now);
    expect((await h.audit.list()).filter((e) => e.action === "console.approval_timeout")).toHaveLength(1);
    expect(h.executed).toEqual([]);
  });

  it("C-304 C-305 C-306 C-307 C-308 C-309: reminders go out at fixed offsets before expiry, each claimed once across two hosts, audited, never moving the TTL", async () => {
    const h = harness({ ttlSeconds: 3600, reminderOffsetsSeconds: [1800, 300] });
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    const item = await h.approvalStore.get(id);
    if (!item) throw new Error("not filed");
    expect(h.approvals.reminderTimes(item).map((d) => d.toISOString())).toEqual([
      "2026-03-01T10:30:00.000Z",
      "2026-03-01T10:55:00.000Z",
    ]);
    // A second host: its own service over the same tables.
    const other = createApprovalService({
      store: h.approvalStore,
      audit: h.audit,
      notifier: h.notifier,
      verify: h.verify,
      executor: h.executor,
      killSwitch: h.killSwitch,
      actionTypes: actions,
      approvers: ["oid-Approver", "oid-Owner"],
      ttlSeconds: 3600,
      reminderOffsetsSeconds: [1800, 300],
    });
    const outcomes = await Promise.all([
      h.approvals.remind(id, 0, "r", h.clock.now),
      other.remind(id, 0, "r", h.clock.now),
      h.approvals.remind(id, 1, "r", h.clock.now),
      other.remind(id, 1, "r", h.clock.now),
      other.remind(id, 2, "r", h.clock.now),
    ]);
    expect(outcomes.filter((o) => o === "sent")).toHaveLength(2);
    expect(outcomes.filter((o) => o === "claimed_elsewhere")).toHaveLength(2);
    expect(outcomes[4]).toBe("not_pending");
    const reminders = (await h.notifier.list()).filter((m) => m.template_key === "approval.reminder");
    expect(reminders).toHaveLength(4); // two reminders × two approvers
    expect(
      (await h.audit.list()).filter((e) => e.action === "console.approval_reminder" && e.outcome === "succeeded"),
    ).toHaveLength(2);
    const after = await h.approvalStore.get(id);
    expect(after).toMatchObject({ state: "pending", expires_at: item.expires_at });
  });

  it("C-306: a failed reminder is audited as failed and not retried by the other host", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    const broken = createApprovalService({
      store: h.approvalStore,
      audit: h.audit,
      notifier: { send: () => Promise.reject(new Error("channel down")) },
      verify: h.verify,
      executor: h.executor,
      killSwitch: h.killSwitch,
      actionTypes: actions,
      approvers: ["oid-Approver"],
      ttlSeconds: 3600,
      reminderOffsetsSeconds: [1800],
    });
    expect(await broken.remind(id, 0, "r", h.clock.now)).toBe("failed");
    expect(await h.approvals.remind(id, 0, "r", h.clock.now)).toBe("claimed_elsewhere");
    expect(
      (await h.audit.list()).filter((e) => e.action === "console.approval_reminder").map((e) => e.outcome),
    ).toEqual(["failed"]);
  });

  it("C-196 C-375: A1 messages carry only the opaque approval id; the kill switch holds delivery and requeues", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    expect(id).toMatch(/^apr_[0-9a-f]{24}$/);
    await h.killSwitch.set(true, "oid-otto", h.clock.now);
    expect(await h.approvals.deliverRequest(id, "d1", h.clock.now)).toBe("held");
    const a1 = async () => (await h.notifier.list()).filter((m) => m.category === "A1");
    expect(await a1()).toEqual([]);
    await h.killSwitch.set(false, "oid-otto", h.clock.now);
    expect(await h.approvals.deliverRequest(id, "d2", h.clock.now)).toBe("sent");
    expect(await h.approvals.deliverRequest(id, "d3", h.clock.now)).toBe("skipped");
    const sent = await a1();
    expect(sent.map((m) => m.recipient)).toEqual(["oid-Approver", "oid-Owner"]);
    for (const m of sent) {
      expect(m.category).toBe("A1");
      expect(m.body_markdown).toContain(id);
      expect(m.body_markdown).not.toMatch(/approve_hil|decision=|redeploy|job_api|https?:/);
    }
  });

  it("C-372: a bearer caller decides only with a fresh sign-in: an auth_time past the window (or none) is refused and audited, nothing decided; a fresh one decides; a channel caller keeps its channel's trust", async () => {
    const h = harness();
    const id = await fileFor(h, callerWith("Owner", "oid-olga"));
    const nowSeconds = Math.floor(h.clock.now.getTime() / 1000);
    const approverSignedIn = (secondsAgo: number | null) => ({
      ...callerWith("Owner", "oid-abe"),
      auth_time: secondsAgo === null ? null : nowSeconds - secondsAgo,
    });

    for (const [secondsAgo, freshness] of [
      [301, "stale"],
      [null, "no_auth_time"],
    ] as const) {
      const refused = await decide(h, approverSignedIn(secondsAgo), id, "approve", `stale-${freshness}`);
      expect(refused).toMatchObject({
        status: "error",
        error: {
          type: "reauthentication_required",
          message: expect.stringMatching(/sign in again \(within the last 300 s\).*Nothing was decided/),
          details: { max_age_seconds: 300 },
        },
      });
      const entry = (await h.audit.list()).find(
        (e) => e.request_id === `stale-${freshness}` && e.action === "console.approve_hil",
      );
      expect(entry).toMatchObject({
        outcome: "denied",
        target: id,
        details: { reason: "reauthentication_required", freshness, max_age_seconds: 300 },
      });
    }
    expect((await h.approvalStore.get(id))?.state).toBe("pending");
    expect(h.executed).toEqual([]);

    // Signed in 300 s ago: still inside the window.
    expect(await decide(h, approverSignedIn(300), id)).toMatchObject({
      status: "ok",
      data: { outcome: "recorded", state: "approved" },
    });
    expect(h.executed.map((e) => e.idempotencyKey)).toEqual([id]);

    // A channel turn's caller (no bearer token here: Teams SSO established the A1 trust) is not asked for auth_time.
    const other = await fileFor(
      h,
      callerWith("Owner", "oid-olga"),
      'run_runbook name=scale_node_pool params={"pool":"blast","node_count":3} dry_run=false',
    );
    expect(await decide(h, callerWith("Owner", "oid-abe"), other, "reject")).toMatchObject({
      status: "ok",
      data: { state: "rejected" },
    });
  });
});
