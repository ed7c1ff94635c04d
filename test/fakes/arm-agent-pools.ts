import https from "node:https";
import type { AddressInfo } from "node:net";
import { selfSignedLoopbackCertificate } from "./tls.js";

/** One agent pool as the fake keeps it (the ARM resource's `properties`). */
export interface FakeAgentPool {
  count: number;
  vmSize: string;
  mode: "System" | "User";
  enableAutoScaling: boolean;
  minCount?: number;
  maxCount?: number;
  provisioningState: string;
}

/**
 * A fake of the AKS Resource Manager API on loopback TLS, speaking its wire protocol so the real
 * `@azure/arm-containerservice` client is what tests exercise:
 * - `GET …/managedClusters/{cluster}` → the cluster with `properties.powerState.code`;
 * - `GET …/managedClusters/{cluster}/agentPools/{pool}` → `{id, name, type, properties}` or 404;
 * - `PUT` of the same → 201 with `provisioningState: "Updating"` and an `Azure-AsyncOperation`
 *   header; the operation answers `InProgress` for `pollsBeforeDone` polls, then `Succeeded`, when
 *   the new count takes effect (the long-running operation the client polls).
 * Every call needs `Authorization: Bearer <token>` and an `api-version`.
 */
export interface FakeArmAgentPools {
  url: string;
  ca: string;
  token: string;
  subscriptionId: string;
  resourceGroup: string;
  cluster: string;
  pools: Record<string, FakeAgentPool>;
  powerState: "Running" | "Stopped";
  pollsBeforeDone: number;
  requests: { method: string; path: string; body: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startFakeArmAgentPools(): Promise<FakeArmAgentPools> {
  const { key, cert } = selfSignedLoopbackCertificate();
  const fake: Omit<FakeArmAgentPools, "url" | "close"> = {
    ca: cert,
    token: "fake-arm-token",
    subscriptionId: "11111111-2222-4333-8444-555555555555",
    resourceGroup: "rg-blast",
    cluster: "aks-blast",
    pools: {},
    powerState: "Running",
    pollsBeforeDone: 1,
    requests: [],
  };
  const operations = new Map<string, { pool: string; count: number; polls: number }>();
  let nextOperation = 0;
  let base = "";
  const clusterPath = () =>
    `/subscriptions/${fake.subscriptionId}/resourceGroups/${fake.resourceGroup}/providers/Microsoft.ContainerService/managedClusters/${fake.cluster}`;
  const poolResource = (name: string, pool: FakeAgentPool) => ({
    id: `${clusterPath()}/agentPools/${name}`,
    name,
    type: "Microsoft.ContainerService/managedClusters/agentPools",
    properties: pool,
  });

  const server = https.createServer({ key, cert }, (req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => {
      text += c.toString();
    });
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "https://127.0.0.1");
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      fake.requests.push({ method: req.method ?? "", path: url.pathname, body });
      const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { "Content-Type": "application/json", ...headers });
        res.end(JSON.stringify(payload));
      };
      if (req.headers.authorization !== `Bearer ${fake.token}`)
        return send(401, { error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." } });
      if (!url.searchParams.get("api-version"))
        return send(400, {
          error: { code: "MissingApiVersionParameter", message: "The api-version query parameter is required." },
        });
      const operation = /\/providers\/Microsoft\.ContainerService\/locations\/eastus\/operations\/([^/]+)$/.exec(
        url.pathname,
      );
      if (req.method === "GET" && operation?.[1]) {
        const op = operations.get(operation[1]);
        if (!op) return send(404, { error: { code: "NotFound", message: "no such operation" } });
        op.polls += 1;
        if (op.polls <= fake.pollsBeforeDone) return send(200, { name: operation[1], status: "InProgress" });
        const pool = fake.pools[op.pool];
        if (pool) Object.assign(pool, { count: op.count, provisioningState: "Succeeded" });
        return send(200, { name: operation[1], status: "Succeeded" });
      }
      if (req.method === "GET" && url.pathname === clusterPath()) {
        return send(200, {
          id: clusterPath(),
          name: fake.cluster,
          location: "eastus",
          properties: { provisioningState: "Succeeded", powerState: { code: fake.powerState } },
        });
      }
      const poolMatch = url.pathname.startsWith(`${clusterPath()}/agentPools/`)
        ? url.pathname.slice(`${clusterPath()}/agentPools/`.length)
        : undefined;
      if (poolMatch && !poolMatch.includes("/")) {
        const pool = fake.pools[poolMatch];
        if (!pool) return send(404, { error: { code: "NotFound", message: `agent pool ${poolMatch} not found` } });
        if (req.method === "GET") return send(200, poolResource(poolMatch, pool));
        if (req.method === "PUT") {
          const count = (body.properties as { count?: unknown } | undefined)?.count;
          if (typeof count !== "number" || !Number.isInteger(count) || count < 0)
            return send(400, {
              error: { code: "InvalidParameter", message: "properties.count must be a non-negative integer" },
            });
          const id = `op-${++nextOperation}`;
          operations.set(id, { pool: poolMatch, count, polls: 0 });
          pool.provisioningState = "Updating";
          const asyncOperation = `${base}/subscriptions/${fake.subscriptionId}/providers/Microsoft.ContainerService/locations/eastus/operations/${id}?api-version=${url.searchParams.get("api-version")}`;
          return send(201, poolResource(poolMatch, pool), { "Azure-AsyncOperation": asyncOperation });
        }
      }
      send(404, { error: { code: "NotFound", message: `no route ${req.method} ${url.pathname}` } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(fake, {
    url: base,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  });
}
