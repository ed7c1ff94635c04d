import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCAL_ARM_WORLD } from "../../local/arm/stack-arm.js";
import { deployedFleet } from "../../shared/cluster/job-api-manifests.js";
import { DEMO_DB, demoQueries } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";

const run = promisify(execFile);
/** An image nobody built: the local kubelet cannot pull it, so the rollout never becomes ready. */
const ABSENT = `sha256:${"d".repeat(64)}`;
/** What the stack's local Resource Manager holds (local/arm/stack-arm.ts): the workspace names it. */
const WORKSPACE = {
  subscription_id: LOCAL_ARM_WORLD.subscriptionId,
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
/** The forced deploy of the absent image, left to run out its rollout timeout behind the tests that follow it. */
let forcedDeploy: string | undefined;

async function post(token: string, body: unknown, contentType = "application/json"): Promise<Response> {
  return fetch(`${stack.info.functions_url}/api/jobapi/deploy`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": contentType },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function operationOf(operationId: string): Promise<Record<string, unknown> & { progress?: { step?: string } }> {
  const res = await fetch(`${stack.info.functions_url}/api/operations/${operationId}`, {
    headers: { Authorization: `Bearer ${contributor}` },
  });
  return (await res.json()) as Record<string, unknown>;
}

async function finished(operationId: string): Promise<Record<string, unknown>> {
  return eventually(
    async () => {
      const o = await operationOf(operationId);
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
      BLASTPLANE_KUBE_NODES: "1",
      JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID: "22222222-2222-4222-8222-222222222222",
      JOBAPI_APP_SUBNET_CIDR: "10.1.0.0/24",
      JOBAPI_DEPLOY_KEY_VAULT_URL: "https://blastplane-kv.vault.azure.net/",
      JOBAPI_ROLLOUT_TIMEOUT_SECONDS: "10",
      JOB_POLL_INTERVAL_SECONDS: "1",
      // As `npm start` has it: the local Resource Manager, its clusters on the local Kubernetes API.
      BLASTPLANE_LOCAL_ARM: "1",
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
    // Applied once the operation reaches its rollout step. Its rollout of the absent image then runs
    // out its 10 s while the tests below provision and build; the last one waits for its end first.
    await eventually(
      async () => ((await operationOf(operation.operation_id)).progress?.step === "rollout" ? true : undefined),
      120_000,
      250,
    );
    forcedDeploy = operation.operation_id;
    expect(await kubectl("get", "deploy", "blastplane-jobapi", "-o", "jsonpath={.spec.replicas}")).toBe("1");
  });
});

describe("npm start's local Resource Manager: choices, then provisioning onto the local Kubernetes API", {
  timeout: 180_000,
}, () => {
  const get = async (route: string) => {
    const res = await fetch(`${stack.info.functions_url}${route}`, {
      headers: { Authorization: `Bearer ${contributor}` },
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const names = (page: Record<string, unknown>) => (page.items as { name: string }[]).map((i) => i.name);

  it("B-025 the workspace choices are what the managed identity sees in the local Resource Manager", async () => {
    expect(stack.info.arm_url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const subscriptions = await get("/api/workspace/choices/subscriptions");
    expect(subscriptions.status).toBe(200);
    expect((subscriptions.body.items as { id: string }[]).map((i) => i.id)).toContain(
      `/subscriptions/${LOCAL_ARM_WORLD.subscriptionId}`,
    );
    const q = `?subscription_id=${LOCAL_ARM_WORLD.subscriptionId}`;
    expect(names((await get(`/api/workspace/choices/resource_groups${q}`)).body)).toEqual([
      LOCAL_ARM_WORLD.resourceGroup,
    ]);
    expect(names((await get(`/api/workspace/choices/storage_accounts${q}`)).body)).toEqual([
      LOCAL_ARM_WORLD.storageAccount,
    ]);
    expect(names((await get(`/api/workspace/choices/registries${q}`)).body)).toEqual([LOCAL_ARM_WORLD.registry]);
  });

  it("B-003 B-011 B-157 two provisions at once answer 200 with one operation; it provisions the cluster, and kubectl shows the BLAST pool's nodes", async () => {
    const provision = () =>
      fetch(`${stack.info.functions_url}/api/aks/provision`, {
        method: "POST",
        headers: { Authorization: `Bearer ${contributor}` },
      });
    const [a, b] = await Promise.all([provision(), provision()]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const [oa, ob] = (await Promise.all([a.json(), b.json()])) as {
      operation: { operation_id: string; state: string };
    }[];
    expect(oa?.operation.operation_id).toBe(ob?.operation.operation_id);
    // Answered before the cluster exists: the work runs in the orchestration (B-011).
    expect(["queued", "running"]).toContain(oa?.operation.state);
    const op = await finished(oa?.operation.operation_id ?? "");
    expect({ ...op, detail: (op.error as { detail?: string } | undefined)?.detail }).toMatchObject({
      state: "succeeded",
      operation_type: "cluster.provision",
    });
    expect((op.progress as { steps: { name: string; state: string }[] }).steps).toEqual([
      expect.objectContaining({ name: "cluster", state: "succeeded" }),
      expect.objectContaining({ name: "blast_pool", state: "succeeded" }),
      expect.objectContaining({ name: "role_assignments", state: "succeeded" }),
    ]);
    const nodes = await kubectl("get", "nodes", "-l", "kubernetes.azure.com/agentpool=blast", "-o", "name");
    expect(nodes.split("\n").filter(Boolean)).toHaveLength(WORKSPACE.node_count);
  });

  it("B-004 B-012 the image build answers 200 before the image exists, then reports the image pinned by digest; B-027 the deploy of that digest finds the image", async () => {
    const res = await fetch(`${stack.info.functions_url}/api/images/build`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor}` },
    });
    expect(res.status).toBe(200);
    const { operation } = (await res.json()) as {
      operation: { operation_id: string; operation_type: string; state: string };
    };
    expect(operation).toMatchObject({ operation_type: "images.build", state: "queued" });
    const op = await finished(operation.operation_id);
    const progress = op.progress as {
      step: string;
      run_id: string;
      image_digest: string;
      image: string;
      log_tail: string;
    };
    expect({ state: op.state, error: op.error }).toEqual({ state: "succeeded", error: undefined });
    expect(progress.image_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(progress.image).toBe(`blastplanecr.azurecr.io/blastplane-jobapi@${progress.image_digest}`);
    expect(progress.log_tail).toContain(`Run ID: ${progress.run_id} was successful`);
    // The deploy of the built digest: the kubelet pulls it (no ImagePullBackOff, unlike the absent image above).
    // A deploy still running would be answered instead of a new one: the forced one above ends first.
    if (forcedDeploy) await finished(forcedDeploy);
    const deployed = await post(contributor, { image_digest: progress.image_digest, force: true });
    expect(deployed.status).toBe(200);
    const deploy = await finished(
      ((await deployed.json()) as { operation: { operation_id: string } }).operation.operation_id,
    );
    expect(JSON.stringify(deploy)).not.toMatch(/ImagePullBackOff|ErrImagePull/);
  });

  it("B-026 once deployed, a search submitted through the dashboard is served by the deployed job API (through the cluster's Service), not the one JOBAPI_URL names", async () => {
    // The deployed job API available (its rollout may outlast the operation's 10 s on a busy machine).
    await kubectl("rollout", "status", "deploy/blastplane-jobapi", "--timeout=150s");
    const submitted = await fetch(`${stack.info.functions_url}/api/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
      body: JSON.stringify({ program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1) }),
    });
    expect(submitted.status).toBe(200);
    const { job_id } = (await submitted.json()) as { job_id: string };
    const job = await eventually(
      async () => {
        const res = await fetch(`${stack.info.functions_url}/api/blast/jobs/${job_id}`, {
          headers: { Authorization: `Bearer ${contributor}` },
        });
        const body = (await res.json()) as { status: string; openapi_job_id: string | null };
        return ["completed", "failed", "cancelled"].includes(body.status) ? body : undefined;
      },
      180_000,
      1000,
    );
    expect(job.status).toBe("completed");
    // The deployed pod's own log has the submit and the status polls of this job; the dashboard
    // said which job API it chose.
    const podLog = await kubectl("logs", "deploy/blastplane-jobapi", "-c", "jobapi");
    const requests = podLog
      .split("\n")
      .filter((line) => line.includes('"msg":"request"'))
      .map((line) => JSON.parse(line) as { method: string; path: string; status: number });
    expect(requests).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ method: "POST", path: "/v1/jobs", status: 202 }),
        expect.objectContaining({ method: "GET", path: `/v1/jobs/${job.openapi_job_id}/status`, status: 200 }),
      ]),
    );
    expect(stack.output()).toMatch(/"msg":"job API selected".*"source":"deployed"/);
    // It also ran the search (decision 0026): accepted into its own fleet, dispatched and completed
    // by it (its shards as Jobs on the cluster), while the stack's own job API, on the same
    // Azurite, took no part in it.
    const logged = (text: string, msg: string) =>
      text
        .split("\n")
        .filter((line) => line.includes(`"msg":"${msg}"`) && line.includes(`"job_id":"${job.openapi_job_id}"`));
    expect(logged(podLog, "job accepted").join("\n")).toContain(`"fleet":"${deployedFleet("blastplane")}"`);
    expect(logged(podLog, "job completed")).toHaveLength(1);
    expect(logged(stack.output(), "job completed")).toEqual([]);
  });
});
