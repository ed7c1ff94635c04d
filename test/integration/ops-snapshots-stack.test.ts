import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;
const tokens: Record<string, string> = {};

beforeAll(async () => {
  // The snapshot timer every 2 s (and once at start), so a test waits seconds for a new snapshot.
  stack = await startStack({
    env: { SVC_OPS_LOOP_SCHEDULE: "*/2 * * * * *", BLASTPLANE_EXECUTOR: "kubernetes", BLASTPLANE_KUBE_NODES: "2" },
  });
  for (const role of ["Reader", "Owner"]) tokens[role] = await mintToken(stack, role);
});
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

type Result = { status: string; tool: string; data?: Record<string, unknown> };
async function tool(role: string, text: string): Promise<Result> {
  const res = await fetch(`${stack.info.functions_url}/api/chat`, {
    method: "POST",
    headers: { Authorization: `Bearer ${tokens[role]}`, "Content-Type": "application/json" },
    body: JSON.stringify({ text }),
  });
  expect(res.status).toBe(200);
  const reply = (await res.json()) as { tool_results: Result[]; text: string };
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}
/** The tool's answer once a snapshot satisfying `ready` has been recorded. */
const snapshot = (text: string, ready: (data: Record<string, unknown>) => boolean = () => true) =>
  eventually(
    async () => {
      const result = await tool("Reader", text);
      return result.status === "ok" && result.data && ready(result.data) ? result.data : undefined;
    },
    30_000,
    250,
  );

describe("operations snapshots on npm start (the local stack with its Kubernetes API)", () => {
  it("C-095: query_detection_readiness answers the local stack's own readiness: every axis but identity observed, so degraded with a shadow ceiling", async () => {
    // The job API may still be warming up its first answer; wait for the snapshot that sees it ready.
    const data = await snapshot(
      "query_detection_readiness",
      (d) => (d.axes as { axis: string; ready: boolean | null }[]).find((a) => a.axis === "job_api")?.ready === true,
    );
    expect(data).toMatchObject({
      verdict: "degraded",
      authority_ceiling: "shadow",
      producer: "ops_loop",
      schema_version: 1,
      coverage_gaps: [{ axis: "identity" }],
    });
    const axes = Object.fromEntries(
      (data.axes as { axis: string; ready: boolean | null; detail: string }[]).map((a) => [a.axis, a]),
    );
    expect(axes.cluster).toMatchObject({ ready: true, detail: expect.stringContaining("the Kubernetes API answers") });
    expect(axes.nodes).toMatchObject({ ready: true, detail: "2 of 2 BLAST pool nodes ready" });
    expect(axes.databases).toMatchObject({ ready: true, detail: expect.stringMatching(/^1 installed/) });
    expect(axes.storage).toMatchObject({ ready: true });
  });

  it("C-097: verifier attempts from the coordinator and a runbook reach query_t2_recovery on the next snapshot", async () => {
    expect(
      (await tool("Owner", 'run_runbook name=retry_failed_job params={"job_id":"nosuchjob"} dry_run=true')).status,
    ).toBe("ok");
    await fetch(`${stack.info.functions_url}/api/chat`, {
      method: "POST",
      headers: { Authorization: `Bearer ${tokens.Owner}`, "Content-Type": "application/json" },
      body: JSON.stringify({ text: 'run_runbook name=retry_failed_job params={"job_id":"nosuchjob"} dry_run=false' }),
    });
    const data = await snapshot("query_t2_recovery", (d) => {
      const roles = new Set((d.recent_attempts as { route_role: string }[]).map((a) => a.route_role));
      return roles.has("coordinator") && roles.has("runbook");
    });
    // The operations loop may have verified proposals of its own meanwhile: at least these two are retained.
    expect(data.retained_attempt_count).toBeGreaterThanOrEqual(2);
    expect(data).toMatchObject({
      recovery_state: expect.stringMatching(/^(recovering|exhausted)$/),
      legacy_detail_gap: false,
    });
    expect(data.recent_attempts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ action_type: "retry_job", target_ref: "blast_job/nosuchjob", decision: "deny" }),
      ]),
    );
  });

  it("C-099: query_configuration_baseline observes the local stack's own settings and says what it cannot observe", async () => {
    const data = await snapshot("query_configuration_baseline");
    expect(data).toMatchObject({
      baseline: {
        baseline_id: "blastplane-deployment",
        version: 1,
        digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      },
      observations: {
        settings: { status: "observed", fields: { storage_identity_based: false, api_token_grace_seconds: 3600 } },
        aks: { status: "unobserved" },
        storage_account: { status: "unobserved" },
      },
      drift_findings: [{ expectation_id: "settings.storage_identity" }],
    });
  });
});
