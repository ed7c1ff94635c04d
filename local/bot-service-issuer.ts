import { createHash, timingSafeEqual } from "node:crypto";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { BOT_SERVICE_ISSUER } from "../shared/channels/platform-a/bot-service-keys.js";
import { isLoopbackBind, isLoopbackHostHeader, isLoopbackUrl } from "../shared/http/loopback-host.js";

/**
 * A Bot Service–shaped token issuer: Bot Framework's OpenID metadata and signing keys (JWKS, RS256,
 * with the `msteams` endorsement) over HTTPS, and the tokens Bot Service sends a bot (issuer
 * `https://api.botframework.com`, audience = the bot's app id, a `serviceurl` claim). The local
 * stack's identity provider starts one (`npm start`, docs/channels-teams.md) and the tests use the
 * same one (`test/support/teams-fakes.ts`), so `POST /api/messages` verifies real tokens against a
 * real key set — only the metadata URL (`SVC_PLATFORM_A_OPENID_METADATA_URL`) differs from Azure.
 */

/** Where Bot Framework serves its OpenID metadata and keys (the paths of `login.botframework.com`). */
export const BOT_SERVICE_METADATA_PATH = "/v1/.well-known/openidconfiguration";
export const BOT_SERVICE_KEYS_PATH = "/v1/.well-known/keys";
const DEFAULT_KID = "bs-key-1";

/** How a Bot Service token is signed; each field overrides what Bot Service would send. */
export interface BotServiceTokenOptions {
  /** The bot's app id (`aud`). */
  audience: string;
  /** The `serviceurl` claim: the Bot Connector the bot's replies go to. */
  serviceUrl?: string;
  /** Lifetime (`jose` time span, e.g. `"1h"`, `"-10m"` for an expired token). Default 1 h. */
  expiresIn?: string;
  notBefore?: string;
  kid?: string;
  issuer?: string;
}

export interface BotServiceIssuer {
  /** `https://127.0.0.1:PORT`. */
  url: string;
  issuer: string;
  /** The OpenID metadata URL: the value of `SVC_PLATFORM_A_OPENID_METADATA_URL`. */
  metadataUrl: string;
  /** With the `entra` option: the authority host of the bot's app token (`SVC_PLATFORM_A_AUTHORITY_HOST`). */
  authorityHost?: string;
  privateKey: CryptoKey;
  /** The public signing key as published in the key set. */
  jwk: JWK & { kid: string; endorsements: string[] };
  /** Signs a Bot Service token (RS256, kid of the key set); `claims` are added to the payload. */
  token(claims: Record<string, unknown>, options: BotServiceTokenOptions): Promise<string>;
  close(): Promise<void>;
}

/** What decides whether `npm start` may trust its own Bot Service issuer for `POST /api/messages`. */
export interface LocalIssuerTrustInput {
  /** `SVC_PLATFORM_A_OPENID_METADATA_URL` as the user set it (undefined: unset). */
  metadataUrl: string | undefined;
  /** `SVC_PLATFORM_A_CLIENT_SECRET_REF` (undefined: the replies carry no app token). */
  clientSecretRef: string | undefined;
  /** `SVC_PLATFORM_A_AUTHORITY_HOST` after start-up (the local Entra stand-in's, when it stands in). */
  authorityHost: string | undefined;
}

/**
 * Whether the local Bot Service issuer may be trusted: only while the replies' app token is also a
 * local one (no secret, or an authority host on loopback: the stack's Entra stand-in). Otherwise the
 * replies carry a real Bot Framework token, and any local process that mints itself an activity
 * token could name the service URL that real token is sent to (and, through the stored
 * conversation reference, where the principal's notifications go). `trust`: set the metadata URL to
 * the local issuer; `keep`: leave the setting as it is (unset: Bot Framework's); `refuse`: start-up
 * stops with the reason (a loopback metadata URL set by hand alongside a real token).
 */
export function localIssuerTrust(
  input: LocalIssuerTrustInput,
): { action: "trust" } | { action: "keep" } | { action: "refuse"; reason: string } {
  const authority = input.authorityHost && URL.canParse(input.authorityHost) ? new URL(input.authorityHost) : undefined;
  const replyTokenLocal = !input.clientSecretRef || (authority !== undefined && isLoopbackUrl(authority));
  if (replyTokenLocal) return input.metadataUrl ? { action: "keep" } : { action: "trust" };
  if (input.metadataUrl && URL.canParse(input.metadataUrl) && isLoopbackUrl(new URL(input.metadataUrl)))
    return {
      action: "refuse",
      reason:
        "SVC_PLATFORM_A_OPENID_METADATA_URL names a local issuer while the bot's replies use a real app token " +
        "(a kv: SVC_PLATFORM_A_CLIENT_SECRET_REF or a non-local SVC_PLATFORM_A_AUTHORITY_HOST): any local process " +
        "could then send that token to a URL of its choosing. Set it to Bot Framework's metadata URL (or leave it " +
        "unset), or use an env: secret without SVC_PLATFORM_A_AUTHORITY_HOST for the local stand-ins.",
    };
  return { action: "keep" };
}

/**
 * Starts the issuer on `host:port` (default `127.0.0.1`, a free port) over HTTPS with `tls`. Bound to
 * loopback, it answers only requests whose Host names loopback (DNS rebinding). Its key lives in
 * memory: a restart publishes a new key, and tokens minted before it no longer verify.
 */
export async function startBotServiceIssuer(options: {
  tls: { key: string; cert: string };
  issuer?: string;
  host?: string;
  port?: number;
  /**
   * Also stand in for Entra for the bot's own app token (the replies' `SVC_PLATFORM_A_AUTHORITY_HOST`):
   * the tenant's OpenID metadata and key set, and client credentials for `clientId` with its secret
   * (`POST /{tenantId}/oauth2/v2.0/token`, scope `<resource>/.default`).
   */
  entra?: { tenantId: string; clientId: string; clientSecret: string };
}): Promise<BotServiceIssuer> {
  const issuer = options.issuer ?? BOT_SERVICE_ISSUER;
  const host = options.host ?? "127.0.0.1";
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const jwk = {
    ...(await exportJWK(publicKey)),
    kid: DEFAULT_KID,
    use: "sig",
    alg: "RS256",
    endorsements: ["msteams"],
  };
  const loopbackOnly = isLoopbackBind(host);
  let url = "";
  const server = https.createServer(options.tls, (req, res) => {
    const path = (req.url ?? "").split("?")[0];
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(body));
    };
    if (loopbackOnly && !isLoopbackHostHeader(req.headers.host))
      return send(421, { detail: "host header must name a loopback address" });
    if (req.method === "GET" && path === BOT_SERVICE_METADATA_PATH)
      return send(200, {
        issuer,
        authorization_endpoint: "https://invalid.botframework.com",
        jwks_uri: `${url}${BOT_SERVICE_KEYS_PATH}`,
        id_token_signing_alg_values_supported: ["RS256"],
        token_endpoint_auth_methods_supported: ["private_key_jwt"],
      });
    if (req.method === "GET" && path === BOT_SERVICE_KEYS_PATH) return send(200, { keys: [jwk] });
    const entra = options.entra;
    const tenant = entra ? `/${entra.tenantId}` : undefined;
    if (entra && req.method === "GET" && path === `${tenant}/v2.0/.well-known/openid-configuration`)
      return send(200, {
        issuer: `${url}${tenant}/v2.0`,
        authorization_endpoint: `${url}${tenant}/oauth2/v2.0/authorize`,
        token_endpoint: `${url}${tenant}/oauth2/v2.0/token`,
        jwks_uri: `${url}${tenant}/discovery/v2.0/keys`,
        response_types_supported: ["token"],
        subject_types_supported: ["pairwise"],
        id_token_signing_alg_values_supported: ["RS256"],
        token_endpoint_auth_methods_supported: ["client_secret_post"],
      });
    if (entra && req.method === "GET" && path === `${tenant}/discovery/v2.0/keys`) return send(200, { keys: [jwk] });
    if (entra && req.method === "POST" && path === `${tenant}/oauth2/v2.0/token`) {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (c: Buffer) => {
        size += c.length;
        if (size <= 16 * 1024) chunks.push(c);
      });
      req.on("end", () => {
        if (size > 16 * 1024) return send(413, { error: "invalid_request" });
        const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
        const digest = (v: string) => createHash("sha256").update(v).digest();
        const secretOk = timingSafeEqual(digest(form.get("client_secret") ?? ""), digest(entra.clientSecret));
        if (form.get("grant_type") !== "client_credentials" || form.get("client_id") !== entra.clientId || !secretOk)
          return send(401, {
            error: "invalid_client",
            error_description: "AADSTS7000215: Invalid client secret provided.",
          });
        const resource = /^(\S+)\/\.default$/.exec(form.get("scope") ?? "")?.[1];
        if (!resource)
          return send(400, {
            error: "invalid_scope",
            error_description: "AADSTS1002012: scope must be <resource>/.default",
          });
        new SignJWT({ appid: entra.clientId, tid: entra.tenantId, idtyp: "app", roles: [] })
          .setProtectedHeader({ alg: "RS256", kid: DEFAULT_KID, typ: "JWT" })
          .setIssuer(`https://sts.windows.net/${entra.tenantId}/`)
          .setAudience(resource)
          .setSubject(entra.clientId)
          .setIssuedAt()
          .setExpirationTime("1h")
          .sign(privateKey)
          .then(
            (token) => send(200, { token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: token }),
            () => send(500, { error: "server_error" }),
          );
      });
      return;
    }
    send(404, { detail: "not found" });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  url = `https://${host.includes(":") ? `[${host}]` : host}:${(server.address() as AddressInfo).port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    issuer,
    metadataUrl: `${url}${BOT_SERVICE_METADATA_PATH}`,
    ...(options.entra ? { authorityHost: url } : {}),
    privateKey,
    jwk,
    async token(claims, token) {
      const jwt = new SignJWT({ ...(token.serviceUrl ? { serviceurl: token.serviceUrl } : {}), ...claims })
        .setProtectedHeader({ alg: "RS256", kid: token.kid ?? DEFAULT_KID, typ: "JWT" })
        .setIssuer(token.issuer ?? issuer)
        .setAudience(token.audience)
        .setIssuedAt()
        .setExpirationTime(token.expiresIn ?? "1h");
      if (token.notBefore) jwt.setNotBefore(token.notBefore);
      return jwt.sign(privateKey);
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
