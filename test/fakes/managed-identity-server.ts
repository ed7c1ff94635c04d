import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";

/** One token request the fake answered (or refused). */
export interface TokenRequest {
  resource: string | null;
  clientId: string | null;
  apiVersion: string | null;
  identityHeader: string | undefined;
}

/**
 * The App Service / Azure Functions managed identity endpoint (`IDENTITY_ENDPOINT`, protocol
 * 2019-08-01): `GET ?api-version=2019-08-01&resource=…&client_id=…` with the `X-IDENTITY-HEADER`
 * secret, answered with `{access_token, expires_on, resource, token_type, client_id}`. Tokens are
 * JWTs shaped as Entra ID issues them (issuer `https://sts.windows.net/<tenant>/`, audience = the
 * resource), which Azurite's `--oauth basic` accepts; `audience` overrides the audience, so a test
 * can show that storage checks it.
 */
export async function startManagedIdentityServer(options: { tenantId: string; audience?: string }): Promise<{
  url: string;
  identityHeader: string;
  requests: TokenRequest[];
  /** Every access token issued, so a test can look for one where it must never appear. */
  issued: string[];
  close(): Promise<void>;
}> {
  const identityHeader = randomUUID();
  const requests: TokenRequest[] = [];
  const issued: string[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const request: TokenRequest = {
      resource: url.searchParams.get("resource"),
      clientId: url.searchParams.get("client_id"),
      apiVersion: url.searchParams.get("api-version"),
      identityHeader: req.headers["x-identity-header"] as string | undefined,
    };
    requests.push(request);
    if (url.pathname !== "/msi/token" || request.identityHeader !== identityHeader || !request.resource) {
      res.writeHead(400, { "Content-Type": "application/json" }).end(JSON.stringify({ error: "invalid_request" }));
      return;
    }
    const now = Math.floor(Date.now() / 1000);
    const resource = request.resource;
    const claims = {
      aud: options.audience ?? resource,
      iss: `https://sts.windows.net/${options.tenantId}/`,
      iat: now - 60,
      nbf: now - 60,
      exp: now + 3600,
      appid: request.clientId ?? undefined,
      tid: options.tenantId,
      oid: randomUUID(),
    };
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const token = `${encode({ alg: "RS256", typ: "JWT" })}.${encode(claims)}.${Buffer.from(randomUUID()).toString("base64url")}`;
    issued.push(token);
    res.writeHead(200, { "Content-Type": "application/json" }).end(
      JSON.stringify({
        access_token: token,
        expires_on: String(now + 3600),
        resource,
        token_type: "Bearer",
        client_id: request.clientId,
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/msi/token`,
    identityHeader,
    requests,
    issued,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
