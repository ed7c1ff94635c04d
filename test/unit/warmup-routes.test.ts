import net from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  createKubernetesWarmup,
  type KubernetesWarmup,
  type WarmupView,
} from "../../jobapi/executors/kubernetes-warmup.js";
import { createJobApiTransport } from "../../jobapi/http.js";
import { createWarmupRoutes } from "../../jobapi/routes/warmup-routes.js";
import { createLogger } from "../../shared/logging/logger.js";

const headers = { "X-SVC-API-Token": "good" };
const transport = (warmup: KubernetesWarmup | undefined) =>
  createJobApiTransport({
    routes: createWarmupRoutes(warmup),
    logger: createLogger({ level: "error" }),
    authorize: async (token) => token === "good",
    bodyLimitBytes: 1024,
  });

describe("job API warm-up routes", () => {
  it("answer 409 with the envelope when shards run with the local executor (no nodes to warm)", async () => {
    const res = await transport(undefined).request("/v1/databases/demo/warmup", { method: "POST", headers });
    expect(res.status).toBe(409);
    expect(await res.json()).toEqual({
      detail: expect.stringContaining("local executor"),
      request_id: expect.any(String),
    });
  });

  it("refuse a malformed database name with 400 before any cluster call, and a call without the token with 401", async () => {
    const calls: string[] = [];
    const view: WarmupView = { database: "demo", release: "2026-01-01-00-00-00", state: "running", nodes: [] };
    const record = (call: string) => {
      calls.push(call);
      return view;
    };
    const warmup = {
      start: async (name: string) => record(`start ${name}`),
      status: async (name: string) => record(`status ${name}`),
    } as KubernetesWarmup;
    const app = transport(warmup);
    for (const bad of ["..%2F..%2Fetc", "has space", "x".repeat(200)]) {
      const res = await app.request(`/v1/databases/${bad}/warmup`, { method: "POST", headers });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        detail: expect.stringContaining("name"),
        request_id: expect.any(String),
      });
    }
    expect((await app.request("/v1/databases/demo/warmup", { method: "POST" })).status).toBe(401);
    expect(calls).toEqual([]);
    const started = await app.request("/v1/databases/demo/warmup", { method: "POST", headers });
    expect(started.status).toBe(202);
    expect(await started.json()).toEqual(view);
    expect((await app.request("/v1/databases/demo/warmup", { headers })).status).toBe(200);
    expect(calls).toEqual(["start demo", "status demo"]);
  });

  it("B-242 answer 503 with Retry-After in the envelope (not 500) when the cluster's API server refuses connections or resets them", async () => {
    // An API server that is down (a closed port) and one that drops every connection it accepts.
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const resetting = net.createServer((socket) => socket.resetAndDestroy());
    await new Promise<void>((resolve) => resetting.listen(0, "127.0.0.1", resolve));
    const resettingPort = (resetting.address() as net.AddressInfo).port;
    try {
      for (const port of [closedPort, resettingPort]) {
        const kubeConfig = new KubeConfig();
        kubeConfig.loadFromOptions({
          clusters: [{ name: "aks", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
          users: [{ name: "jobapi", token: "service-account-token" }],
          contexts: [{ name: "aks", cluster: "aks", user: "jobapi" }],
          currentContext: "aks",
        });
        const warmup = createKubernetesWarmup({
          kubeConfig,
          catalog: { get: async () => ({ manifest: { version: "2026-01-01-00-00-00" } }) as never },
          logger: createLogger({ level: "error" }),
          storage: { kind: "connection-string", connectionString: "UseDevelopmentStorage=true" },
          settings: {
            namespace: "blastplane",
            image: "blastplane-jobapi:local",
            nodeSelector: {},
            tolerations: [],
            activeDeadlineSeconds: 600,
            ttlSecondsAfterFinished: 600,
            dbCacheHostPath: "/var/lib/blastdb",
          },
        });
        const app = transport(warmup);
        for (const method of ["POST", "GET"]) {
          const res = await app.request("/v1/databases/demo/warmup", { method, headers });
          expect(res.status, `${method} with the API server on port ${port}`).toBe(503);
          expect(res.headers.get("retry-after")).toBe("5");
          expect(await res.json()).toEqual({
            detail: expect.stringContaining("unreachable"),
            request_id: res.headers.get("x-request-id"),
          });
        }
      }
    } finally {
      await new Promise<void>((resolve) => resetting.close(() => resolve()));
    }
  });
});
