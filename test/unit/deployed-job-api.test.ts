import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig, type V1Deployment } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createDeployedJobApiLookup,
  createJobApiTargets,
  deployedJobApiVerdict,
  type JobApiTarget,
  jobApiLookupFailure,
  kubeFetch,
  readJobApiDeployment,
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

  it("a lookup that fails uses JOBAPI_URL for that call only (the next call looks again); without one it is a 503 naming a fixed reason", async () => {
    let lookups = 0;
    const { logger, lines } = quietLogger();
    const failing = async (): Promise<never> => {
      lookups++;
      throw new Error("connect ECONNREFUSED 10.1.2.3:6443");
    };
    const withFallback = createJobApiTargets({
      configuredUrl: "http://127.0.0.1:8080",
      lookUpDeployed: failing,
      now: () => 0,
      logger,
    });
    expect((await withFallback.resolve()).source).toBe("configured");
    expect((await withFallback.resolve()).source).toBe("configured");
    expect((await withFallback.resolve()).source).toBe("configured");
    // One API-server blip does not send every call for the cache period to JOBAPI_URL.
    expect(lookups).toBe(3);
    expect(lines.filter((l) => l.level === "warn").map((l) => l.reason)).toEqual([
      "unreachable",
      "unreachable",
      "unreachable",
    ]);
    const without = createJobApiTargets({ configuredUrl: undefined, lookUpDeployed: failing, logger });
    const error = await without.resolve().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toBe("the workspace's job API could not be looked up on the cluster: unreachable");
    const before = lookups;
    await without.resolve().catch(() => undefined);
    expect(lookups).toBe(before + 1);
    // The cluster's address is in neither the answers nor the log.
    expect(JSON.stringify(lines)).not.toContain("10.1.2.3");
  });

  it("a failed lookup is a fixed reason: the API server's refusal is http_<code>, never its body or headers", async () => {
    const { logger, lines } = quietLogger();
    const refusal = Object.assign(
      new Error(
        'HTTP-Code: 403\nMessage: Forbidden\nBody: {"message":"user system:anonymous"}\nHeaders: {"audit-id":"secret-audit"}',
      ),
      { name: "ApiException", code: 403 },
    );
    const targets = createJobApiTargets({
      configuredUrl: undefined,
      lookUpDeployed: async () => {
        throw refusal;
      },
      logger,
    });
    const error = await targets.resolve().catch((e: unknown) => e);
    expect((error as Error).message).toBe("the workspace's job API could not be looked up on the cluster: http_403");
    expect(lines.find((l) => l.level === "warn")).toMatchObject({ reason: "http_403", error: "ApiException" });
    expect(JSON.stringify(lines)).not.toContain("system:anonymous");
    expect(JSON.stringify(lines)).not.toContain("secret-audit");
  });

  it("a malformed kubeconfig is kubeconfig_unreadable: its token appears in no answer and no log line", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kubeconfig-"));
    const file = join(dir, "config");
    // A half-written kubeconfig: the YAML parser's message quotes the lines around the fault.
    await writeFile(
      file,
      [
        "apiVersion: v1",
        "clusters:",
        "- name: aks",
        "  cluster:",
        "    server: https://aks.example:443",
        "users:",
        "- name: identity",
        "  user:",
        "    token: SECRET-BEARER-abc123",
        "   client-key-data: QUJD",
        "contexts: []",
      ].join("\n"),
    );
    const loaded = new KubeConfig();
    expect(() => loaded.loadFromFile(file)).toThrow(/SECRET-BEARER-abc123/); // what was echoed before
    const { logger, lines } = quietLogger();
    for (const configuredUrl of [undefined, "http://127.0.0.1:8080"]) {
      const targets = createJobApiTargets({
        configuredUrl,
        lookUpDeployed: createDeployedJobApiLookup({
          savedWorkspace: async () => WORKSPACE,
          kubeConfig: async () => {
            const kc = new KubeConfig();
            kc.loadFromFile(file);
            return kc;
          },
          namespace: "blastplane",
        }),
        logger,
      });
      const answer = await targets.resolve().then(
        (t) => t.source,
        (e: unknown) => (e as Error).message,
      );
      expect(answer).toBe(
        configuredUrl
          ? "configured"
          : "the workspace's job API could not be looked up on the cluster: kubeconfig_unreadable",
      );
    }
    expect(lines.filter((l) => l.level === "warn").map((l) => l.reason)).toEqual([
      "kubeconfig_unreadable",
      "kubeconfig_unreadable",
    ]);
    expect(JSON.stringify(lines)).not.toContain("SECRET-BEARER");
    await rm(dir, { recursive: true, force: true });
  });

  it("a lookup that never answers is abandoned after lookupTimeoutMs: JOBAPI_URL is called, or the call is a 503 timeout", async () => {
    const { logger, lines } = quietLogger();
    let aborted: unknown;
    const hanging = (signal: AbortSignal) =>
      new Promise<never>(() => {
        signal.addEventListener("abort", () => {
          aborted = signal.reason;
        });
      });
    const withFallback = createJobApiTargets({
      configuredUrl: "http://127.0.0.1:8080",
      lookUpDeployed: hanging,
      lookupTimeoutMs: 50,
      logger,
    });
    expect((await withFallback.resolve()).source).toBe("configured");
    // The lookup's own request is told to stop.
    expect(aborted).toBeInstanceOf(Error);
    expect(lines.find((l) => l.level === "warn")?.reason).toBe("timeout");
    const without = createJobApiTargets({
      configuredUrl: undefined,
      lookUpDeployed: hanging,
      lookupTimeoutMs: 50,
      logger,
    });
    const error = await without.resolve().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toBe("the workspace's job API could not be looked up on the cluster: timeout");
  });

  it("a caller that gives up stops waiting for the lookup, with its own reason", async () => {
    const { logger } = quietLogger();
    const targets = createJobApiTargets({
      configuredUrl: "http://127.0.0.1:8080",
      lookUpDeployed: () => new Promise<never>(() => undefined),
      lookupTimeoutMs: 60_000,
      logger,
    });
    const caller = new AbortController();
    const waiting = targets.resolve({ signal: caller.signal }).catch((e: unknown) => e);
    caller.abort(new Error("client hung up"));
    expect(((await waiting) as Error).message).toBe("client hung up");
    targets.invalidate();
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

  it("a job-API call is not held by a cluster lookup that never answers: it goes to JOBAPI_URL", async () => {
    const { logger } = quietLogger();
    const client = createJobApiClient({
      baseUrl: url,
      targets: createJobApiTargets({
        configuredUrl: url,
        lookUpDeployed: () => new Promise<never>(() => undefined),
        lookupTimeoutMs: 100,
        logger,
      }),
      token: async () => "bpt_test-token",
      timeoutMs: 5000,
    });
    status = 200;
    expect((await client.getStatus("j1")).status).toBe("queued");
    expect(seen.at(-1)?.url).toBe("/v1/jobs/j1/status");
  });

  it("the Deployment read is aborted by the lookup's signal when the API server accepts and never answers", async () => {
    const silent = createServer(() => undefined);
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: "silent", server: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, skipTLSVerify: true },
      ],
      users: [{ name: "identity", token: "kube-token" }],
      contexts: [{ name: "silent", cluster: "silent", user: "identity" }],
      currentContext: "silent",
    });
    const arrived = once(silent, "request");
    const controller = new AbortController();
    const reading = readJobApiDeployment(kc, "blastplane", controller.signal).catch((e: unknown) => e);
    await arrived;
    controller.abort(new Error("lookup timed out"));
    const error = await reading;
    expect(error).toBeInstanceOf(Error);
    expect(jobApiLookupFailure(error)).not.toMatch(/^http_/);
    silent.closeAllConnections();
    silent.close();
  });

  it("kubeFetch refuses a streamed body before it opens a request (no socket left open)", async () => {
    let connections = 0;
    const counting = (): void => {
      connections++;
    };
    server.on("connection", counting);
    try {
      const fetchKube = kubeFetch(cluster());
      const refused = await fetchKube(`${url}/api/v1/namespaces`, {
        method: "POST",
        body: new ReadableStream({ start: (c) => c.close() }),
        // @ts-expect-error Node's fetch needs duplex for a stream body; kubeFetch ignores it
        duplex: "half",
      }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(TypeError);
      status = 200;
      expect((await fetchKube(`${url}/v1/jobs/j1/status`)).status).toBe(200);
      expect(connections).toBe(1);
    } finally {
      server.off("connection", counting);
    }
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
