import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, jwtVerify, SignJWT } from "jose";
import { startBotServiceIssuer as startLocalBotServiceIssuer } from "../../local/bot-service-issuer.js";

/**
 * Local servers speaking Microsoft Teams' wire formats, so the Microsoft 365 Agents SDK's real
 * clients are tested end to end: Entra's token endpoint (what MSAL's client-credentials call
 * reaches), Bot Connector's `/v3/conversations/{id}/activities`, and a Bot Service–shaped token
 * issuer (OpenID metadata + JWKS over HTTPS) that signs the tokens Bot Service sends the bot.
 */

export interface Recorded {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** How the fake answers the next request. */
export type Behaviour = "ok" | { status: number; body?: string; headers?: Record<string, string> } | "cut" | "hang";

interface Fake {
  url: string;
  requests: Recorded[];
  script: Behaviour[];
  close(): Promise<void>;
}

async function serve(
  server: http.Server | https.Server,
  protocol: "http" | "https",
  answerOk: (r: Recorded, res: http.ServerResponse) => void | Promise<void>,
): Promise<Fake> {
  const fake: Fake = { url: "", requests: [], script: [], close: async () => undefined };
  const hanging = new Set<http.ServerResponse>();
  server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: Recorded = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      fake.requests.push(r);
      const b = fake.script.shift() ?? "ok";
      if (b === "ok") return void answerOk(r, res);
      if (b === "cut") return req.socket.destroy();
      if (b === "hang") {
        hanging.add(res);
        return;
      }
      res.writeHead(b.status, { "content-type": "application/json", ...b.headers });
      res.end(b.body ?? "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `${protocol}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
  return fake;
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
  res.end(JSON.stringify(body));
};

/**
 * Entra ID's v2 token endpoint (`POST /{tenant}/oauth2/v2.0/token`, client credentials): checks
 * the client id and secret and answers an RS256 access token for the requested `.default` scope, or
 * Entra's error body (`invalid_client`, AADSTS7000215) with 401.
 */
export async function startEntraFake(options: {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  /** Serve over HTTPS with this certificate (an MSAL authority must be HTTPS); default HTTP. */
  tls?: { key: string; cert: string };
}) {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const issued: string[] = [];
  const tenantPath = `/${options.tenantId}`;
  const handler = async (r: Recorded, res: http.ServerResponse): Promise<void> => {
    // The tenant's OpenID metadata: what MSAL reads first when the authority is this host.
    if (r.method === "GET" && r.path.split("?")[0] === `${tenantPath}/v2.0/.well-known/openid-configuration`)
      return json(res, 200, {
        issuer: `${fake.url}${tenantPath}/v2.0`,
        authorization_endpoint: `${fake.url}${tenantPath}/oauth2/v2.0/authorize`,
        token_endpoint: `${fake.url}${tenantPath}/oauth2/v2.0/token`,
        jwks_uri: `${fake.url}${tenantPath}/discovery/v2.0/keys`,
        end_session_endpoint: `${fake.url}${tenantPath}/oauth2/v2.0/logout`,
        response_types_supported: ["code", "id_token", "token"],
        subject_types_supported: ["pairwise"],
        id_token_signing_alg_values_supported: ["RS256"],
        token_endpoint_auth_methods_supported: ["client_secret_post", "private_key_jwt", "client_secret_basic"],
      });
    // The tenant's signing keys (a user's SSO token for the API is verified against them).
    if (r.method === "GET" && r.path.split("?")[0] === `${tenantPath}/discovery/v2.0/keys`)
      return json(res, 200, { keys: [{ ...(await exportJWK(publicKey)), kid: "entra-1", use: "sig", alg: "RS256" }] });
    const form = new URLSearchParams(r.body);
    if (r.method !== "POST" || !r.path.startsWith(`/${options.tenantId}/oauth2/v2.0/token`))
      return json(res, 404, { error: "invalid_request", error_description: "AADSTS90002: Tenant not found." });
    if (form.get("client_id") !== options.clientId || form.get("client_secret") !== options.clientSecret)
      return json(res, 401, {
        error: "invalid_client",
        error_description: "AADSTS7000215: Invalid client secret provided.",
        error_codes: [7000215],
        timestamp: new Date().toISOString(),
        trace_id: "00000000-0000-0000-0000-000000000000",
        correlation_id: "00000000-0000-0000-0000-000000000000",
      });
    const scope = form.get("scope") ?? "";
    const resource = scope.split(" ")[0]?.replace(/\/\.default$/, "") ?? "";
    const token = await new SignJWT({ appid: options.clientId, tid: options.tenantId, roles: [] })
      .setProtectedHeader({ alg: "RS256", kid: "entra-1" })
      .setIssuer(`https://sts.windows.net/${options.tenantId}/`)
      .setAudience(resource)
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(privateKey);
    issued.push(scope);
    json(res, 200, { token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: token });
  };
  const fake: Fake = options.tls
    ? await serve(https.createServer(options.tls), "https", handler)
    : await serve(http.createServer(), "http", handler);
  return {
    ...fake,
    /** The scopes tokens were issued for, in order. */
    issued,
    /** The tenant's OpenID metadata URL (what the API's bearer validator discovers). */
    get discoveryUrl() {
      return `${fake.url}${tenantPath}/v2.0/.well-known/openid-configuration`;
    },
    /**
     * A user's delegated access token for `audience` as Teams SSO obtains it for the API's resource
     * (v2 issuer of this tenant, `scp`, `oid`, `tid`, `auth_time`); `claims` override.
     */
    async userToken(claims: Record<string, unknown>, token: { audience: string; expiresIn?: string }) {
      return new SignJWT({
        tid: options.tenantId,
        scp: "user_impersonation",
        auth_time: Math.floor(Date.now() / 1000) - 10,
        ...claims,
      })
        .setProtectedHeader({ alg: "RS256", kid: "entra-1", typ: "JWT" })
        .setIssuer(`${fake.url}${tenantPath}/v2.0`)
        .setAudience(token.audience)
        .setIssuedAt()
        .setExpirationTime(token.expiresIn ?? "1h")
        .sign(privateKey);
    },
    /** Checks a bearer token this fake issued for `audience`. */
    async verify(token: string, audience: string) {
      return jwtVerify(token, publicKey, { audience, algorithms: ["RS256"] });
    },
  };
}

/**
 * Routes the global `fetch` (the Agents SDK's and MSAL's HTTP client) for Entra's host to the local
 * fake, like a hosts-file entry: the SDK keeps its default authority and MSAL its built-in cloud
 * metadata, so the token call is the production one. Returns the function that restores `fetch`.
 */
export function routeEntraTo(fakeUrl: string, host = "login.microsoftonline.com"): () => void {
  const real = globalThis.fetch;
  const target = new URL(fakeUrl);
  globalThis.fetch = (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
    if (url.hostname !== host) return real(input, init);
    url.protocol = target.protocol;
    url.host = target.host;
    return real(url, init);
  };
  return () => {
    globalThis.fetch = real;
  };
}

/**
 * Bot Connector's REST API (`POST /v3/conversations/{conversationId}/activities`, and
 * `…/activities/{activityId}` for a reply, the Agents SDK's proactive path; `PUT
 * …/activities/{activityId}` updates an activity it created): the bearer must be an app token for
 * `https://api.botframework.com` from the Entra fake; answers 201 with the created activity's
 * `{id}` (200 `{id}` for an update), or Bot Connector's error body (`{error: {code, message}}`).
 */
export async function startBotConnectorFake(
  verify: (token: string) => Promise<unknown>,
  /** `anonymous`: also accepts requests without a token, as the Agents Playground's connector does without auth settings. */
  options: { anonymous?: boolean } = {},
) {
  let next = 1;
  /** Created activity ids, by conversation. */
  const created = new Set<string>();
  const fake = await serve(http.createServer(), "http", async (r, res) => {
    const m = /^\/v3\/conversations\/([^/]+)\/activities(?:\/([^/]+))?\/?$/.exec(r.path.split("?")[0] ?? "");
    const update = r.method === "PUT" && m?.[2] !== undefined;
    if ((r.method !== "POST" && !update) || !m)
      return json(res, 404, { error: { code: "NotFound", message: "The requested resource was not found" } });
    const token = /^Bearer (.+)$/.exec(r.headers.authorization ?? "")?.[1];
    try {
      if (!token && !options.anonymous) throw new Error("no token");
      if (token) await verify(token);
    } catch {
      return json(res, 401, { message: "Authorization has been denied for this request." });
    }
    const conversation = decodeURIComponent(m[1] ?? "");
    if (update) {
      const id = decodeURIComponent(m[2] ?? "");
      if (!created.has(`${conversation}/${id}`))
        return json(res, 404, { error: { code: "ActivityNotFoundInConversation", message: "Activity not found" } });
      return json(res, 200, { id });
    }
    const id = `1:${conversation}-${next++}`;
    created.add(`${conversation}/${id}`);
    json(res, 201, { id });
  });
  return {
    ...fake,
    /** The activity updates (PUT), parsed, with the conversation and activity id of their path. */
    updates: () =>
      fake.requests
        .filter((r) => r.method === "PUT")
        .map((r) => {
          const m = /^\/v3\/conversations\/([^/]+)\/activities\/([^/?]+)/.exec(r.path);
          return {
            conversation: decodeURIComponent(m?.[1] ?? ""),
            activityId: decodeURIComponent(m?.[2] ?? ""),
            activity: JSON.parse(r.body) as Record<string, unknown>,
          };
        }),
    /** The activities posted, parsed, with the conversation id of their path. */
    activities: () =>
      fake.requests
        .filter((r) => r.method === "POST")
        .map((r) => ({
          conversation: decodeURIComponent(/^\/v3\/conversations\/([^/]+)/.exec(r.path)?.[1] ?? ""),
          activity: JSON.parse(r.body) as Record<string, unknown>,
        })),
  };
}

/**
 * The signing keys and metadata of a Bot Service–shaped issuer (OpenID metadata + JWKS) over HTTPS:
 * the local stack's own (`local/bot-service-issuer.ts`, what `npm start` runs), on a free port.
 */
export function startBotServiceIssuer(tls: { key: string; cert: string }, issuer = "https://api.botframework.com") {
  return startLocalBotServiceIssuer({ tls, issuer });
}
