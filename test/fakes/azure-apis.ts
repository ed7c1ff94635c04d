import https from "node:https";
import type { AddressInfo } from "node:net";
import { runKql, type Tables } from "./kql.js";
import { selfSignedLoopbackCertificate } from "./tls.js";

/**
 * Fakes of the Azure REST APIs the console's providers call, on loopback TLS, speaking their wire
 * protocol so the real SDK clients are what the tests exercise:
 * - Log Analytics: `POST /workspaces/{id}/query` (`{query, timespan}` → `{tables:[{name, columns, rows}]}`),
 *   the query evaluated over `logTables` within the timespan (`kql.ts`; one it cannot run is a 400);
 * - Resource Graph: `POST /providers/Microsoft.ResourceGraph/resources?api-version=…`
 *   (`{subscriptions, query, options:{$top, $skipToken, resultFormat}}` → `{totalRecords, count,
 *   resultTruncated, data, $skipToken?}`), paging through `records` by `$skipToken`.
 * - Azure Monitor metrics: `POST /subscriptions/{id}/metrics:getBatch?…&metricnames=…` (`{resourceids}`
 *   → `{values:[{resourceid, value:[{name, unit, timeseries:[{data:[{timeStamp, average, …}]}]}]}]}`).
 * - ARM subscriptions: `GET /subscriptions/{id}?api-version=…` → `{subscriptionId, displayName, state}`.
 * Every call needs `Authorization: Bearer <token>`.
 */
export interface FakeAzureApis {
  url: string;
  ca: string;
  token: string;
  workspaceId: string;
  /** The workspace's tables (`requests`, `dependencies`, `traces`, `exceptions`), queried as KQL asks. */
  logTables: Tables;
  /** Records Resource Graph answers for the `Resources` query. */
  resources: Record<string, unknown>[];
  resourceGroups: Record<string, unknown>[];
  /** Makes the next Resource Graph answer say it was truncated. */
  truncateResources: boolean;
  /** Subscriptions ARM knows, by id. */
  subscriptions: Record<string, { displayName: string; state: string }>;
  /** Points of each metric name the metrics fake knows. */
  metrics: Record<string, { timeStamp: string; average?: number; maximum?: number; total?: number }[]>;
  requests: { method: string; path: string; authorized: boolean; body: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startFakeAzureApis(): Promise<FakeAzureApis> {
  const { key, cert } = selfSignedLoopbackCertificate();
  const fake: Omit<FakeAzureApis, "url" | "close"> = { ca: cert, token: "fake-azure-token", workspaceId: "00000000-0000-4000-8000-00000000beef", logTables: {}, resources: [], resourceGroups: [], truncateResources: false, metrics: {}, subscriptions: {}, requests: [] };
  const server = https.createServer({ key, cert }, (req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => {
      text += c.toString();
    });
    req.on("end", () => {
      const url = new URL(req.url ?? "/", "https://127.0.0.1");
      const authorized = req.headers.authorization === `Bearer ${fake.token}`;
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      fake.requests.push({ method: req.method ?? "", path: url.pathname, authorized, body });
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(payload));
      };
      if (!authorized) return send(401, { error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." } });
      const workspace = /^\/(?:v1\/)?workspaces\/([^/]+)\/query$/.exec(url.pathname);
      if (req.method === "POST" && workspace) {
        if (workspace[1] !== fake.workspaceId) return send(404, { error: { code: "WorkspaceNotFoundError", message: "workspace not found" } });
        try {
          const result = runKql(String(body.query ?? ""), fake.logTables, typeof body.timespan === "string" ? body.timespan : undefined);
          return send(200, { tables: [{ name: "PrimaryResult", ...result }] });
        } catch (error) {
          return send(400, { error: { code: "BadArgumentError", message: error instanceof Error ? error.message : "the query could not be run" } });
        }
      }
      if (req.method === "POST" && url.pathname === "/providers/Microsoft.ResourceGraph/resources" && url.searchParams.get("api-version")) {
        const query = String(body.query ?? "");
        const options = (body.options ?? {}) as { $top?: number; $skipToken?: string };
        const all = query.startsWith("ResourceContainers") ? fake.resourceGroups : fake.resources;
        const start = Number(options.$skipToken ?? 0);
        const top = options.$top ?? 100;
        const data = all.slice(start, start + top);
        const next = start + top < all.length ? String(start + top) : undefined;
        const truncated = !query.startsWith("ResourceContainers") && fake.truncateResources;
        return send(200, { totalRecords: all.length, count: data.length, resultTruncated: truncated ? "true" : "false", data, ...(next ? { $skipToken: next } : {}) });
      }
      if (req.method === "POST" && /^\/subscriptions\/[^/]+\/metrics:getBatch$/.test(url.pathname)) {
        const name = url.searchParams.get("metricnames") ?? "";
        const points = fake.metrics[name];
        const resourceIds = (body.resourceids ?? []) as string[];
        const metric = points
          ? { id: `${resourceIds[0]}/metrics/${name}`, type: "Microsoft.Insights/metrics", name: { value: name, localizedValue: name }, unit: "Percent", timeseries: [{ metadatavalues: [], data: points }] }
          : { id: "", type: "", name: { value: name }, unit: "Unspecified", errorCode: "MetricNotFound", errorMessage: "no such metric", timeseries: [] };
        return send(200, { values: resourceIds.map((id) => ({ starttime: url.searchParams.get("starttime"), endtime: url.searchParams.get("endtime"), interval: "PT1M", namespace: url.searchParams.get("metricnamespace"), resourceregion: "eastus", resourceid: id, value: [metric] })) });
      }
      const subscription = /^\/subscriptions\/([^/]+)$/.exec(url.pathname);
      if (req.method === "GET" && subscription?.[1] && url.searchParams.get("api-version")) {
        const known = fake.subscriptions[subscription[1]];
        if (!known) return send(404, { error: { code: "SubscriptionNotFound", message: "The subscription could not be found." } });
        return send(200, { id: `/subscriptions/${subscription[1]}`, subscriptionId: subscription[1], tenantId: "00000000-0000-4000-8000-0000000000aa", ...known, authorizationSource: "RoleBased" });
      }
      send(404, { error: { code: "NotFound", message: `no route ${req.method} ${url.pathname}` } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(fake, {
    url: `https://127.0.0.1:${port}`,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  });
}
