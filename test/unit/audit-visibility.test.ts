/**
 * Issue 21 item 2: each audit entry has a visibility floor (the floor of the tool or action it
 * records) and `query_audit` returns only what the caller's role may read. Every kind of entry the
 * console writes is produced here through the real paths, then read back as each role.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { ROLES, type Role, roleRank } from "../../shared/auth/roles.js";
import type { AuditEntry } from "../../shared/ops/audit.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("auditvis");
let h: ReturnType<typeof consoleHarness>;
let all: AuditEntry[];
let approvalId: string;

/** The floor each kind of entry must have, written out independently of the code. */
function expectedFloor(e: AuditEntry): Role {
  if (e.action === "console.tool_call" || e.action === "console.tool_started") {
    switch (e.target) {
      case "query_audit":
      case "search_tools":
        // The result depends on the caller's role: readable from that role up.
        return e.actor.oid === "oid-owen" ? "Owner" : "Reader";
      case "explore_catalog":
      case "activate_break_glass":
        return "Reader";
      case "simulate_change":
        return "Contributor";
      case "list_hil":
      case "approve_hil":
        return "Approver";
      case "run_runbook":
        // dry_run=false is Owner; the filed call (with the approval's id) stays Owner, above Approver.
        return "Owner";
    }
  }
  const byAction: Record<string, Role> = {
    "console.break_glass": "Reader",
    "console.kill_switch_on": "Reader",
    "console.kill_switch_off": "Reader",
    "console.enqueue_hil": "Approver",
    "console.approve_hil": "Approver",
    "console.action_executed": "Approver",
    "console.approval_request": "Approver",
    "console.approval_requeued": "Approver",
    "ops.event_processed": "Reader",
    "api_token.reveal": "Owner",
  };
  const floor = byAction[e.action];
  if (!floor) throw new Error(`no expected floor for ${e.action} ${e.target}`);
  return floor;
}

beforeAll(async () => {
  h = consoleHarness(azurite.tables(), { approvers: ["oid-Approver", "oid-Owner"] });
  h.state.clusterReachable = true;
  const turn = (role: Role, oid: string, text: string) => h.coordinator.handleTurn(callerWith(role, oid), { text });
  await turn("Reader", "oid-rita", "explore_catalog query=job.failed");
  await turn("Reader", "oid-rita", 'activate_break_glass reason="the cluster is down and nobody answers"');
  await turn(
    "Contributor",
    "oid-cora",
    'simulate_change {"event_type":"job.failed","resource_ref":"blast_job/j-failed"}',
  );
  // Filed: a Contributor's real kill switch (an approval, with its id and hash in the entries).
  const filed = await turn("Contributor", "oid-cora", 'run_runbook name=kill_switch params={"on":true} dry_run=false');
  approvalId = filed.approval_id ?? "";
  await h.approvals.deliverRequest(approvalId, "deliver", new Date());
  await turn("Approver", "oid-abe", "list_hil");
  await turn(
    "Owner",
    "oid-otto",
    `approve_hil approval_id=${approvalId} decision=approve justification="drill window"`,
  );
  await h.killSwitch.set(false, "oid-otto", new Date());
  await turn("Owner", "oid-otto", 'run_runbook name=retry_failed_job params={"job_id":"j-failed"} dry_run=false');
  await turn("Owner", "oid-owen", "search_tools");
  await turn("Owner", "oid-owen", "query_audit limit=100");
  await h.audit.record({
    actor: { oid: "oid-otto", name: "Otto" },
    action: "api_token.reveal",
    target: "api_token",
    outcome: "succeeded",
    request_id: "reveal",
  });
  all = await h.audit.list({ limit: 1000 });
});

/** Every entry a caller with `role` sees through query_audit, following the cursor. */
async function visibleTo(role: Role): Promise<{ ids: Set<string>; text: string }> {
  const ids = new Set<string>();
  let text = "";
  let cursor: string | undefined;
  do {
    const reply = await h.coordinator.handleTurn(callerWith(role, `oid-viewer-${role}`), {
      text: `query_audit limit=100${cursor ? ` cursor=${cursor}` : ""}`,
    });
    const result = reply.tool_results[0];
    if (result?.status !== "ok") throw new Error(reply.text);
    const page = result.data as { entries: AuditEntry[]; next_cursor?: string };
    for (const e of page.entries) ids.add(e.audit_id);
    text += JSON.stringify(page.entries);
    cursor = page.next_cursor;
  } while (cursor);
  return { ids, text };
}

describe("secrets typed into tool arguments (issue 21 item 3)", () => {
  const TOKEN = "bpt_Zk9xQ2V3c1R5dW1vYmF0aGVyZWFsdG9rZW4xMjM0NTY";
  const JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvaWQtb3R0byIsInJvbGVzIjpbIk93bmVyIl19.c2lnbmF0dXJlMTIzNDU2";
  const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
  const CONN = `DefaultEndpointsProtocol=https;AccountName=blastdata;AccountKey=${KEY};EndpointSuffix=core.windows.net`;

  it("C-236 C-534: a job-API token, a JWT and a storage connection string typed into tool arguments reach neither the audit, nor query_audit, nor the reply, whoever typed them", async () => {
    const replies: string[] = [];
    for (const [role, oid] of [
      ["Reader", "oid-rita"],
      ["Owner", "oid-otto"],
    ] as const)
      for (const secret of [TOKEN, `Bearer ${JWT}`, CONN])
        replies.push(
          JSON.stringify(
            await h.coordinator.handleTurn(callerWith(role, oid), {
              text: `explore_catalog query=${JSON.stringify(`job.failed ${secret}`)}`,
            }),
          ),
        );
    // A justification is free text too.
    const filed = await h.coordinator.handleTurn(callerWith("Contributor", "oid-cora"), {
      text: "run_runbook name=rotate_api_token dry_run=false",
    });
    replies.push(
      JSON.stringify(
        await h.coordinator.handleTurn(callerWith("Owner", "oid-otto"), {
          text: `approve_hil approval_id=${filed.approval_id} decision=reject justification=${JSON.stringify(`not with ${TOKEN}`)}`,
        }),
      ),
    );
    const stored = JSON.stringify(await h.audit.list({ limit: 1000 }));
    const owner = await h.coordinator.handleTurn(callerWith("Owner", "oid-owen"), { text: "query_audit limit=100" });
    const item = JSON.stringify(await h.approvalStore.get(filed.approval_id ?? ""));
    for (const text of [stored, JSON.stringify(owner), item, ...replies])
      for (const secret of [TOKEN, JWT, KEY, "eyJhbGciOiJSUzI1NiJ9"]) expect(text).not.toContain(secret);
    expect(stored).toContain("[redacted:product_token]");
    expect(stored).toContain("AccountKey=[redacted:connection_string]");
  });
});

describe("audit visibility", () => {
  it("every kind of console entry was produced", () => {
    const kinds = new Set(all.map((e) => e.action));
    for (const kind of [
      "console.tool_call",
      "console.tool_started",
      "console.enqueue_hil",
      "console.approve_hil",
      "console.action_executed",
      "console.approval_request",
      "console.break_glass",
      "console.kill_switch_on",
      "console.kill_switch_off",
      "api_token.reveal",
    ])
      expect(kinds, kind).toContain(kind);
  });

  for (const role of ROLES)
    it(`C-130 C-131: a ${role}'s query_audit returns exactly the entries at or below its role, each entry kind checked`, async () => {
      const { ids } = await visibleTo(role);
      for (const e of all) {
        const floor = expectedFloor(e);
        expect(e.visibility_floor, `${e.action} ${e.target}`).toBe(floor);
        expect(ids.has(e.audit_id), `${role} × ${e.action} ${e.target} (floor ${floor})`).toBe(
          roleRank(role) >= roleRank(floor),
        );
      }
    });

  it("C-131: a Reader's query_audit shows no approval content: no approval id, action hash, target, requester or justification", async () => {
    const { text } = await visibleTo("Reader");
    const item = await h.approvalStore.get(approvalId);
    expect(text).not.toContain(approvalId);
    expect(text).not.toMatch(/apr_[0-9a-f]{24}/);
    expect(text).not.toContain(item?.action_hash ?? "no hash");
    expect(text).not.toContain("drill window");
    expect(text).not.toContain("enqueue_hil");
    expect(text).not.toContain("approve_hil");
  });

  it("a filter cannot widen the view: asking for an approval entry by action, actor or event id as a Reader finds nothing", async () => {
    for (const filter of ["actor=oid-cora", "actor=oid-otto", "decision=approve", `event_id=${approvalId}`]) {
      const reply = await h.coordinator.handleTurn(callerWith("Reader", "oid-rita"), {
        text: `query_audit ${filter} limit=100`,
      });
      const page = (reply.tool_results[0] as { data: { entries: AuditEntry[] } }).data;
      expect(JSON.stringify(page), filter).not.toMatch(/apr_[0-9a-f]{24}|drill window/);
    }
  });
});
