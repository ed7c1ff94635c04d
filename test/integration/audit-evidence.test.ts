import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import type { Role } from "../../shared/auth/roles.js";
import { AUDIT_INLINE_EVIDENCE_CHARS, auditEvidence } from "../../shared/ops/audit.js";
import { createEvidenceStore, type EvidenceStore } from "../../shared/ops/evidence-store.js";
import { openBlobContainer } from "../../shared/storage/blob-container.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let store: EvidenceStore;
let counter = 0;

beforeAll(async () => {
  azurite = await testAzurite();
  const container = `auditevidence${Date.now().toString(36)}`;
  store = createEvidenceStore(() => openBlobContainer(azurite.connectionString, container));
});
afterAll(async () => {
  await azurite?.stop();
});

const harness = (withStore = true) =>
  consoleHarness(
    prefixedTables(azurite.connectionString, `aev${++counter}x${Date.now().toString(36)}`),
    withStore ? { evidence: store } : {},
  );

async function run(h: ReturnType<typeof harness>, text: string, role: Role = "Reader"): Promise<ToolResult> {
  const reply = await h.coordinator.handleTurn(callerWith(role), { text });
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}

describe("large tool evidence in the evidence store, referenced from the audit entry", () => {
  it("stores evidence over the inline limit by content address, query_audit returns the reference, and evidence_id reads the same evidence back", async () => {
    const h = harness();
    // Entries whose page is well over the inline limit when an auditor reads them.
    for (let n = 0; n < 30; n++)
      await h.audit.record({
        actor: { oid: "oid-ops", name: "Ops" },
        action: "ops.note",
        target: `note-${n}`,
        outcome: "succeeded",
        request_id: `r-${n}`,
        details: { note: `${n} `.repeat(400) },
        // Readable by the Reader auditing below (an unlisted act is Owner-only by default).
        visibility_floor: "Reader",
      });
    const page = await run(h, "query_audit limit=30");
    expect(page.status).toBe("ok");
    const text = JSON.stringify((page as { data: unknown }).data);
    expect(text.length).toBeGreaterThan(AUDIT_INLINE_EVIDENCE_CHARS);

    const [entry] = await h.audit.list({ action: "console.tool_call", limit: 1 });
    const sha256 = createHash("sha256").update(text).digest("hex");
    expect(entry?.details).toMatchObject({
      evidence_sha256: sha256,
      evidence_chars: text.length,
      evidence_blob: { evidence_id: `sha256-${sha256}`, sha256, size: Buffer.byteLength(text) },
    });
    expect(entry?.details).not.toHaveProperty("evidence");

    // The auditor's own read shows the reference …
    const later = (await run(h, "query_audit actor=oid-Reader limit=5")) as {
      data: { entries: { audit_id: string; details: Record<string, unknown> }[] };
    };
    expect(later.data.entries.find((e) => e.audit_id === entry?.audit_id)?.details.evidence_blob).toEqual({
      evidence_id: `sha256-${sha256}`,
      sha256,
      size: Buffer.byteLength(text),
    });
    // … and reads the evidence by id, exactly as the tool returned it.
    const read = await run(h, `query_audit evidence_id=sha256-${sha256}`);
    expect(read).toMatchObject({
      status: "ok",
      evidence_ref: `evidence:sha256-${sha256}`,
      data: { evidence: { evidence_id: `sha256-${sha256}`, content_type: "application/json", rbac_floor: "Reader" } },
    });
    expect((read as { data: { content: unknown } }).data.content).toEqual((page as { data: unknown }).data);
  });

  it("stores large evidence with the audit's redaction applied: no value under a secret-named key reaches the store", async () => {
    const evidence = {
      rows: Array.from({ length: 400 }, (_, n) => ({ n, text: "x".repeat(60) })),
      api_token: "tok-s3cr3t-4242",
      nested: { password: "hunter2-s3cr3t" },
    };
    const kept = await auditEvidence(evidence, { store, rbacFloor: "Reader" });
    const reference = kept.evidence_blob as { evidence_id: string };
    const stored = await store.get(reference.evidence_id);
    const text = stored?.bytes.toString("utf8") ?? "";
    expect(text.length).toBeGreaterThan(AUDIT_INLINE_EVIDENCE_CHARS);
    expect(text).not.toContain("s3cr3t");
    expect(JSON.parse(text)).toMatchObject({
      api_token: "[redacted]",
      nested: { password: "[redacted]" },
      rows: evidence.rows,
    });
  });

  it("keeps small evidence inline and stores nothing for it", async () => {
    const h = harness();
    await run(h, "query_audit limit=1");
    const [entry] = await h.audit.list({ action: "console.tool_call", limit: 1 });
    expect(entry?.details).toHaveProperty("evidence");
    expect(entry?.details).not.toHaveProperty("evidence_blob");
  });

  it("evidence is read by id only from the floor of the tool that produced it; an unknown id is not found, a malformed one invalid, and without a store it is unavailable", async () => {
    const h = harness();
    const secret = await store.put(
      Buffer.from(JSON.stringify({ approvals: ["apr_1"] })),
      "application/json",
      "Approver",
    );
    expect(await run(h, `query_audit evidence_id=${secret.evidence_id}`, "Reader")).toMatchObject({
      status: "error",
      error: {
        type: "forbidden",
        message: `evidence ${secret.evidence_id} requires the Approver role; your current role is Reader`,
      },
    });
    expect(await run(h, `query_audit evidence_id=${secret.evidence_id}`, "Approver")).toMatchObject({
      status: "ok",
      data: { content: { approvals: ["apr_1"] } },
    });
    expect(await run(h, `query_audit evidence_id=sha256-${"0".repeat(64)}`)).toMatchObject({
      status: "error",
      error: { type: "not_found" },
    });
    expect(await run(h, "query_audit evidence_id=../../etc/passwd")).toMatchObject({
      status: "error",
      error: { type: "invalid_arguments" },
    });
    expect(await run(harness(false), `query_audit evidence_id=${secret.evidence_id}`)).toMatchObject({
      status: "unavailable",
    });
  });

  it("a role below the evidence's floor is refused before any byte of it is downloaded", async () => {
    const secret = await store.put(Buffer.from(JSON.stringify({ approvals: ["apr_2"] })), "application/json", "Owner");
    const downloads: string[] = [];
    const watched: EvidenceStore = {
      put: (...a) => store.put(...a),
      describe: (id) => store.describe(id),
      get: (id) => {
        downloads.push(id);
        return store.get(id);
      },
    };
    const h = consoleHarness(prefixedTables(azurite.connectionString, `aev${++counter}x${Date.now().toString(36)}`), {
      evidence: watched,
    });
    expect(await run(h, `query_audit evidence_id=${secret.evidence_id}`, "Approver")).toMatchObject({
      status: "error",
      error: { type: "forbidden" },
    });
    expect(downloads).toEqual([]);
    expect(await run(h, `query_audit evidence_id=${secret.evidence_id}`, "Owner")).toMatchObject({
      status: "ok",
      data: { evidence: { rbac_floor: "Owner" }, content: { approvals: ["apr_2"] } },
    });
    expect(downloads).toEqual([secret.evidence_id]);
  });
});
