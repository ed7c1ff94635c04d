/**
 * Issue 21 item 7: filing approvals is bounded per requester and per action type + target; an
 * identical request while one is pending returns that one; a refusal says why and files nothing.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_PENDING_LIMITS } from "../../shared/console/approvals/approval-service.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("pendlim");
let h: ReturnType<typeof consoleHarness>;

beforeAll(() => {
  h = consoleHarness(azurite.tables());
  h.state.clusterReachable = true;
  for (let n = 0; n < 30; n++) h.state.jobs.set(`j-run-${n}`, "running");
});

const pendingOf = async (oid: string) =>
  (await h.approvalStore.listPending()).filter((p) => p.requester.oid === oid).length;

describe("pending approval bounds", () => {
  it("a Contributor filing 30 approvals gets the first 10 filed and a clear refusal for the rest, with nothing filed or sent for them", async () => {
    const cora = callerWith("Contributor", "oid-cora");
    const kinds: string[] = [];
    for (let n = 0; n < 30; n++) {
      const reply = await h.coordinator.handleTurn(
        cora,
        { text: `run_runbook name=cancel_job params={"job_id":"j-run-${n}"} dry_run=false` },
        `flood-${n}`,
      );
      kinds.push(reply.kind);
      if (n >= DEFAULT_PENDING_LIMITS.perRequester) {
        expect(reply.text).toContain("you already have 10 approvals pending (at most 10)");
        expect(reply.text).toContain("Not filed");
        expect(reply.approval_id).toBeUndefined();
      }
    }
    expect(kinds.filter((k) => k === "approval_filed")).toHaveLength(DEFAULT_PENDING_LIMITS.perRequester);
    expect(kinds.filter((k) => k === "refused")).toHaveLength(30 - DEFAULT_PENDING_LIMITS.perRequester);
    expect(await pendingOf("oid-cora")).toBe(DEFAULT_PENDING_LIMITS.perRequester);
    const refusals = (await h.audit.list({ limit: 1000 })).filter(
      (e) => e.request_id.startsWith("flood-") && e.details.reason === "pending_approval_limit",
    );
    expect(refusals).toHaveLength(20);
    expect(refusals[0]).toMatchObject({ outcome: "denied", details: { limit: "per_requester", max: 10 } });
    // A case-variant of the same object id is the same requester.
    const again = await h.coordinator.handleTurn(callerWith("Contributor", "OID-CORA"), {
      text: 'run_runbook name=cancel_job params={"job_id":"j-run-29"} dry_run=false',
    });
    expect(again.kind).toBe("refused");
  });

  it("an identical request while one is pending returns the pending item; nothing new is filed", async () => {
    const abe = callerWith("Approver", "oid-abe");
    const text = "run_runbook name=redeploy_job_api dry_run=false";
    const first = await h.coordinator.handleTurn(abe, { text });
    const second = await h.coordinator.handleTurn(abe, { text });
    const third = await h.coordinator.handleTurn(callerWith("Contributor", "oid-carl"), { text });
    expect(first.kind).toBe("approval_filed");
    expect([second.approval_id, third.approval_id]).toEqual([first.approval_id, first.approval_id]);
    expect(
      (await h.approvalStore.listPending()).filter((p) => p.action.action_type === "redeploy_job_api"),
    ).toHaveLength(1);
  });

  it("at most 3 pending approvals of one action type on one target, whoever files them", async () => {
    const replies = [];
    for (const [n, oid] of ["oid-a1", "oid-a2", "oid-a3", "oid-a4"].entries())
      replies.push(
        await h.coordinator.handleTurn(callerWith("Contributor", oid), {
          text: `run_runbook name=scale_node_pool params={"pool":"blast","node_count":${n + 1}} dry_run=false`,
        }),
      );
    expect(replies.map((r) => r.kind)).toEqual(["approval_filed", "approval_filed", "approval_filed", "refused"]);
    expect(replies[3]?.text).toContain(
      "3 approvals of scale_node_pool on node_pool/blast are already pending (at most 3)",
    );
  });

  it("a decided item frees its place: the requester may file again", async () => {
    const pending = (await h.approvalStore.listPending()).find((p) => p.requester.oid === "oid-cora");
    if (!pending) throw new Error("nothing pending");
    await h.approvals.decide({
      approvalId: pending.approval_id,
      actor: { oid: "oid-otto", name: "Otto" },
      role: "Owner",
      decision: "reject",
      justification: "not now",
      requestId: "free-a-place",
      now: new Date(),
    });
    const reply = await h.coordinator.handleTurn(callerWith("Contributor", "oid-cora"), {
      text: 'run_runbook name=cancel_job params={"job_id":"j-run-29"} dry_run=false',
    });
    expect(reply.kind).toBe("approval_filed");
  });
});
