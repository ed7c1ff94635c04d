import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { DEMO_DB, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
beforeAll(async () => {
  stack = await startStack({
    env: { SVC_CONSOLE_APPROVERS: "oid-approver-1", SVC_ACTION_MODES: "rewarm_database=enforce" },
  });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

type ChatReply = {
  kind: string;
  text: string;
  approval_id?: string;
  tool_results: { status: string; data?: Record<string, unknown>; error?: Record<string, unknown> }[];
};
async function chat(token: string, text: string): Promise<ChatReply> {
  const res = await fetch(`${stack.info.functions_url}/api/chat`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as ChatReply;
}
const storage = () =>
  `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;

describe("the console's action executors in the Functions host", () => {
  it("C-373: an approved rewarm_database (enforce by SVC_ACTION_MODES) starts the real warm-up orchestration through the request's durable client, once; the replayed approval has no second effect", async () => {
    const filed = await chat(
      await mintToken(stack, "Contributor", { oid: "oid-cora" }),
      `run_runbook name=rewarm_database params={"database":"${DEMO_DB}"} dry_run=false`,
    );
    expect(filed.kind).toBe("approval_filed");
    const approver = await mintToken(stack, "Approver", { oid: "oid-approver-1" });
    const approved = await chat(
      approver,
      `approve_hil approval_id=${filed.approval_id} decision=approve justification="cache went cold"`,
    );
    expect(approved.tool_results[0]).toMatchObject({
      status: "ok",
      data: {
        state: "approved",
        execution: { status: "succeeded", result: { mode: "enforce", executed: true, database: DEMO_DB } },
      },
    });
    const execution = approved.tool_results[0]?.data?.execution as { result: { operation_id: string } } | undefined;
    const operationId = execution?.result.operation_id ?? "";
    // The operation is the dashboard's own warm-up, followed to its end through the dashboard's route.
    const reader = await mintToken(stack, "Reader");
    const operation = await eventually(
      async () => {
        const o = (await (
          await fetch(`${stack.info.functions_url}/api/operations/${operationId}`, {
            headers: { Authorization: `Bearer ${reader}` },
          })
        ).json()) as Record<string, unknown>;
        return ["succeeded", "failed"].includes(String(o.state)) ? o : undefined;
      },
      60_000,
      200,
    );
    expect(operation).toMatchObject({ state: "succeeded", operation_type: "database.warmup" });
    const replay = await chat(
      approver,
      `approve_hil approval_id=${filed.approval_id} decision=approve justification="cache went cold"`,
    );
    expect(replay.tool_results[0]).toMatchObject({ status: "ok", data: { outcome: "existing" } });
    const audit = createAuditLog(storage());
    expect(
      (await audit.list({ action: "ops.action_executed", limit: 1000 })).filter(
        (e) => e.details.action_type === "rewarm_database",
      ),
    ).toHaveLength(1);
    expect((await audit.list({ action: "database.warmup", limit: 1000 })).map((e) => e.actor.oid)).toEqual([
      "oid-approver-1",
    ]);
  }, 120_000);

  it("an Owner's real run_runbook of rotate_api_token runs in the catalog's shadow mode: recorded, the token unchanged", async () => {
    const before = readApiToken(stack);
    const reply = await chat(
      await mintToken(stack, "Owner", { oid: "oid-olga" }),
      "run_runbook name=rotate_api_token dry_run=false",
    );
    expect(reply.tool_results[0]).toMatchObject({
      status: "ok",
      data: {
        dry_run: false,
        result: { mode: "shadow", executed: false, would: { replaces_created_at: expect.any(String) } },
      },
    });
    expect(readApiToken(stack)).toBe(before);
  }, 60_000);
});
