import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

const run = promisify(execFile);
/** An image nobody built: the local kubelet cannot pull it, so the rollout never becomes ready. */
const ABSENT = `sha256:${"d".repeat(64)}`;
const WORKSPACE = {
  subscription_id: "00000000-0000-4000-8000-000000000001",
  resource_group: "rg-blastplane",
  location: "westeurope",
  storage_account: "blastplanedata",
  registry: "blastplanecr",
  cluster_name: "blastplane-aks",
  node_size: "Standard_E8s_v5",
  node_count: 2,
};

let stack: TestStack;
let contributor: string;
let reader: string;

async function post(token: string, body: unknown, contentType = "application/json"): Promise<Response> {
  return fetch(`${stack.info.functions_url}/api/jobapi/deploy`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function finished(operationId: string): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      const res = await fetch(`${stack.info.functions_url}/api/operations/${operationId}`, {
        headers: { Authorization: `Bearer ${contributor}` },
      });
      const o = (await res.json()) as Record<string, unknown>;
      return ["succeeded", "failed", "cancelled"].includes(String(o.state)) ? o : undefined;
    },
    120_000,
    250,
  );
}

const kubectl = async (...args: string[]) =>
  (await run("kubectl", ["--kubeconfig", path.join(stack.dataDir, "kubeconfig"), "-n", "blastplane", ...args])).stdout;

beforeAll(async () => {
  stack = await startStack({
    env: {
      BLASTPLANE_EXECUTOR: "kubernetes",
      BLASTPLANE_SKIP_DEMO_DB: "1",
      BLASTPLANE_KUBE_NODES: "1",
      JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID: "22222222-2222-4222-8222-222222222222",
      JOBAPI_APP_SUBNET_CIDR: "10.1.0.0/24",
      JOBAPI_DEPLOY_KEY_VAULT_URL: "https://blastplane-kv.vault.azure.net/",
      JOBAPI_ROLLOUT_TIMEOUT_SECONDS: "10",
      JOB_POLL_INTERVAL_SECONDS: "1",
    },
  });
  contributor = await mintToken(stack, "Contributor");
  reader = await mintToken(stack, "Reader");
  // The first authenticated call fetches the identity provider's keys: wait until one is answered.
  await eventually(
    async () =>
      (await fetch(`${stack.info.functions_url}/api/me`, { headers: { Authorization: `Bearer ${reader}` } })).status ===
      200
        ? true
        : undefined,
    60_000,
    250,
  );
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("POST /api/jobapi/deploy", { timeout: 180_000 }, () => {
  it("refuses a Reader (403), a malformed body (400) and a digest that is not one (422 with loc, msg, type)", async () => {
    const denied = await post(reader, { image_digest: ABSENT });
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    expect((await post(contributor, "{not json")).status).toBe(400);
    const tag = await post(contributor, { image_digest: "latest" });
    expect(tag.status).toBe(422);
    expect(((await tag.json()) as { detail: unknown[] }).detail).toEqual([
      expect.objectContaining({ loc: ["body", "image_digest"], type: expect.any(String), msg: expect.any(String) }),
    ]);
    expect((await post(contributor, { image_digest: ABSENT, replicas: 3 })).status).toBe(422);
  });

  it("refuses with 409 before a workspace is saved", async () => {
    const res = await post(contributor, { image_digest: ABSENT });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { detail: string }).detail).toMatch(/save the workspace/);
  });

  it("B-027 a deploy of an image the registry does not have fails its operation with the pod's ImagePullBackOff; kubectl shows the Deployment applied by blastplane", async () => {
    const saved = await fetch(`${stack.info.functions_url}/api/workspace`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
      body: JSON.stringify(WORKSPACE),
    });
    expect(saved.status).toBe(200);
    const res = await post(contributor, { image_digest: ABSENT });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { operation: { operation_id: string; operation_type: string } };
    expect(body.operation.operation_type).toBe("jobapi.deploy");
    const op = await finished(body.operation.operation_id);
    expect(op).toMatchObject({ state: "failed", progress: { step: "rollout", image_digest: ABSENT } });
    expect((op.error as { detail: string }).detail).toMatch(
      new RegExp(
        `^the job API did not become ready within 10 s: blastplane-jobapi-\\w+-\\w+: (ImagePullBackOff|ErrImagePull) \\(.*blastplanecr\\.azurecr\\.io/blastplane-jobapi@${ABSENT}`,
      ),
    );
    expect(
      await kubectl("get", "deploy", "blastplane-jobapi", "-o", "jsonpath={.metadata.managedFields[*].manager}"),
    ).toBe("blastplane");
  });

  it("a field another manager changed since is a 409 naming it; force takes it over and starts the deploy", async () => {
    await kubectl("patch", "deploy/blastplane-jobapi", "--type=merge", "-p", '{"spec":{"replicas":2}}');
    const refused = await post(contributor, { image_digest: ABSENT });
    expect(refused.status).toBe(409);
    const detail = ((await refused.json()) as { detail: string }).detail;
    expect(detail).toMatch(/Deployment\/blastplane-jobapi \.spec\.replicas \(owned by "kubectl[^"]*"\)/);
    expect(await kubectl("get", "deploy", "blastplane-jobapi", "-o", "jsonpath={.spec.replicas}")).toBe("2");
    const forced = await post(contributor, { image_digest: ABSENT, force: true });
    expect(forced.status).toBe(200);
    const { operation } = (await forced.json()) as { operation: { operation_id: string } };
    await finished(operation.operation_id);
    expect(await kubectl("get", "deploy", "blastplane-jobapi", "-o", "jsonpath={.spec.replicas}")).toBe("1");
  });
});
