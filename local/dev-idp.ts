/**
 * Development identity provider for the local stack. It imitates the parts of Entra ID that the
 * API depends on (OpenID discovery, JWKS, RS256 access tokens with Entra claim names), so the
 * production validator runs unchanged against it. It mints a token for anyone who asks: it is only
 * ever meant to listen on loopback.
 */
import { createHash, randomUUID } from "node:crypto";
import { chmod, link, mkdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { dirname } from "node:path";
import { type CryptoKey, type JWK, SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK } from "jose";
import { z } from "zod";
import { ROLES, type Role } from "../shared/auth/roles.js";
import { isLoopbackBind, isLoopbackHostHeader, isLoopbackUrl } from "../shared/http/loopback-host.js";
import { secretsEqual } from "../shared/secrets/api-tokens.js";
import { startBotServiceIssuer } from "./bot-service-issuer.js";
import { syncDirectory, syncFile } from "../shared/storage/durable-file.js";
import { type CodeGrant, createCodeFlow } from "./oauth-code-flow.js";

/** Options for {@link startDevIdentityProvider}. */
export interface DevIdentityProviderOptions {
  /** Port to listen on; 0 picks a free port. */
  port: number;
  /** Address to bind. Default `127.0.0.1`; anything but loopback exposes a token minter. */
  host?: string;
  /**
   * Where to keep the RSA key pair (private JWK JSON, file mode 0o600). Created on first start and
   * reused afterwards, so tokens minted before a restart still validate. Without it the key pair
   * lives in memory only.
   */
  keyFile?: string;
  /** Client id of the API app registration; tokens carry `aud: api://<clientId>`. */
  clientId: string;
  /** Tenant id; appears in the issuer, the endpoint paths and the `tid` claim. */
  tenantId: string;
  /**
   * Also run a Bot Service–shaped issuer (`bot-service-issuer.ts`: OpenID metadata + JWKS over
   * HTTPS with `tls`) for the Teams bot endpoint, and mint its tokens at `POST /dev/bot-service-token`.
   * `botAppId` is the default audience (`SVC_PLATFORM_A_BOT_APP_ID`). With `entra` (the bot's
   * tenant and client secret) it also stands in for Entra for the bot's app token (the replies).
   */
  botService?: {
    tls: { key: string; cert: string };
    botAppId?: string;
    entra?: { tenantId: string; clientSecret: string };
  };
}

/**
 * The issuer of the development identity provider for `tenantId`, shaped like Entra's v2.0 issuer
 * (`https://login.microsoftonline.com/<tenant>/v2.0`). Like a real identity provider's, it names
 * the tenant and not where the provider listens, so tokens minted before a restart on another
 * port (`IDP_PORT=0`) stay valid as long as the signing key (kept in the data folder) is the same.
 * The host is never contacted: validators fetch keys through the discovery URL.
 */
export function devIssuer(tenantId: string): string {
  return `https://login.blastplane.local/${tenantId}/v2.0`;
}

/** Claims a caller may choose when minting a token. */
export interface DevTokenClaims {
  /** The single application role the token grants. */
  role: Role;
  /**
   * Object id, 1..200 characters. Default: a name-based (version 5 style) UUID derived from the
   * tenant id and `name`, so the same developer name keeps the same identity across restarts.
   */
  oid?: string;
  /** Display name, at most 200 characters. Default `"Local Developer"`. */
  name?: string;
  /** Lifetime in seconds, 60..86400. Default 3600. */
  ttlSeconds?: number;
  /** How long ago the user signed in interactively (the `auth_time` claim), 0..86400 s. Default 0: minting is a sign-in. */
  authAgeSeconds?: number;
}

/** A running development identity provider. */
export interface DevIdentityProvider {
  /** Base URL, e.g. `http://127.0.0.1:PORT`. */
  url: string;
  /** Token issuer, {@link devIssuer}: the same on every start, whatever the port. */
  issuer: string;
  /** OpenID discovery document URL, to be given to the JWT validator. */
  discoveryUrl: string;
  /** Audience of minted tokens, `api://<clientId>`. */
  audience: string;
  /** Signs an access token in-process; rejects with TypeError on claims `/dev/token` would refuse. */
  mint(claims: DevTokenClaims): Promise<string>;
  /** The discovery document's contents (what `discoveryUrl` serves). */
  metadata(): Record<string, unknown>;
  /**
   * Allows a redirect URI (exact match) for the authorization code flow of the app client; its
   * origin is then also admitted by CORS on the discovery document and the token endpoint.
   */
  allowRedirectUri(uri: string): void;
  /**
   * Number of requests received so far whose URL path is exactly `path` (query ignored); only the
   * provider's own paths are counted (any other is 0).
   */
  requestCount(path: string): number;
  /** The JWKS URL: verifies every token this provider signs (API tokens and managed-identity tokens). */
  jwksUrl: string;
  /**
   * The managed-identity endpoint of the local stack's one identity (App Service protocol
   * 2019-08-01, what `IDENTITY_ENDPOINT` / `IDENTITY_HEADER` give `@azure/identity`): tokens for any
   * resource (`aud` = the resource), signed with this provider's key, `oid` = `objectId`.
   */
  managedIdentity: { endpoint: string; identityHeader: string; objectId: string; clientId: string };
  /**
   * The Bot Service–shaped issuer, when started (`botService` option): its metadata URL is what
   * `SVC_PLATFORM_A_OPENID_METADATA_URL` names; `mint` signs a Bot Service token for the bot endpoint.
   */
  botService?: {
    metadataUrl: string;
    issuer: string;
    /** With the `entra` option: the authority host of the bot's app token. */
    authorityHost?: string;
    mint(request: { serviceUrl: string; audience?: string; ttlSeconds?: number }): Promise<string>;
  };
  /** Stops listening and drops open connections. Safe to call more than once. */
  close(): Promise<void>;
}

/** The issuer of the local managed identity's tokens (Entra's v1 issuer shape, as App Service tokens carry). */
export function devManagedIdentityIssuer(tenantId: string): string {
  return `https://sts.blastplane.local/${tenantId}/`;
}

const DEFAULT_NAME = "Local Developer";
/**
 * The local people approval requests go to when `SVC_CONSOLE_APPROVERS` is not set: a person
 * signs in under one of these names (with the Approver or Owner role) to see and decide them.
 */
export const LOCAL_APPROVER_NAMES = ["Local Approver", "Local Owner"] as const;

/** The object id this provider gives whoever signs in (or asks for a token) under `name`. */
export function localObjectId(tenantId: string, name: string): string {
  return nameBasedUuid(`${tenantId}\n${name}`);
}
const DEFAULT_TTL_SECONDS = 3600;
const MAX_BODY_BYTES = 64 * 1024;
/** Namespace for name-based default object ids; changing it changes every default oid. */
const OID_NAMESPACE = "6f1b0d8e-5c3a-4f7e-9a2d-3b8c1e4f5a60";
const PATH_SEGMENT = /^[A-Za-z0-9._~-]{1,128}$/;

const tokenRequestSchema = z.strictObject({
  role: z.enum(ROLES),
  oid: z.string().min(1).max(200).optional(),
  name: z.string().max(200).optional(),
  ttl_seconds: z.number().int().min(60).max(86_400).optional(),
  /** `auth_time` = now minus this (tests of re-authentication mint a stale sign-in). */
  auth_age_seconds: z.number().int().min(0).max(86_400).optional(),
});

const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** `POST /dev/bot-service-token`: what Bot Service would send the bot for one Bot Connector. */
const botServiceTokenSchema = z.strictObject({
  /**
   * The Bot Connector the replies go to (the token's `serviceurl` claim = the activity's
   * `serviceUrl`): a loopback one only, so a local process cannot have the bot's replies (with
   * their bearer) sent to a host of its choosing.
   */
  service_url: z
    .string()
    .max(2048)
    .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), "must be an http(s) URL")
    .refine(
      (v) => !URL.canParse(v) || isLoopbackUrl(new URL(v)),
      "must be a loopback URL (localhost, 127.0.0.0/8, [::1]): the local issuer mints for local connectors only",
    ),
  /** The bot's app id; default `SVC_PLATFORM_A_BOT_APP_ID` of the stack. */
  audience: z.string().regex(GUID, "must be the bot's app id (a GUID)").optional(),
  ttl_seconds: z.number().int().min(60).max(86_400).optional(),
});

const storedKeySchema = z.object({
  kty: z.literal("RSA"),
  n: z.string().min(1),
  e: z.string().min(1),
  d: z.string().min(1),
  p: z.string().min(1),
  q: z.string().min(1),
  dp: z.string().min(1),
  dq: z.string().min(1),
  qi: z.string().min(1),
});

interface SigningKey {
  privateKey: CryptoKey;
  publicJwk: JWK;
  kid: string;
}

/** Thrown inside the request handler; turned into a JSON `{detail}` response. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Starts the development identity provider. Endpoints:
 * `GET /{tenantId}/v2.0/.well-known/openid-configuration`, `GET /{tenantId}/discovery/v2.0/keys`,
 * `POST /dev/token` (`{role, oid?, name?, ttl_seconds?}` → `{access_token, token_type, expires_in}`),
 * with the `botService` option `POST /dev/bot-service-token` (`{service_url, audience?, ttl_seconds?}`
 * → a Bot Service token for `POST /api/messages`; its key set on the issuer's own HTTPS port),
 * and the browser sign-in under `/{tenantId}/oauth2/v2.0/`: `authorize`, `token`, `logout` (see
 * `oauth-code-flow.ts`).
 * When bound to loopback it also refuses requests whose Host header is not a loopback name, which
 * keeps DNS-rebinding pages in a browser from reading minted tokens.
 */
export async function startDevIdentityProvider(opts: DevIdentityProviderOptions): Promise<DevIdentityProvider> {
  if (!PATH_SEGMENT.test(opts.tenantId)) throw new TypeError("tenantId must be a plain path segment");
  if (opts.clientId.length === 0) throw new TypeError("clientId must not be empty");
  const host = opts.host ?? "127.0.0.1";
  const key = opts.keyFile === undefined ? await freshKey() : await persistentKey(opts.keyFile);
  const audience = `api://${opts.clientId}`;
  const discoveryPath = `/${opts.tenantId}/v2.0/.well-known/openid-configuration`;
  const keysPath = `/${opts.tenantId}/discovery/v2.0/keys`;
  const counts = new Map<string, number>();
  const enforceLoopbackHost = isLoopbackBind(host);
  const botIssuer = opts.botService
    ? await startBotServiceIssuer({
        tls: opts.botService.tls,
        host: host === "0.0.0.0" ? "127.0.0.1" : host,
        ...(opts.botService.entra && opts.botService.botAppId
          ? { entra: { ...opts.botService.entra, clientId: opts.botService.botAppId } }
          : {}),
      })
    : undefined;
  const mintBotServiceToken = async (request: z.infer<typeof botServiceTokenSchema>): Promise<string> => {
    if (!botIssuer) throw new HttpError(404, "the Bot Service issuer is not running");
    const audience = request.audience ?? opts.botService?.botAppId;
    if (!audience) throw new HttpError(422, "audience: required (SVC_PLATFORM_A_BOT_APP_ID is not set)");
    return botIssuer.token(
      {},
      { audience, serviceUrl: request.service_url, expiresIn: `${request.ttl_seconds ?? DEFAULT_TTL_SECONDS}s` },
    );
  };

  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") {
    server.close();
    throw new Error("dev IdP server has no TCP address");
  }
  const { port } = address;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  const issuer = devIssuer(opts.tenantId);

  async function mintToken(
    claims: z.infer<typeof tokenRequestSchema>,
    extra: Record<string, unknown> = {},
  ): Promise<{ token: string; ttl: number }> {
    const name = claims.name ?? DEFAULT_NAME;
    const oid = claims.oid ?? localObjectId(opts.tenantId, name);
    const ttl = claims.ttl_seconds ?? DEFAULT_TTL_SECONDS;
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({
      oid,
      name,
      tid: opts.tenantId,
      roles: [claims.role],
      scp: "user_impersonation",
      // When the user last signed in interactively (OpenID Connect Core §2); Entra emits it as an optional claim.
      auth_time: now - (claims.auth_age_seconds ?? 0),
      ...extra,
    })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: key.kid })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject(oid)
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(now + ttl)
      .sign(key.privateKey);
    return { token, ttl };
  }

  const oauthPath = `/${opts.tenantId}/oauth2/v2.0`;
  const identityHeader = randomUUID();
  const managedIdentityObjectId = nameBasedUuid(`${opts.tenantId}\nmanaged-identity`);
  const managedIdentityClientId = nameBasedUuid(`${opts.tenantId}\nmanaged-identity-client`);

  /** A managed-identity token (App Service protocol 2019-08-01) for `resource`. */
  async function managedIdentityToken(requestUrl: URL, req: IncomingMessage): Promise<Record<string, unknown>> {
    const presented = req.headers["x-identity-header"];
    if (typeof presented !== "string" || !secretsEqual(presented, identityHeader))
      throw new HttpError(401, "X-IDENTITY-HEADER is missing or wrong");
    const resource = requestUrl.searchParams.get("resource");
    if (!resource || resource.length > 400) throw new HttpError(400, "resource is required");
    const now = Math.floor(Date.now() / 1000);
    const ttl = DEFAULT_TTL_SECONDS;
    const token = await new SignJWT({
      oid: managedIdentityObjectId,
      appid: managedIdentityClientId,
      tid: opts.tenantId,
      idtyp: "app",
    })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: key.kid })
      .setIssuer(devManagedIdentityIssuer(opts.tenantId))
      .setAudience(resource)
      .setSubject(managedIdentityObjectId)
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(now + ttl)
      .sign(key.privateKey);
    return {
      access_token: token,
      expires_on: String(now + ttl),
      resource,
      token_type: "Bearer",
      client_id: managedIdentityClientId,
    };
  }
  const metadata = () => ({
    issuer,
    jwks_uri: `${url}${keysPath}`,
    authorization_endpoint: `${url}${oauthPath}/authorize`,
    token_endpoint: `${url}${oauthPath}/token`,
    end_session_endpoint: `${url}${oauthPath}/logout`,
    id_token_signing_alg_values_supported: ["RS256"],
    response_types_supported: ["code"],
    response_modes_supported: ["query", "fragment"],
    subject_types_supported: ["public"],
    grant_types_supported: ["authorization_code"],
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: ["none"],
    scopes_supported: ["openid", "profile", "offline_access", `${audience}/user_impersonation`],
  });

  // The browser sign-in (authorization code + PKCE) for the app, which uses the API's client id.
  const codeFlow = createCodeFlow({
    clientId: opts.clientId,
    requiredScope: `${audience}/user_impersonation`,
    issue: async (grant: CodeGrant) => {
      const { token, ttl } = await mintToken(
        { role: grant.role, name: grant.name },
        // The sign-in page was submitted when the code was issued: that is the interactive sign-in.
        { azp: grant.clientId, auth_time: grant.authTime },
      );
      return { accessToken: token, idToken: await mintIdToken(grant, ttl), expiresInSeconds: ttl };
    },
  });

  /** The OpenID Connect ID token of a browser sign-in: who signed in, for the app (not the API). */
  async function mintIdToken(grant: CodeGrant, ttl: number): Promise<string> {
    const oid = localObjectId(opts.tenantId, grant.name);
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({
      oid,
      name: grant.name,
      tid: opts.tenantId,
      preferred_username: grant.name,
      auth_time: grant.authTime,
      ...(grant.nonce ? { nonce: grant.nonce } : {}),
    })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: key.kid })
      .setIssuer(issuer)
      .setAudience(grant.clientId)
      .setSubject(oid)
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(now + ttl)
      .sign(key.privateKey);
  }

  const ownPaths = new Set([
    discoveryPath,
    keysPath,
    `${oauthPath}/authorize`,
    `${oauthPath}/token`,
    `${oauthPath}/logout`,
    "/msi/token",
    "/dev/token",
    "/dev/bot-service-token",
  ]);
  const ownPath = (path: string) => ownPaths.has(path);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestUrl = new URL(req.url ?? "/", "http://placeholder");
    const path = requestUrl.pathname;
    // The provider's own paths only: a local process asking for made-up paths grows nothing.
    if (ownPath(path)) counts.set(path, (counts.get(path) ?? 0) + 1);
    if (enforceLoopbackHost && !isLoopbackHostHeader(req.headers.host)) {
      throw new HttpError(421, "host header must name a loopback address");
    }
    // The app reads the discovery document and redeems codes from its own origin.
    if ((path === discoveryPath || path === `${oauthPath}/token`) && codeFlow.cors(req, res)) return;
    if (path === `${oauthPath}/authorize`) return codeFlow.authorize(req, res, requestUrl);
    if (path === `${oauthPath}/token`) return codeFlow.token(req, res);
    if (path === `${oauthPath}/logout`) return codeFlow.logout(req, res, requestUrl);
    if (req.method === "GET" && path === discoveryPath) {
      sendJson(res, 200, metadata());
      return;
    }
    if (req.method === "GET" && path === keysPath) {
      sendJson(res, 200, { keys: [key.publicJwk] });
      return;
    }
    if (req.method === "GET" && path === "/msi/token") {
      sendJson(res, 200, await managedIdentityToken(requestUrl, req), { "cache-control": "no-store" });
      return;
    }
    if (req.method === "POST" && path === "/dev/bot-service-token") {
      const parsed = botServiceTokenSchema.safeParse(await readJsonBody(req));
      if (!parsed.success) throw new HttpError(422, describeIssues(parsed.error));
      const token = await mintBotServiceToken(parsed.data);
      sendJson(res, 200, { access_token: token, token_type: "Bearer" }, { "cache-control": "no-store" });
      return;
    }
    if (req.method === "POST" && path === "/dev/token") {
      const body = await readJsonBody(req);
      const parsed = tokenRequestSchema.safeParse(body);
      if (!parsed.success) throw new HttpError(422, describeIssues(parsed.error));
      const { token, ttl } = await mintToken(parsed.data);
      sendJson(
        res,
        200,
        { access_token: token, token_type: "Bearer", expires_in: ttl },
        { "cache-control": "no-store" },
      );
      return;
    }
    throw new HttpError(404, "not found");
  }

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    req.on("error", () => res.destroy());
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (err instanceof HttpError) {
        const extra: Record<string, string> = err.status === 413 ? { connection: "close" } : {};
        sendJson(res, err.status, { detail: err.message }, extra);
        if (err.status === 413) req.resume();
        return;
      }
      sendJson(res, 500, { detail: "internal error" });
    });
  });

  let closing: Promise<void> | undefined;
  return {
    url,
    issuer,
    discoveryUrl: `${url}${discoveryPath}`,
    audience,
    metadata,
    jwksUrl: `${url}${keysPath}`,
    managedIdentity: {
      endpoint: `${url}/msi/token`,
      identityHeader,
      objectId: managedIdentityObjectId,
      clientId: managedIdentityClientId,
    },
    allowRedirectUri: (uri) => codeFlow.allowRedirectUri(uri),
    async mint(claims) {
      const parsed = tokenRequestSchema.safeParse({
        role: claims.role,
        oid: claims.oid,
        name: claims.name,
        ttl_seconds: claims.ttlSeconds,
        auth_age_seconds: claims.authAgeSeconds,
      });
      if (!parsed.success) throw new TypeError(describeIssues(parsed.error));
      return (await mintToken(parsed.data)).token;
    },
    requestCount(path) {
      return counts.get(path) ?? 0;
    },
    ...(botIssuer
      ? {
          botService: {
            metadataUrl: botIssuer.metadataUrl,
            issuer: botIssuer.issuer,
            ...(botIssuer.authorityHost ? { authorityHost: botIssuer.authorityHost } : {}),
            async mint(request) {
              const parsed = botServiceTokenSchema.safeParse({
                service_url: request.serviceUrl,
                audience: request.audience,
                ttl_seconds: request.ttlSeconds,
              });
              if (!parsed.success) throw new TypeError(describeIssues(parsed.error));
              return mintBotServiceToken(parsed.data);
            },
          },
        }
      : {}),
    close() {
      closing ??= Promise.all([
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
        botIssuer?.close(),
      ]).then(() => undefined);
      return closing;
    },
  };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "body"}: ${issue.message}`)
    .join("; ");
}

async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const mediaType = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType !== "application/json") throw new HttpError(400, "content-type must be application/json");
  const declared = Number(req.headers["content-length"] ?? "0");
  if (declared > MAX_BODY_BYTES) throw new HttpError(413, "request body too large");
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.off("data", onData);
        req.off("end", onEnd);
        reject(new HttpError(413, "request body too large"));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => resolve(Buffer.concat(chunks).toString("utf8"));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", reject);
  });
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, "body is not valid JSON");
  }
}

/** RFC 4122 version-5 style UUID (SHA-1 over namespace and name). */
function nameBasedUuid(name: string): string {
  const namespace = Buffer.from(OID_NAMESPACE.replaceAll("-", ""), "hex");
  const hash = createHash("sha1").update(namespace).update(name, "utf8").digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

async function freshKey(): Promise<SigningKey> {
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  return signingKeyFromJwk(storedKeySchema.parse(await exportJWK(privateKey)));
}

async function signingKeyFromJwk(stored: z.infer<typeof storedKeySchema>): Promise<SigningKey> {
  const kid = await calculateJwkThumbprint({ kty: "RSA", n: stored.n, e: stored.e });
  const privateKey = await importJWK({ ...stored }, "RS256");
  return { privateKey, kid, publicJwk: { kty: "RSA", n: stored.n, e: stored.e, kid, alg: "RS256", use: "sig" } };
}

/** Loads the key pair from `keyFile`, creating it (never overwriting) when absent. */
async function persistentKey(keyFile: string): Promise<SigningKey> {
  const existing = await readStoredKey(keyFile);
  if (existing !== undefined) return existing;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const stored = storedKeySchema.parse(await exportJWK(privateKey));
  await mkdir(dirname(keyFile), { recursive: true, mode: 0o700 });
  const temp = `${keyFile}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(temp, `${JSON.stringify({ ...stored, alg: "RS256", use: "sig" }, null, 2)}\n`, {
    mode: 0o600,
    flag: "wx",
  });
  try {
    await chmod(temp, 0o600);
    // On disk before it can be linked: a power cut must not leave an empty key file behind.
    await syncFile(temp);
    // link() fails if keyFile exists, so a concurrent first start cannot replace the other's key.
    await link(temp, keyFile);
    await syncDirectory(dirname(keyFile));
  } catch (err) {
    if (!isErrnoException(err) || err.code !== "EEXIST") throw err;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  const winner = await readStoredKey(keyFile);
  if (winner === undefined) throw new Error(`dev IdP key file ${keyFile} vanished while starting`);
  return winner;
}

async function readStoredKey(keyFile: string): Promise<SigningKey | undefined> {
  let text: string;
  try {
    text = await readFile(keyFile, "utf8");
  } catch (err) {
    if (isErrnoException(err) && err.code === "ENOENT") return undefined;
    throw err;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`dev IdP key file ${keyFile} is not JSON; delete it to generate a new key`);
  }
  const parsed = storedKeySchema.safeParse(json);
  if (!parsed.success)
    throw new Error(`dev IdP key file ${keyFile} is not an RSA private JWK; delete it to generate a new key`);
  if (((await stat(keyFile)).mode & 0o077) !== 0) await chmod(keyFile, 0o600);
  return signingKeyFromJwk(parsed.data);
}

function isErrnoException(err: unknown): err is NodeJS.ErrnoException {
  return err instanceof Error && "code" in err;
}
