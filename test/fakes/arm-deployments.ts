import https from "node:https";
import type { AddressInfo } from "node:net";
import { selfSignedLoopbackCertificate } from "./tls.js";

/**
 * A fake of ARM's resource-group deployments on loopback TLS, speaking its wire protocol so the
 * real `@azure/arm-resourcesdeployments` client is what the tests exercise:
 * `GET /subscriptions/{id}/resourcegroups/{rg}/providers/Microsoft.Resources/deployments?api-version=…`
 * → `{value: [DeploymentExtended…], nextLink?}`, `pageSize` deployments a page (the client must
 * follow `nextLink`). Every call needs `Authorization: Bearer <token>`; an unknown subscription or
 * resource group is ARM's 404.
 */
export interface FakeArmDeployment {
  name: string;
  timestamp: string;
  provisioningState: string;
  duration?: string;
  correlationId?: string;
  /** Returned by ARM and never to leave the provider. */
  parameters?: Record<string, unknown>;
}

export interface FakeArmDeployments {
  url: string;
  ca: string;
  token: string;
  subscriptionId: string;
  /** Deployments by resource group name (ARM treats the name case-insensitively). */
  resourceGroups: Record<string, FakeArmDeployment[]>;
  pageSize: number;
  requests: { path: string; query: Record<string, string>; authorized: boolean }[];
  close(): Promise<void>;
}

export async function startFakeArmDeployments(subscriptionId: string): Promise<FakeArmDeployments> {
  const { key, cert } = selfSignedLoopbackCertificate();
  const fake: Omit<FakeArmDeployments, "url" | "close"> = {
    ca: cert,
    token: "fake-arm-token",
    subscriptionId,
    resourceGroups: {},
    pageSize: 2,
    requests: [],
  };
  const server = https.createServer({ key, cert }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    const authorized = req.headers.authorization === `Bearer ${fake.token}`;
    fake.requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams), authorized });
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify(payload));
    };
    if (!authorized)
      return send(401, { error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." } });
    const route =
      /^\/subscriptions\/([^/]+)\/resourcegroups\/([^/]+)\/providers\/Microsoft\.Resources\/deployments\/?$/i.exec(
        url.pathname,
      );
    if (req.method !== "GET" || !route || !url.searchParams.get("api-version"))
      return send(404, { error: { code: "NotFound", message: `no route ${req.method} ${url.pathname}` } });
    if (route[1] !== fake.subscriptionId)
      return send(404, { error: { code: "SubscriptionNotFound", message: "The subscription could not be found." } });
    const group = Object.keys(fake.resourceGroups).find(
      (g) => g.toLowerCase() === decodeURIComponent(route[2] ?? "").toLowerCase(),
    );
    if (group === undefined)
      return send(404, {
        error: { code: "ResourceGroupNotFound", message: `Resource group '${route[2]}' could not be found.` },
      });
    const all = fake.resourceGroups[group] ?? [];
    const start = Number(url.searchParams.get("$skiptoken") ?? 0);
    const page = all.slice(start, start + fake.pageSize);
    const next = start + fake.pageSize < all.length ? new URL(url) : undefined;
    next?.searchParams.set("$skiptoken", String(start + fake.pageSize));
    send(200, {
      value: page.map((d) => ({
        id: `/subscriptions/${fake.subscriptionId}/resourceGroups/${group}/providers/Microsoft.Resources/deployments/${d.name}`,
        name: d.name,
        type: "Microsoft.Resources/deployments",
        properties: {
          provisioningState: d.provisioningState,
          timestamp: d.timestamp,
          duration: d.duration ?? "PT1M",
          correlationId: d.correlationId ?? "00000000-0000-4000-8000-000000000001",
          mode: "Incremental",
          parameters: d.parameters ?? {},
          outputs: {},
        },
      })),
      ...(next ? { nextLink: `https://${req.headers.host}${next.pathname}${next.search}` } : {}),
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(fake, {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}
