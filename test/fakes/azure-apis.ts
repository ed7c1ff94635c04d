import https from "node:https";
import type { AccessToken, TokenCredential } from "@azure/identity";
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
 * - Resource Health (api-version 2022-10-01, paths and fields as in `@azure/arm-resourcehealth`'s
 *   operation specs): `GET /subscriptions/{id}[/resourceGroups/{rg}]/providers/Microsoft.ResourceHealth/availabilityStatuses`
 *   (current statuses) and `GET {resourceUri}/providers/Microsoft.ResourceHealth/availabilityStatuses`
 *   (one resource's history), each `{value:[{id, name, type, location, properties}], nextLink?}`,
 *   paged `healthPageSize` at a time through an absolute `nextLink`.
 * - AKS: `GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.ContainerService/managedClusters/{name}?api-version=…`
 *   → `{id, name, location, properties}` (ARM's envelope), or 403 `AuthorizationFailed` for a path in `forbiddenPaths`.
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
  /** Current Resource Health statuses: the resource id and the status's `properties` (`availabilityState`, `summary`, `reasonType`, `context`, …). */
  healthStatuses: { resourceId: string; properties: Record<string, unknown> }[];
  /** Resource Health history by resource id (lower case): entries as Azure returns them, newest first. */
  healthHistory: Record<string, Record<string, unknown>[]>;
  /** Makes every Resource Health call answer 503. */
  failResourceHealth: boolean;
  healthPageSize: number;
  /** Per-resource metric points by `<resource id lower case>|<metric>`, before `metrics` by name. */
  resourceMetrics: Record<string, { timeStamp: string; average?: number; maximum?: number; total?: number }[]>;
  /** Resource ids (lower case) whose metrics batch Azure Monitor refuses with 400 (as it does for a resource outside the endpoint's region). */
  refuseMetricsFor: string[];
  /** AKS managed clusters' `properties`, by resource id (lower case). */
  managedClusters: Record<string, Record<string, unknown>>;
  /** Resource paths (lower case) ARM refuses with 403 AuthorizationFailed, as for an identity without a role there. */
  forbiddenPaths: string[];
  requests: { method: string; path: string; query: string; authorized: boolean; body: Record<string, unknown> }[];
  close(): Promise<void>;
}

export async function startFakeAzureApis(): Promise<FakeAzureApis> {
  const { key, cert } = selfSignedLoopbackCertificate();
  const fake: Omit<FakeAzureApis, "url" | "close"> = {
    ca: cert,
    token: "fake-azure-token",
    workspaceId: "00000000-0000-4000-8000-00000000beef",
    logTables: {},
    resources: [],
    resourceGroups: [],
    truncateResources: false,
    metrics: {},
    subscriptions: {},
    healthStatuses: [],
    healthHistory: {},
    failResourceHealth: false,
    healthPageSize: 2,
    resourceMetrics: {},
    refuseMetricsFor: [],
    managedClusters: {},
    forbiddenPaths: [],
    requests: [],
  };
  const server = https.createServer({ key, cert }, (req, res) => {
    let text = "";
    req.on("data", (c: Buffer) => {
      text += c.toString();
    });
    req.on("end", () => {
      // Read as a path even when it starts with `//` (which a base-relative parse takes for a host).
      const url = new URL(`https://127.0.0.1${req.url ?? "/"}`);
      const authorized = req.headers.authorization === `Bearer ${fake.token}`;
      const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      fake.requests.push({ method: req.method ?? "", path: url.pathname, query: url.search, authorized, body });
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(payload));
      };
      if (!authorized)
        return send(401, { error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." } });
      const workspace = /^\/(?:v1\/)?workspaces\/([^/]+)\/query$/.exec(url.pathname);
      if (req.method === "POST" && workspace) {
        if (workspace[1] !== fake.workspaceId)
          return send(404, { error: { code: "WorkspaceNotFoundError", message: "workspace not found" } });
        try {
          const result = runKql(
            String(body.query ?? ""),
            fake.logTables,
            typeof body.timespan === "string" ? body.timespan : undefined,
          );
          return send(200, { tables: [{ name: "PrimaryResult", ...result }] });
        } catch (error) {
          return send(400, {
            error: {
              code: "BadArgumentError",
              message: error instanceof Error ? error.message : "the query could not be run",
            },
          });
        }
      }
      if (
        req.method === "POST" &&
        url.pathname === "/providers/Microsoft.ResourceGraph/resources" &&
        url.searchParams.get("api-version")
      ) {
        const query = String(body.query ?? "");
        const options = (body.options ?? {}) as { $top?: number; $skipToken?: string };
        // The health metrics' query lists resources of given types (`where type in~ ('a', 'b')`).
        const types = /where type in~ \(([^)]*)\)/
          .exec(query)?.[1]
          ?.split(",")
          .map((t) => t.trim().replace(/^'|'$/g, "").toLowerCase());
        const all = query.startsWith("ResourceContainers")
          ? fake.resourceGroups
          : types
            ? fake.resources
                .filter((r) => types.includes(String(r.type).toLowerCase()))
                .map((r) => ({ ...r, type: String(r.type).toLowerCase() }))
            : fake.resources;
        const start = Number(options.$skipToken ?? 0);
        const top = options.$top ?? 100;
        const data = all.slice(start, start + top);
        const next = start + top < all.length ? String(start + top) : undefined;
        const truncated = !query.startsWith("ResourceContainers") && fake.truncateResources;
        return send(200, {
          totalRecords: all.length,
          count: data.length,
          resultTruncated: truncated ? "true" : "false",
          data,
          ...(next ? { $skipToken: next } : {}),
        });
      }
      if (req.method === "POST" && /^\/subscriptions\/[^/]+\/metrics:getBatch$/.test(url.pathname)) {
        const name = url.searchParams.get("metricnames") ?? "";
        const resourceIds = (body.resourceids ?? []) as string[];
        if (resourceIds.some((id) => fake.refuseMetricsFor.includes(id.toLowerCase())))
          return send(400, {
            error: { code: "BadRequest", message: "The resources are not in the region of this endpoint." },
          });
        const metricOf = (id: string) => {
          const points = fake.resourceMetrics[`${id.toLowerCase()}|${name}`] ?? fake.metrics[name];
          return points
            ? {
                id: `${id}/metrics/${name}`,
                type: "Microsoft.Insights/metrics",
                name: { value: name, localizedValue: name },
                unit: "Percent",
                timeseries: [{ metadatavalues: [], data: points }],
              }
            : {
                id: "",
                type: "",
                name: { value: name },
                unit: "Unspecified",
                errorCode: "MetricNotFound",
                errorMessage: "no such metric",
                timeseries: [],
              };
        };
        return send(200, {
          values: resourceIds.map((id) => ({
            starttime: url.searchParams.get("starttime"),
            endtime: url.searchParams.get("endtime"),
            interval: "PT1M",
            namespace: url.searchParams.get("metricnamespace"),
            resourceregion: "eastus",
            resourceid: id,
            value: [metricOf(id)],
          })),
        });
      }
      const health = /^(\/subscriptions\/.*)\/providers\/Microsoft\.ResourceHealth\/availabilityStatuses$/i.exec(
        url.pathname,
      );
      if (req.method === "GET" && health?.[1] && url.searchParams.get("api-version") === "2022-10-01") {
        if (fake.failResourceHealth)
          return send(503, { error: { code: "ServiceUnavailable", message: "Resource Health is unavailable." } });
        const scope = health[1].toLowerCase();
        const scopeMatch = /^\/subscriptions\/[^/]+(?:\/resourcegroups\/([^/]+))?$/.exec(scope);
        const statusOf = (resourceId: string, properties: Record<string, unknown>, name = "current") => ({
          id: `${resourceId}/providers/Microsoft.ResourceHealth/availabilityStatuses/${name}`,
          name,
          type: "Microsoft.ResourceHealth/AvailabilityStatuses",
          location: "eastus",
          properties,
        });
        const all = scopeMatch
          ? fake.healthStatuses
              .filter((s) => s.resourceId.toLowerCase().startsWith(`${scope}/`))
              .map((s) => statusOf(s.resourceId, s.properties))
          : (fake.healthHistory[scope] ?? []).map((p, n) => statusOf(health[1] ?? "", p, `h${n}`));
        if (!scopeMatch && !fake.healthHistory[scope])
          return send(404, {
            error: { code: "ResourceNotFound", message: "The resource has no availability statuses." },
          });
        const start = Number(url.searchParams.get("$skiptoken") ?? 0);
        const next = start + fake.healthPageSize < all.length ? start + fake.healthPageSize : undefined;
        const nextLink =
          next === undefined
            ? undefined
            : `https://${req.headers.host}${health[1]}/providers/Microsoft.ResourceHealth/availabilityStatuses?api-version=2022-10-01&$skiptoken=${next}`;
        return send(200, { value: all.slice(start, start + fake.healthPageSize), ...(nextLink ? { nextLink } : {}) });
      }
      const clusterPath = url.pathname.toLowerCase();
      if (
        req.method === "GET" &&
        /^\/subscriptions\/[^/]+\/resourcegroups\/[^/]+\/providers\/microsoft\.containerservice\/managedclusters\/[^/]+$/.test(
          clusterPath,
        ) &&
        url.searchParams.get("api-version")
      ) {
        if (fake.forbiddenPaths.includes(clusterPath))
          return send(403, {
            error: {
              code: "AuthorizationFailed",
              message: `The client 'mi' with object id 'oid' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/read' over scope '${url.pathname}' or the scope is invalid.`,
            },
          });
        const properties = fake.managedClusters[clusterPath];
        if (!properties)
          return send(404, { error: { code: "ResourceNotFound", message: "The Resource was not found." } });
        return send(200, {
          id: url.pathname,
          name: url.pathname.split("/").at(-1),
          type: "Microsoft.ContainerService/ManagedClusters",
          location: "eastus",
          properties,
        });
      }
      const subscription = /^\/subscriptions\/([^/]+)$/.exec(url.pathname);
      if (req.method === "GET" && subscription?.[1] && url.searchParams.get("api-version")) {
        const known = fake.subscriptions[subscription[1]];
        if (!known)
          return send(404, {
            error: { code: "SubscriptionNotFound", message: "The subscription could not be found." },
          });
        return send(200, {
          id: `/subscriptions/${subscription[1]}`,
          subscriptionId: subscription[1],
          tenantId: "00000000-0000-4000-8000-0000000000aa",
          ...known,
          authorizationSource: "RoleBased",
        });
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

/** A credential handing out `token` (the fake accepts `fake.token` and refuses any other). */
export function staticTokenCredential(token: string): TokenCredential {
  return { getToken: async (): Promise<AccessToken> => ({ token, expiresOnTimestamp: Date.now() + 3_600_000 }) };
}

/** The real SDK clients pointed at the fake: its CA trusted, no retries so a refusal is seen at once. */
export function sdkOptionsFor(fake: Pick<FakeAzureApis, "url" | "ca">) {
  return { endpoint: fake.url, tlsOptions: { ca: fake.ca }, retryOptions: { maxRetries: 0 } };
}
