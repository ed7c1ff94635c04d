import { describe, expect, it } from "vitest";
import type { KubernetesWarmup, WarmupView } from "../../jobapi/executors/kubernetes-warmup.js";
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
});
