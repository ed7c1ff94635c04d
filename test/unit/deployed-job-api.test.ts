import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { KubeConfig, type V1Deployment } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createJobApiTargets,
  deployedJobApiVerdict,
  type JobApiTarget,
  kubeFetch,
  serviceProxyUrl,
} from "../../shared/cluster/deployed-job-api.js";
import { createJobApiClient } from "../../shared/dashboard/job-api-client.js";
import { DependencyUnavailableError } from "../../shared/errors.js";
import { createLogger } from "../../shared/logging/logger.js";

const WORKSPACE = { storage_account: "blastplanedata" };

/** The job API Deployment as the deploy leaves it once its rollout is complete. */
function deployment(
  change: {
    manager?: string;
    operation?: string;
    storageAccount?: string;
    available?: "True" | "False";
    availableReplicas?: number;
  } = {},
): V1Deployment {
  return {
    metadata: {
      name: "blastplane-jobapi",
      namespace: "blastplane",
      managedFields: [{ manager: change.manager ?? "blastplane", operation: change.operation ?? "Apply" }],
    },
    spec: {
      selector: { matchLabels: { "app.kubernetes.io/name": "blastplane-jobapi" } },
      template: {
        spec: {
          containers: [
            {
              name: "jobapi",
              env: [{ name: "JOBAPI_STORAGE_ACCOUNT_NAME", value: change.storageAccount ?? "blastplanedata" }],
            },
            { name: "terminal" },
          ],
        },
      },
    },
    status: {
      availableReplicas: change.availableReplicas ?? 1,
      conditions: [{ type: "Available", status: change.available ?? "True", reason: "MinimumReplicasAvailable" }],
    },
  };
}

function quietLogger() {
  const lines: Record<string, unknown>[] = [];
  return { lines, logger: createLogger({ level: "debug", write: (l) => lines.push(JSON.parse(l)) }) };
}

const DEPLOYED: JobApiTarget = { source: "deployed", baseUrl: "https://cluster.example/proxy" };

describe("the deployed job API: which one the dashboard calls", () => {
  it("is the workspace's deployed job API only when blastplane applied it for the workspace's storage account and it is available", () => {
    expect(deployedJobApiVerdict(deployment(), WORKSPACE)).toEqual({ use: true });
    expect(deployedJobApiVerdict(undefined, WORKSPACE)).toEqual({ use: false, why: "no_deployment" });
    // Created by hand (kubectl create), or only updated by blastplane: not the dashboard's deploy.
    expect(
      deployedJobApiVerdict(deployment({ manager: "kubectl-client-side-apply", operation: "Update" }), WORKSPACE),
    ).toEqual({ use: false, why: "not_blastplane" });
    expect(deployedJobApiVerdict(deployment({ operation: "Update" }), WORKSPACE)).toMatchObject({ use: false });
    // Deployed for another workspace (its jobs live in another storage account).
    expect(deployedJobApiVerdict(deployment({ storageAccount: "otheraccount" }), WORKSPACE)).toEqual({
      use: false,
      why: "other_workspace",
    });
    // A rollout that never became ready (ImagePullBackOff), or a Recreate rollout under way.
    expect(deployedJobApiVerdict(deployment({ available: "False", availableReplicas: 0 }), WORKSPACE)).toEqual({
      use: false,
      why: "not_available",
    });
    expect(deployedJobApiVerdict(deployment({ availableReplicas: 0 }), WORKSPACE)).toMatchObject({ use: false });
  });

  it("reaches the job API through the cluster's Service proxy", () => {
    expect(serviceProxyUrl("https://aks-abc.hcp.westeurope.azmk8s.io:443/", "blastplane")).toBe(
      "https://aks-abc.hcp.westeurope.azmk8s.io:443/api/v1/namespaces/blastplane/services/blastplane-jobapi:http/proxy",
    );
  });

  it("without a cluster, is JOBAPI_URL as before; with neither, a 503 saying what to do", async () => {
    const { logger } = quietLogger();
    const configured = createJobApiTargets({ configuredUrl: "http://127.0.0.1:8080", logger });
    expect(await configured.resolve()).toEqual({ source: "configured", baseUrl: "http://127.0.0.1:8080" });
    const none = createJobApiTargets({ configuredUrl: undefined, logger });
    const error = await none.resolve().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toMatch(/deploy the job API from the Cluster page \(or set JOBAPI_URL\)/);
    const noneDeployed = createJobApiTargets({
      configuredUrl: undefined,
      lookUpDeployed: async () => ({ why: "no_deployment" }),
      logger,
    });
    await expect(noneDeployed.resolve()).rejects.toBeInstanceOf(DependencyUnavailableError);
  });

  it("prefers the deployed job API, and looks it up once per cache period however many calls arrive", async () => {
    let clock = 0;
    let lookups = 0;
    let deployed = false;
    const { logger, lines } = quietLogger();
    const targets = createJobApiTargets({
      configuredUrl: "http://127.0.0.1:8080",
      lookUpDeployed: async () => {
        lookups++;
        return deployed ? { target: DEPLOYED } : { why: "no_deployment" };
      },
      cacheMs: 30_000,
      now: () => clock,
      logger,
    });
    const concurrent = await Promise.all(Array.from({ length: 20 }, () => targets.resolve()));
    expect(new Set(concurrent.map((t) => t.source))).toEqual(new Set(["configured"]));
    expect(lookups).toBe(1);
    deployed = true;
    clock = 29_999;
    expect((await targets.resolve()).source).toBe("configured");
    expect(lookups).toBe(1);
    clock = 30_000;
    expect(await targets.resolve()).toBe(DEPLOYED);
    expect(lookups).toBe(2);
    // A completed deploy (or a deployed job API that stopped answering) makes the next call look again.
    targets.invalidate();
    deployed = false;
    expect((await targets.resolve()).source).toBe("configured");
    expect(lookups).toBe(3);
    expect(lines.filter((l) => l.msg === "job API selected").map((l) => l.source)).toEqual([
      "configured",
      "deployed",
      "configured",
    ]);
  });

  it("a lookup that fails uses JOBAPI_URL when there is one (and is not kept); without one it is a 503 naming the reason", async () => {
    let lookups = 0;
    const { logger, lines } = quietLogger();
    const failing = async (): Promise<never> => {
      lookups++;
      throw new Error("connect ECONNREFUSED 127.0.0.1:6443");
    };
    const withFallback = createJobApiTargets({
      configuredUrl: "http://127.0.0.1:8080",
      lookUpDeployed: failing,
      logger,
    });
    expect((await withFallback.resolve()).source).toBe("configured");
    expect(lines.some((l) => l.level === "warn" && String(l.reason).includes("ECONNREFUSED"))).toBe(true);
    const without = createJobApiTargets({ configuredUrl: undefined, lookUpDeployed: failing, logger });
    const error = await without.resolve().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toBe(
      "the workspace's job API could not be looked up on the cluster: connect ECONNREFUSED 127.0.0.1:6443",
    );
    const before = lookups;
    await without.resolve().catch(() => undefined);
    expect(lookups).toBe(before + 1);
  });
});

describe("the job-API client through the deployed job API", () => {
  let server: Server;
  let url: string;
  let status = 200;
  const seen: { url: string; authorization?: string; token?: string }[] = [];
  beforeAll(async () => {
    server = createServer((request: IncomingMessage, response) => {
      seen.push({
        url: request.url ?? "",
        ...(request.headers.authorization ? { authorization: request.headers.authorization } : {}),
        ...(request.headers["x-svc-api-token"] ? { token: String(request.headers["x-svc-api-token"]) } : {}),
      });
      if (status === 503) {
        // What the API server's Service proxy answers while no pod of the Service is ready.
        response.writeHead(503, { "Content-Type": "application/json" });
        response.end(
          JSON.stringify({
            kind: "Status",
            status: "Failure",
            message: 'no endpoints available for service "blastplane-jobapi"',
            reason: "ServiceUnavailable",
            code: 503,
          }),
        );
        return;
      }
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(JSON.stringify({ job_id: "j1", status: "queued", error: "", queue_position: 0 }));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  function cluster(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      // Plain HTTP here (the client allows it only with skipTLSVerify); the stack test goes through the local API server's TLS.
      clusters: [{ name: "local", server: url, skipTLSVerify: true }],
      users: [{ name: "identity", token: "kube-token" }],
      contexts: [{ name: "local", cluster: "local", user: "identity" }],
      currentContext: "local",
    });
    return kc;
  }

  it("calls the Service proxy with the cluster's credentials and the job API's token; a 503 there forgets the deployed target", async () => {
    let invalidated = 0;
    const target: JobApiTarget = {
      source: "deployed",
      baseUrl: serviceProxyUrl(url, "blastplane"),
      fetch: kubeFetch(cluster()),
    };
    const client = createJobApiClient({
      baseUrl: "http://127.0.0.1:9", // JOBAPI_URL: not called while the deployed one is chosen
      targets: { resolve: async () => target, invalidate: () => invalidated++ },
      token: async () => "bpt_test-token",
      timeoutMs: 5000,
    });
    status = 200;
    expect((await client.getStatus("j1")).status).toBe("queued");
    expect(seen.at(-1)).toEqual({
      url: "/api/v1/namespaces/blastplane/services/blastplane-jobapi:http/proxy/v1/jobs/j1/status",
      authorization: "Bearer kube-token",
      token: "bpt_test-token",
    });
    expect(invalidated).toBe(0);
    status = 503;
    const error = await client.getStatus("j1").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toBe(
      'job API answered 503: no endpoints available for service "blastplane-jobapi"',
    );
    expect(invalidated).toBe(1);
  });

  it("a configured job API that fails is not forgotten (there is nothing to look up)", async () => {
    let invalidated = 0;
    const client = createJobApiClient({
      baseUrl: undefined,
      targets: { resolve: async () => ({ source: "configured", baseUrl: url }), invalidate: () => invalidated++ },
      token: async () => "bpt_test-token",
      timeoutMs: 5000,
    });
    status = 503;
    await expect(client.getStatus("j1")).rejects.toBeInstanceOf(DependencyUnavailableError);
    expect(invalidated).toBe(0);
  });
});
