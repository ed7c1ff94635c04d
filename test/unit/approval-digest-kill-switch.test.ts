import { describe, expect, it } from "vitest";
import { createApprovalActivities } from "../../shared/console/approvals/approval-activities.js";
import { createApprovalService, digestIdOf } from "../../shared/console/approvals/approval-service.js";
import { createKillSwitchAnnouncer } from "../../shared/console/approvals/kill-switch-announcer.js";
import type { LoadPolicy } from "../../shared/console/approvals/load-policy.js";
import { createKillSwitch } from "../../shared/ops/kill-switch.js";
import { actions, callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("digest");
const GROUPED: LoadPolicy = { groupIntervalSeconds: 900 };
const QUIET: LoadPolicy = {
  groupIntervalSeconds: 900,
  quietHours: { startMinute: 22 * 60, endMinute: 7 * 60, timeZone: "UTC" },
};

/** A console over fresh tables whose clock the test moves. */
function harness(loadPolicy: LoadPolicy, start: string) {
  const clock = { now: new Date(start) };
  const tables = azurite.tables();
  const h = consoleHarness(tables, { now: () => clock.now, loadPolicy, ttlSeconds: 12 * 3600 });
  const activities = createApprovalActivities({
    approvals: h.approvals,
    store: h.approvalStore,
    loadPolicy,
    now: () => clock.now,
  });
  return { ...h, clock, tables, activities, loadPolicy };
}
type H = ReturnType<typeof harness>;

/** A second host: its own service over the same tables and policy. */
function otherHost(h: H) {
  const approvals = createApprovalService({
    store: h.approvalStore,
    audit: h.audit,
    notifier: h.notifier,
    verify: h.verify,
    executor: h.executor,
    killSwitch: h.killSwitch,
    actionTypes: actions,
    approvers: ["oid-Approver", "oid-Owner"],
    ttlSeconds: 12 * 3600,
    reminderOffsetsSeconds: [1800, 300],
    loadPolicy: h.loadPolicy,
  });
  return createApprovalActivities({
    approvals,
    store: h.approvalStore,
    loadPolicy: h.loadPolicy,
    now: () => h.clock.now,
  });
}

/** Files one medium-severity item the way the coordinator does (a write the verifier abstains on). */
async function file(h: H, pool: string, requester = callerWith("Owner", "oid-olga")): Promise<string> {
  h.state.clusterReachable = undefined;
  const reply = await h.coordinator.handleTurn(requester, {
    text: `run_runbook name=scale_node_pool params={"pool":"${pool}","node_count":3} dry_run=false`,
  });
  if (!reply.approval_id) throw new Error(reply.text);
  h.state.clusterReachable = true;
  return reply.approval_id;
}

const at = (h: H, iso: string) => {
  h.clock.now = new Date(iso);
};
const input = (approval_id: string) => ({ approval_id, request_id: `orch-${approval_id}` });

/** Plans each item as its orchestration would, then delivers all at their (shared) send time from two hosts at once. */
async function deliverGroup(h: H, ids: string[]) {
  const plans = await Promise.all(ids.map((id) => h.activities.plan(input(id))));
  const sendAt = plans[0]?.send_at as string;
  at(h, sendAt);
  const other = otherHost(h);
  const outcomes = await Promise.all(
    ids.flatMap((id, i) =>
      [h.activities, other].map((host) =>
        host.deliver({ ...input(id), policy: plans[i]?.policy as string, send_at: plans[i]?.send_at as string }),
      ),
    ),
  );
  return { plans, sendAt, outcomes };
}

async function a1(h: H) {
  return (await h.notifier.list()).filter((m) => m.category === "A1");
}

describe("approval digests", () => {
  it("C-280 C-281 C-302 C-303: N requests in one group interval produce exactly one digest per approver naming all N, sent once from two hosts; each stays listed and decidable alone", async () => {
    const h = harness(GROUPED, "2026-03-02T10:01:00Z");
    const ids = [await file(h, "a")];
    at(h, "2026-03-02T10:05:00Z");
    ids.push(await file(h, "b"));
    at(h, "2026-03-02T10:14:59Z");
    ids.push(await file(h, "c"));
    const { plans, sendAt, outcomes } = await deliverGroup(h, ids);
    expect(plans.map((p) => [p.policy, p.send_at])).toEqual(ids.map(() => ["grouped", "2026-03-02T10:15:00.000Z"]));
    expect(outcomes.filter((o) => o === "sent")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "in_digest")).toHaveLength(ids.length * 2 - 1);

    const sent = await a1(h);
    expect(sent.map((m) => [m.template_key, m.recipient])).toEqual([
      ["approval.digest", "oid-Approver"],
      ["approval.digest", "oid-Owner"],
    ]);
    for (const m of sent) {
      expect(m.correlation_id).toBe(digestIdOf(sendAt));
      for (const id of ids) expect(m.body_markdown).toContain(id);
      expect(m.title).toBe("3 approvals requested");
      expect(m.body_markdown).not.toMatch(/approve_hil|decision=|scale_node_pool|node_pool|https?:/);
    }
    const digests = (await h.audit.list()).filter((e) => e.action === "console.approval_digest");
    expect(digests).toHaveLength(1);
    expect(digests[0]?.details).toMatchObject({ policy: "grouped", send_at: sendAt, members: ids, mode: "list" });

    // Each member is its own queue item: listed, and decided alone.
    const listed = await h.coordinator.handleTurn(callerWith("Approver"), { text: "list_hil" });
    expect(
      (listed.tool_results[0] as { data: { items: { approval_id: string }[] } }).data.items.map((i) => i.approval_id),
    ).toEqual(ids);
    const reply = await h.coordinator.handleTurn(callerWith("Owner", "oid-abe"), {
      text: `approve_hil approval_id=${ids[1]} decision=approve justification="pool b is fine"`,
    });
    expect(reply.tool_results[0]).toMatchObject({ status: "ok", data: { state: "approved" } });
    expect(await Promise.all(ids.map(async (id) => (await h.approvalStore.get(id))?.state))).toEqual([
      "pending",
      "approved",
      "pending",
    ]);
  });

  it("C-279 C-281: requests filed across quiet hours go out as one digest at their end", async () => {
    const h = harness(QUIET, "2026-03-02T23:10:00Z");
    const ids = [await file(h, "a")];
    at(h, "2026-03-03T01:30:00Z");
    ids.push(await file(h, "b"));
    at(h, "2026-03-03T06:59:00Z");
    ids.push(await file(h, "c"));
    const { plans, outcomes } = await deliverGroup(h, ids);
    expect(plans.map((p) => [p.policy, p.send_at])).toEqual(ids.map(() => ["deferred", "2026-03-03T07:00:00.000Z"]));
    expect(outcomes.filter((o) => o === "sent")).toHaveLength(1);
    const sent = await a1(h);
    expect(sent).toHaveLength(2);
    for (const m of sent) for (const id of ids) expect(m.body_markdown).toContain(id);
    expect((await h.audit.list()).filter((e) => e.action === "console.approval_digest")).toHaveLength(1);
  });

  it("requests of different intervals go out in different digests, and a member the digest missed is sent on its own", async () => {
    const h = harness(GROUPED, "2026-03-02T10:01:00Z");
    const first = await file(h, "a");
    at(h, "2026-03-02T10:16:00Z");
    const second = await file(h, "b");
    const firstPlan = await h.activities.plan(input(first));
    const secondPlan = await h.activities.plan(input(second));
    expect(secondPlan.send_at).toBe("2026-03-02T10:30:00.000Z");
    at(h, secondPlan.send_at);
    // The first interval's digest goes out late (its host was down): it lists only its own member.
    expect(await h.activities.deliver({ ...input(first), policy: firstPlan.policy, send_at: firstPlan.send_at })).toBe(
      "sent",
    );
    expect(
      await h.activities.deliver({ ...input(second), policy: secondPlan.policy, send_at: secondPlan.send_at }),
    ).toBe("sent");
    const digests = (await h.audit.list())
      .filter((e) => e.action === "console.approval_digest")
      .map((e) => e.details?.members);
    expect(digests.sort()).toEqual([[first], [second]].sort());

    // Filed exactly at the boundary after that boundary's digest went out: delivered individually, once.
    const late = await file(h, "c");
    expect((await h.activities.plan(input(late))).send_at).toBe(secondPlan.send_at);
    expect(await h.activities.deliver({ ...input(late), policy: "grouped", send_at: secondPlan.send_at })).toBe("sent");
    expect(await h.activities.deliver({ ...input(late), policy: "grouped", send_at: secondPlan.send_at })).toBe(
      "skipped",
    );
    expect((await a1(h)).filter((m) => m.template_key === "approval.request").map((m) => m.correlation_id)).toEqual([
      late,
      late,
    ]);
  });

  it("C-300 C-301: above the fatigue cap a group's digest switches to a summary; every member stays parked and undecided", async () => {
    const h = harness({ ...GROUPED, fatigue: { maxListedMembers: 2 } }, "2026-03-02T10:01:00Z");
    const ids = [await file(h, "a"), await file(h, "b"), await file(h, "c")];
    await deliverGroup(h, ids);
    const sent = await a1(h);
    expect(sent).toHaveLength(2);
    for (const m of sent) {
      expect(m.title).toBe("3 approvals requested");
      expect(ids.filter((id) => m.body_markdown.includes(id))).toHaveLength(2);
      expect(m.body_markdown).toContain("and 1 more: list_hil shows every one");
    }
    const digest = (await h.audit.list()).find((e) => e.action === "console.approval_digest")?.details;
    expect(digest).toMatchObject({ mode: "summary" });
    expect([...((digest?.members ?? []) as string[])].sort()).toEqual([...ids].sort());
    const items = await Promise.all(ids.map((id) => h.approvalStore.get(id)));
    expect(items.map((i) => [i?.state, i?.decision])).toEqual(ids.map(() => ["pending", undefined]));
  });
});

describe("parking before planning", () => {
  it("C-299: a filed request is in the queue before any policy is chosen, and stays there when the planner dies mid-choice", async () => {
    const h = harness(
      { groupIntervalSeconds: 900, quietHours: { startMinute: 0, endMinute: 60, timeZone: "Not/A_Zone" } },
      "2026-03-02T10:01:00Z",
    );
    const id = await file(h, "a");
    expect((await h.approvalStore.listPending()).map((i) => i.approval_id)).toEqual([id]);
    await expect(h.activities.plan(input(id))).rejects.toThrow(RangeError);
    expect((await h.approvalStore.listPending()).map((i) => i.approval_id)).toEqual([id]);
    expect(await h.notifier.list()).toEqual([]);
    // Planned again (the orchestration retries) with a working policy, it goes out.
    const working = createApprovalActivities({
      approvals: h.approvals,
      store: h.approvalStore,
      loadPolicy: { groupIntervalSeconds: 0 },
      now: () => h.clock.now,
    });
    expect(await working.plan(input(id))).toMatchObject({ state: "pending", policy: "send_now" });
  });
});

describe("the kill switch and A1 delivery", () => {
  it("C-528 C-529 C-530: turning it on holds every A1 send, requeues open requests (audited, still pending) and announces A2 once even from two hosts; off resumes delivery", async () => {
    const h = harness({ groupIntervalSeconds: 0 }, "2026-03-02T10:01:00Z");
    const delivered = await file(h, "a");
    const waiting = await file(h, "b");
    expect(
      await h.activities.deliver({ ...input(delivered), policy: "send_now", send_at: h.clock.now.toISOString() }),
    ).toBe("sent");
    const before = (await a1(h)).length;

    // Two hosts flip it at once: one flip, one announcement.
    const secondHost = createKillSwitch(h.tables, {
      onChange: createKillSwitchAnnouncer({
        store: h.approvalStore,
        notifier: h.notifier,
        audit: h.audit,
        recipients: ["oid-Approver", "oid-Owner"],
      }),
    });
    await Promise.all([h.killSwitch.set(true, "oid-otto", h.clock.now), secondHost.set(true, "oid-otto", h.clock.now)]);
    await h.killSwitch.set(true, "oid-otto", h.clock.now);
    const a2 = (await h.notifier.list()).filter((m) => m.category === "A2");
    expect(a2.map((m) => [m.template_key, m.recipient])).toEqual([
      ["kill_switch.on", "oid-Approver"],
      ["kill_switch.on", "oid-Owner"],
    ]);
    expect(a2[0]?.body_markdown).toContain("2 open approval requests are requeued");
    const audit = await h.audit.list();
    expect(audit.filter((e) => e.action === "console.kill_switch_on")).toHaveLength(1);
    expect(
      audit
        .filter((e) => e.action === "console.approval_requeued")
        .map((e) => e.target)
        .sort(),
    ).toEqual([delivered, waiting].sort());

    // Held: no request, reminder or digest goes out; the items stay pending.
    expect(
      await h.activities.deliver({ ...input(waiting), policy: "send_now", send_at: h.clock.now.toISOString() }),
    ).toBe("held");
    expect(await h.activities.remind({ ...input(delivered), index: 0 })).toBe("held");
    expect(
      await h.activities.deliver({ ...input(waiting), policy: "grouped", send_at: h.clock.now.toISOString() }),
    ).toBe("held");
    expect((await a1(h)).length).toBe(before);
    expect((await h.audit.list()).filter((e) => e.action === "console.approval_requeued")).toHaveLength(2);
    expect((await h.approvalStore.get(waiting))?.state).toBe("pending");

    await h.killSwitch.set(false, "oid-otto", h.clock.now);
    expect((await h.notifier.list()).filter((m) => m.template_key === "kill_switch.off")).toHaveLength(2);
    expect((await h.audit.list()).filter((e) => e.action === "console.kill_switch_off")).toHaveLength(1);
    expect(
      await h.activities.deliver({ ...input(waiting), policy: "send_now", send_at: h.clock.now.toISOString() }),
    ).toBe("sent");
    expect(await h.activities.remind({ ...input(delivered), index: 0 })).toBe("sent");
  });

  it("a failed announcement does not make the flip look failed: the switch is on, holds A1, and the failure is reported", async () => {
    const h = harness({ groupIntervalSeconds: 0 }, "2026-03-02T10:01:00Z");
    const waiting = await file(h, "c");
    const reported: { error: unknown; on: boolean }[] = [];
    const flaky = createKillSwitch(h.tables, {
      onChange: async () => {
        throw new Error("outbox unavailable");
      },
      onChangeError: (error, change) => reported.push({ error, on: change.on }),
    });
    await expect(flaky.set(true, "oid-otto", h.clock.now)).resolves.toBeUndefined();
    expect(await h.killSwitch.isOn()).toBe(true);
    expect(reported).toEqual([{ error: new Error("outbox unavailable"), on: true }]);
    expect(
      await h.activities.deliver({ ...input(waiting), policy: "send_now", send_at: h.clock.now.toISOString() }),
    ).toBe("held");
  });

  it("C-530: a kill switch turned on through an approved A1 request is announced as A2 with its audit entry", async () => {
    const h = harness({ groupIntervalSeconds: 0 }, "2026-03-02T10:01:00Z");
    const reply = await h.coordinator.handleTurn(callerWith("Approver", "oid-abby"), {
      text: 'run_runbook name=kill_switch params={"on":true} dry_run=false',
    });
    const id = reply.approval_id;
    if (!id) throw new Error(reply.text);
    const decided = await h.coordinator.handleTurn(callerWith("Owner", "oid-otto"), {
      text: `approve_hil approval_id=${id} decision=approve justification="stop everything"`,
    });
    expect(decided.tool_results[0]).toMatchObject({
      status: "ok",
      data: { state: "approved", execution: { status: "succeeded" } },
    });
    expect(await h.killSwitch.isOn()).toBe(true);
    expect((await h.notifier.list()).filter((m) => m.category === "A2").map((m) => m.template_key)).toEqual([
      "kill_switch.on",
      "kill_switch.on",
    ]);
    expect((await h.audit.list()).filter((e) => e.action === "console.kill_switch_on")).toMatchObject([
      { actor: { oid: "oid-otto" }, outcome: "succeeded" },
    ]);
  });
});
