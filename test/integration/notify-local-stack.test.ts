import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";

/**
 * What a person trying the product sees on `npm start` (issue 25, "Locally"): notifications as
 * files under the data folder — an approval request in the inbox, mail as `.eml`, verified webhook
 * deliveries — and `blastplane notifications` listing the deliveries with channel, state and receipt.
 */
let stack: TestStack;
/** The `oid` claim of a token (the inbox folder of the person it names). */
const objectIdOf = (token: string) =>
  (JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as { oid: string }).oid;
const files = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((f) => !f.endsWith(".tmp")) : []);

beforeAll(async () => {
  // No SVC_CONSOLE_APPROVERS, as in `npm start`: the stack's default approvers must receive requests.
  stack = await startStack();
}, 90_000);
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

async function testNotification(token: string, body: unknown) {
  const res = await fetch(`${stack.info.functions_url}/api/notifications/test`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("notifications on the local stack", () => {
  it("starts without a vendor account and prints where notifications go", () => {
    expect(stack.output()).toContain(path.join(stack.dataDir, "mail"));
    expect(stack.output()).not.toContain("notification_route_unavailable");
  });

  it('C-375: without SVC_CONSOLE_APPROVERS an approval filed from the console reaches the local approvers\' inboxes as a file carrying only the opaque approval id, and the one who signs in as "Local Approver" decides it', async () => {
    const res = await fetch(`${stack.info.functions_url}/api/chat`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${await mintToken(stack, "Contributor", { oid: "oid-cora" })}`,
        "Content-Type": "application/json",
      },
      body: JSON.stringify({ text: 'run_runbook name=kill_switch params={"on":true} dry_run=false' }),
    });
    const filed = (await res.json()) as { kind: string; approval_id?: string };
    expect(filed.kind).toBe("approval_filed");
    const approvalId = filed.approval_id ?? "missing";

    // Who signs in under the local approvers' names (the sign-in page or a dev token: same oid).
    const approver = await mintToken(stack, "Approver", { name: "Local Approver" });
    const owner = await mintToken(stack, "Owner", { name: "Local Owner" });
    for (const token of [approver, owner]) {
      const inbox = path.join(stack.dataDir, "notifications", "inbox", objectIdOf(token));
      const [file] = await eventually(async () => (files(inbox).length > 0 ? files(inbox) : undefined), 30_000);
      const text = readFileSync(path.join(inbox, file ?? ""), "utf8");
      expect(text).toContain(`# Approval requested`);
      expect(text).toContain(approvalId);
      expect(text).not.toMatch(/approve_hil|decision=/);
    }
    expect(stack.output()).toContain("Local Approver, Local Owner");

    const items = (await (
      await fetch(`${stack.info.functions_url}/api/approvals`, { headers: { Authorization: `Bearer ${approver}` } })
    ).json()) as { items: { approval_id: string; action_hash: string }[] };
    const item = items.items.find((i) => i.approval_id === approvalId);
    const decided = await fetch(`${stack.info.functions_url}/api/approvals/${approvalId}/decision`, {
      method: "POST",
      headers: { Authorization: `Bearer ${owner}`, "Content-Type": "application/json" },
      body: JSON.stringify({ decision: "reject", justification: "not now", action_hash: item?.action_hash }),
    });
    expect(decided.status).toBe(200);
    expect(await decided.json()).toMatchObject({ approval_id: approvalId, state: "rejected" });
  });

  it("POST /api/notifications/test (Owner) sends a marked A2 message to every local channel: a verified webhook delivery, an .eml file and the inbox", async () => {
    const owner = await mintToken(stack, "Owner", { oid: "oid-owner" });
    const { status, body } = await testNotification(owner, {});
    expect(status).toBe(200);
    expect(body).toMatchObject({ route: "operational_alert", state: "delivered", confirmed: true });
    const channels = body.channels as { channel: string; state: string; vendor_message_id?: string }[];
    expect(channels.map((c) => [c.channel, c.state])).toEqual([
      ["webhook", "delivered"],
      ["email", "delivered"],
      ["inbox", "delivered"],
    ]);
    const mail = files(path.join(stack.dataDir, "mail"));
    expect(mail.filter((f) => f.endsWith(".eml"))).toHaveLength(1);
    const eml = readFileSync(path.join(stack.dataDir, "mail", mail[0] ?? ""), "utf8");
    expect(eml).toContain("Subject: [A2] [TEST] blastplane test notification");
    const hooks = files(path.join(stack.dataDir, "notifications", "webhook"));
    expect(hooks).toHaveLength(1);
    const delivery = JSON.parse(
      readFileSync(path.join(stack.dataDir, "notifications", "webhook", hooks[0] ?? ""), "utf8"),
    );
    expect(delivery).toMatchObject({ verified: true, payload: { type: "blastplane.notify.test" } });

    // The CLI lists the deliveries with channel, state and receipt.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [path.join(ROOT, "bin/blastplane.mjs"), "notifications"],
      {
        env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir },
      },
    );
    expect(stdout).toMatch(/webhook:webhook\s+delivered\s+A2 notify\.test/);
    expect(stdout).toMatch(/email:email\s+delivered\s+A2 notify\.test/);
    expect(stdout).toMatch(/local_inbox:inbox\s+delivered\s+A1 approval\.request/);
  });

  it("the test route is Owner-only and validates its body", async () => {
    const reader = await testNotification(await mintToken(stack, "Reader"), {});
    expect(reader.status).toBe(403);
    const owner = await mintToken(stack, "Owner");
    const unknown = await testNotification(owner, { route: "no_such_route" });
    expect(unknown.status).toBe(422);
    expect(unknown.body).toMatchObject({ detail: [{ loc: ["body", "route"], type: "value_error" }] });
    const extra = await testNotification(owner, { route: "operational_alert", to: "x" });
    expect(extra.status).toBe(422);
    expect(typeof extra.body.request_id).toBe("string");
  });
  it("C-540 GET /api/notifications/preview renders a template as the email channel would, in en or ko, from synthetic data, and sends nothing", async () => {
    const reader = await mintToken(stack, "Reader");
    const mailDir = path.join(stack.dataDir, "mail");
    const before = files(mailDir).length;
    const preview = async (query: string, token: string | null = reader, method = "GET") =>
      fetch(`${stack.info.functions_url}/api/notifications/preview${query}`, {
        method,
        headers: token ? { Authorization: `Bearer ${token}` } : {},
      });
    const ko = await preview("?template=incident.open&locale=ko");
    expect(ko.status).toBe(200);
    const rendered = (await ko.json()) as { subject: string; text: string; html: string; locale: string };
    expect(rendered.locale).toBe("ko");
    expect(rendered.subject).toBe("[HIGH] 인시던트 inc_preview_0001 발생");
    expect(rendered.text).toContain("심각도: high");
    const en = (await (await preview("?template=approval.request")).json()) as { subject: string; text: string };
    expect(en.subject).toBe("[A1] Approval requested");
    expect(en.text).toContain("apr_000000000000000000000000");
    // A malformed parameter is 400 naming it; a missing one 422 with its loc (spec §7).
    const bad = await preview("?template=../../etc/passwd&locale=ko");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { detail: string }).detail).toContain("template");
    expect((await preview("?template=notify.test&locale=fr")).status).toBe(400);
    const missing = await preview("?locale=ko");
    expect(missing.status).toBe(422);
    expect(((await missing.json()) as { detail: { loc: string[] }[] }).detail.map((d) => d.loc.join("."))).toEqual([
      "query.template",
    ]);
    expect((await preview("?template=notify.test", null)).status).toBe(401);
    expect((await preview("?template=notify.test", reader, "POST")).status).toBeGreaterThanOrEqual(404);
    expect(files(mailDir)).toHaveLength(before);
  });
});
