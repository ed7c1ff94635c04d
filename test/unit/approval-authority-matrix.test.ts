/**
 * Who may authorize what (issue 21 items 1 and 6): the whole matrix of requester role × decider
 * role × action type, through the real approval service over Azurite, and the coordinator's
 * filing of each (role, action type) write call. The expected cell comes from the catalog and the
 * rule, written out here independently of `authority.ts`.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ROLES, type Role, roleRank } from "../../shared/auth/roles.js";
import { createApprovalAuthority } from "../../shared/console/approvals/authority.js";
import { ToolError } from "../../shared/console/tools/tool.js";
import { actions, callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("authority");
let h: ReturnType<typeof consoleHarness>;

beforeAll(() => {
  // The matrix leaves many items pending at once: the pending bounds are tested on their own.
  h = consoleHarness(azurite.tables(), { pendingLimits: { perRequester: 1000, perActionTarget: 1000 } });
  // Every precondition observable and passing, so the verifier never stands in the way.
  h.state.clusterReachable = true;
});

/** One runbook call per action type; all eligible against the harness state. */
const RUNBOOK_OF: Record<string, { name: string; params: Record<string, unknown> }> = {
  retry_job: { name: "retry_failed_job", params: { job_id: "j-failed" } },
  cancel_job: { name: "cancel_job", params: { job_id: "j-running" } },
  rewarm_database: { name: "rewarm_database", params: { database: "nt" } },
  prepare_database_update: { name: "prepare_database_update", params: { database: "nt" } },
  rotate_api_token: { name: "rotate_api_token", params: {} },
  redeploy_job_api: { name: "redeploy_job_api", params: {} },
  scale_node_pool: { name: "scale_node_pool", params: { pool: "blast", node_count: 3 } },
  // Turning it off keeps the other cells' executions unaffected by the switch.
  kill_switch: { name: "kill_switch", params: { on: false } },
};
const ACTION_OF: Record<string, { action_type: string; target: string; params: Record<string, unknown> }> = {
  retry_job: { action_type: "retry_job", target: "blast_job/j-failed", params: {} },
  cancel_job: { action_type: "cancel_job", target: "blast_job/j-running", params: {} },
  rewarm_database: { action_type: "rewarm_database", target: "blast_database/nt", params: {} },
  prepare_database_update: { action_type: "prepare_database_update", target: "blast_database/nt", params: {} },
  rotate_api_token: { action_type: "rotate_api_token", target: "api_token/current", params: {} },
  redeploy_job_api: { action_type: "redeploy_job_api", target: "job_api/default", params: {} },
  scale_node_pool: { action_type: "scale_node_pool", target: "node_pool/blast", params: { node_count: 3 } },
  kill_switch: { action_type: "kill_switch", target: "control_plane", params: { on: false } },
};
/** The spec's "Owner + approval" types (operator-console §5 A3 table). */
const OWNER_PLUS_APPROVAL = new Set(["kill_switch"]);
const TYPES = actions.action_types.map((a) => a.id);
const floorOf = (type: string): Role => actions.action_types.find((a) => a.id === type)?.role_floor ?? "Owner";
const atLeast = (role: Role, floor: Role) => roleRank(role) >= roleRank(floor);

/** Runs `work` over `items` at most `width` at a time (the Azurite of one test file is shared). */
async function inBatches<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += width) await Promise.all(items.slice(i, i + width).map(work));
}

describe("approval authority", () => {
  it("the catalog marks exactly the spec's Owner + approval types, and every type named here is in it", () => {
    expect(TYPES.sort()).toEqual(Object.keys(RUNBOOK_OF).sort());
    expect(actions.action_types.filter((a) => a.requires_approval === true).map((a) => a.id)).toEqual([
      ...OWNER_PLUS_APPROVAL,
    ]);
    expect(floorOf("kill_switch")).toBe("Owner");
  });

  it("C-122 C-421 C-422: a write call runs at once only when the caller meets the action's floor and the type is not Owner + approval; otherwise it is filed (an Owner's own kill switch included)", {
    timeout: 180_000,
  }, async () => {
    const cells = ROLES.flatMap((role) => TYPES.map((type) => ({ role, type })));
    await inBatches(cells, 8, async ({ role, type }) => {
      const book = RUNBOOK_OF[type];
      if (!book) throw new Error(type);
      const requestId = `file-${role}-${type}`;
      const before = h.executed.filter((e) => e.idempotencyKey === `runbook/${requestId}`).length;
      const reply = await h.coordinator.handleTurn(
        callerWith(role, `oid-file-${role}`),
        { text: `run_runbook name=${book.name} params=${JSON.stringify(book.params)} dry_run=false` },
        requestId,
      );
      const ranNow = h.executed.filter((e) => e.idempotencyKey === `runbook/${requestId}`).length - before;
      const cell = `${role} × ${type}`;
      if (role === "Reader") {
        // run_runbook's own floor is Contributor: refused before anything is filed.
        expect(reply.kind, cell).toBe("refused");
        expect(ranNow, cell).toBe(0);
        return;
      }
      // dry_run=false needs Owner (C-122) and the action's floor; Owner + approval types always file.
      const direct = role === "Owner" && atLeast(role, floorOf(type)) && !OWNER_PLUS_APPROVAL.has(type);
      if (direct) {
        expect(reply.kind, cell).toBe("tool_result");
        expect(reply.tool_results[0]?.status, cell).toBe("ok");
        expect(ranNow, cell).toBe(1);
      } else {
        expect(reply.kind, cell).toBe("approval_filed");
        expect(ranNow, cell).toBe(0);
        const item = await h.approvalStore.get(reply.approval_id ?? "");
        expect(item?.state, cell).toBe("pending");
        expect(item?.action.action_type, cell).toBe(type);
      }
    });
  });

  // The whole matrix requester role × decider role × action type, one test per decider role.
  for (const decider of ROLES)
    it(`C-116 C-348 C-349: decider role ${decider} × every requester role × every action type: decided (and so executed) only when the decider meets the action's floor and Approver`, {
      timeout: 180_000,
    }, async () => {
      const cells = ROLES.flatMap((requester) => TYPES.map((type) => ({ requester, decider, type })));
      expect(cells).toHaveLength(4 * TYPES.length);
      await inBatches(cells, 32, async ({ requester, decider, type }) => {
        const cell = `${requester} requests ${type}, ${decider} decides`;
        const base = ACTION_OF[type];
        if (!base) throw new Error(type);
        // One distinct action per cell: an identical pending request is answered with the first item.
        const action = { ...base, params: { ...base.params, cell } };
        const item = await h.approvals.request({
          action,
          requester: { oid: `oid-req-${requester}-${decider}-${type}`, name: "requester" },
          reason: "verifier_abstained",
          severity: "medium",
          idempotencyKey: `matrix/${requester}/${decider}/${type}`,
          requestId: `req-${cell}`,
          now: new Date(),
        });
        const allowed = atLeast(decider, floorOf(type)) && atLeast(decider, "Approver");
        const decide = () =>
          h.approvals.decide({
            approvalId: item.approval_id,
            actor: { oid: `oid-dec-${decider}-${requester}-${type}`, name: "decider" },
            role: decider,
            decision: "approve",
            justification: "matrix",
            requestId: `dec-${cell}`,
            now: new Date(),
          });
        if (allowed) {
          const result = await decide();
          expect(result.outcome, cell).toBe("recorded");
          expect(result.item.state, cell).toBe("approved");
          expect(result.item.execution?.status, cell).toBe("succeeded");
          expect(
            h.executed.filter((e) => e.idempotencyKey === item.approval_id),
            cell,
          ).toHaveLength(1);
        } else {
          const error = await decide().then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error, cell).toBeInstanceOf(ToolError);
          expect((error as ToolError).type, cell).toBe("forbidden");
          expect((await h.approvalStore.get(item.approval_id))?.state, cell).toBe("pending");
          expect(
            h.executed.filter((e) => e.idempotencyKey === item.approval_id),
            cell,
          ).toEqual([]);
          const refusal = (await h.audit.list({ action: "console.approve_hil", limit: 1000 })).find(
            (e) => e.request_id === `dec-${cell}`,
          );
          expect(refusal, cell).toMatchObject({
            outcome: "denied",
            details: {
              reason: "decider_role_below_action_floor",
              required_role: atLeast(floorOf(type), "Approver") ? floorOf(type) : "Approver",
            },
          });
        }
      });
    });

  it("C-348 C-349 C-350: the requester never decides its own item, whatever its role and however its object id is cased or wrapped", {
    timeout: 180_000,
  }, async () => {
    const guid = "3f2504e0-4f89-41d3-9a0c-0305e82c3301";
    const forms = [guid.toUpperCase(), ` ${guid} `, `{${guid.toUpperCase()}}`];
    const cells = ROLES.flatMap((role) => TYPES.flatMap((type) => forms.map((form, i) => ({ role, type, form, i }))));
    await inBatches(cells, 16, async ({ role, type, form, i }) => {
      const cell = `${role} × ${type} × ${JSON.stringify(form)}`;
      const base = ACTION_OF[type];
      if (!base) throw new Error(type);
      const action = { ...base, params: { ...base.params, cell } };
      const item = await h.approvals.request({
        action,
        requester: { oid: guid, name: "requester" },
        reason: "verifier_abstained",
        severity: "medium",
        idempotencyKey: `self/${role}/${type}/${i}`,
        requestId: `self-file-${cell}`,
        now: new Date(),
      });
      const error = await h.approvals
        .decide({
          approvalId: item.approval_id,
          actor: { oid: form, name: "requester again" },
          role,
          decision: "approve",
          justification: "mine",
          requestId: `self-${cell}`,
          now: new Date(),
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect((error as ToolError | undefined)?.type, cell).toBe("self_approval");
      expect((await h.approvalStore.get(item.approval_id))?.state, cell).toBe("pending");
      expect(
        h.executed.filter((e) => e.idempotencyKey === item.approval_id),
        cell,
      ).toEqual([]);
    });
  });

  it("C-421 C-422: a Contributor's kill switch is filed; an Approver's approve_hil is refused and the switch stays off; another Owner's approval turns it on", {
    timeout: 120_000,
  }, async () => {
    const filed = await h.coordinator.handleTurn(callerWith("Contributor", "oid-cora"), {
      text: 'run_runbook name=kill_switch params={"on":true} dry_run=false',
    });
    expect(filed.kind).toBe("approval_filed");
    const id = filed.approval_id ?? "";
    const approverTry = await h.coordinator.handleTurn(callerWith("Approver", "oid-abe"), {
      text: `approve_hil approval_id=${id} decision=approve justification="looks right"`,
    });
    expect(approverTry.tool_results[0]).toMatchObject({
      status: "error",
      error: { type: "forbidden", details: { required_role: "Owner" } },
    });
    expect(await h.killSwitch.isOn()).toBe(false);
    const ownerTry = await h.coordinator.handleTurn(callerWith("Owner", "oid-otto"), {
      text: `approve_hil approval_id=${id} decision=approve justification="confirmed with the on-call"`,
    });
    expect(ownerTry.tool_results[0]).toMatchObject({ status: "ok", data: { execution: { status: "succeeded" } } });
    expect(await h.killSwitch.isOn()).toBe(true);
    await h.killSwitch.set(false, "oid-otto", new Date());
  });

  it("an item recorded as approved by a decider below the action's floor is never executed (the execution step checks the rule again)", async () => {
    const item = await h.approvals.request({
      action: ACTION_OF.rotate_api_token ?? { action_type: "", target: "", params: {} },
      requester: { oid: "oid-rita", name: "Rita" },
      reason: "verifier_abstained",
      severity: "medium",
      idempotencyKey: "recorded-below-floor",
      requestId: "file-below",
      now: new Date(),
    });
    // What a writer that skipped the rule (or a record from before it) leaves behind.
    await h.approvalStore.decide(
      item.approval_id,
      {
        actor: { oid: "oid-abe", name: "Abe" },
        role: "Approver",
        decision: "approve",
        justification: "x",
        action_hash: item.action_hash,
      },
      new Date(),
    );
    const after = await h.approvals.executeApproved(item.approval_id, "exec-below", new Date());
    expect(after?.execution).toMatchObject({
      status: "refused",
      result: { reason: "decider_role_below_action_floor", required_role: "Owner" },
    });
    expect(h.executed.filter((e) => e.idempotencyKey === item.approval_id)).toEqual([]);
  });

  it("the rule itself, cell by cell, agrees with the matrix above (unknown action types are Owner-only and approval-bound)", () => {
    const authority = createApprovalAuthority(actions);
    for (const role of ROLES)
      for (const type of [...TYPES, "no_such_type"]) {
        const floor = TYPES.includes(type) ? floorOf(type) : "Owner";
        expect(authority.mayRunDirectly(role, type)).toBe(
          atLeast(role, floor) && !OWNER_PLUS_APPROVAL.has(type) && type !== "no_such_type",
        );
        expect(authority.mayDecide({ oid: "a", role }, { requesterOid: "b", actionType: type }).allowed).toBe(
          atLeast(role, floor) && atLeast(role, "Approver"),
        );
        expect(authority.mayDecide({ oid: "A", role }, { requesterOid: "a", actionType: type }).allowed).toBe(false);
      }
    expect(authority.mayDecide({ oid: "a", role: undefined }, { requesterOid: "b", actionType: "retry_job" })).toEqual({
      allowed: false,
      reason: "decider_role_below_action_floor",
      required_role: "Approver",
    });
  });
});
