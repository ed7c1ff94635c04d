import https from "node:https";
import type { AddressInfo } from "node:net";
import { selfSignedLoopbackCertificate } from "./tls.js";

/**
 * A fake Azure Key Vault on loopback that speaks the Key Vault REST protocol the SDK uses: TLS (the
 * SDK refuses bearer tokens over plain HTTP), the bearer challenge on the first unauthenticated call,
 * `GET /secrets/{name}` and `PUT /secrets/{name}`, `SecretNotFound` errors.
 */
export interface FakeKeyVault {
  url: string;
  /** PEM of the self-signed certificate, for the client's `tlsOptions.ca`. */
  ca: string;
  /** The bearer token the vault accepts. */
  token: string;
  secrets: Map<string, string>;
  requests: { method: string; path: string; authorized: boolean }[];
  close(): Promise<void>;
}

export async function startFakeKeyVault(): Promise<FakeKeyVault> {
  const { key, cert: ca } = selfSignedLoopbackCertificate();
  const token = "fake-managed-identity-token";
  const secrets = new Map<string, string>();
  const requests: FakeKeyVault["requests"] = [];
  let version = 0;

  const server = https.createServer({ key, cert: ca }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    const authorized = req.headers.authorization === `Bearer ${token}`;
    requests.push({ method: req.method ?? "", path: url.pathname, authorized });
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    if (!req.headers.authorization) {
      return send(
        401,
        { error: { code: "Unauthorized", message: "AKV10000: Request is missing a Bearer or PoP token." } },
        {
          "WWW-Authenticate":
            'Bearer authorization="https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000", resource="https://vault.azure.net"',
        },
      );
    }
    if (!authorized) return send(401, { error: { code: "Unauthorized", message: "AKV10032: Invalid issuer." } });
    const match = /^\/secrets\/([0-9a-zA-Z-]{1,127})(?:\/[0-9a-f]*)?\/?$/.exec(url.pathname);
    if (!match?.[1] || !url.searchParams.get("api-version"))
      return send(400, { error: { code: "BadParameter", message: "bad request" } });
    const name = match[1];
    const bundle = (value: string) => ({
      value,
      contentType: "application/json",
      id: `https://127.0.0.1/secrets/${name}/${version.toString(16).padStart(32, "0")}`,
      attributes: {
        enabled: true,
        created: 1_700_000_000,
        updated: 1_700_000_000,
        recoveryLevel: "Recoverable+Purgeable",
      },
    });
    if (req.method === "GET") {
      const value = secrets.get(name);
      if (value === undefined)
        return send(404, {
          error: {
            code: "SecretNotFound",
            message: `A secret with (name/id) ${name} was not found in this key vault.`,
          },
        });
      return send(200, bundle(value));
    }
    if (req.method === "PUT") {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        const value = (JSON.parse(body) as { value: string }).value;
        secrets.set(name, value);
        version++;
        send(200, bundle(value));
      });
      return;
    }
    send(405, { error: { code: "MethodNotAllowed", message: "method not allowed" } });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    ca,
    token,
    secrets,
    requests,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  };
}
