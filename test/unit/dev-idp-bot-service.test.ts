import https from "node:https";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localIssuerTrust } from "../../local/bot-service-issuer.js";
import { type DevIdentityProvider, startDevIdentityProvider } from "../../local/dev-idp.js";
import { createLocalJWKSet, type JWK, jwtVerify } from "jose";
import { createBotServiceKeySet, getHttpsJson } from "../../shared/channels/platform-a/bot-service-keys.js";
import { createTeamsVerifier } from "../../shared/channels/platform-a/teams-verifier.js";
import { UnauthorizedError } from "../../shared/errors.js";
import { testCertificate } from "../support/test-certificate.js";

/**
 * The local identity provider's Bot Service–shaped issuer (what `npm start` runs for the Teams bot
 * endpoint): its tokens pass the product's own verifier against the key set it serves over HTTPS,
 * and its minting endpoint validates what it is asked for.
 */

const BOT_APP_ID = "0d1e2f3a-1111-4222-8333-944455566677";
const SERVICE_URL = "http://127.0.0.1:56150/_connector";
let idp: DevIdentityProvider;
let tls: { key: string; cert: string };

beforeAll(async () => {
  tls = testCertificate();
  idp = await startDevIdentityProvider({
    port: 0,
    clientId: "blastplane-local-api",
    tenantId: "blastplane-local",
    botService: { tls, botAppId: BOT_APP_ID },
  });
});
afterAll(async () => {
  await idp?.close();
});

const mint = (body: unknown) =>
  fetch(`${idp.url}/dev/bot-service-token`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

function verifier() {
  const botService = idp.botService;
  if (!botService) throw new Error("no Bot Service issuer");
  return createTeamsVerifier(
    {
      botAppId: BOT_APP_ID,
      tenantId: "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6",
      guestTenantIds: [],
      metadataUrl: botService.metadataUrl,
      issuer: botService.issuer,
      bindings: new Map(),
      senderAccess: "allowlist",
    },
    { keys: createBotServiceKeySet({ metadataUrl: botService.metadataUrl, ca: tls.cert }), allowLoopbackHttp: true },
  );
}

describe("the local Bot Service–shaped issuer (npm start, issue 26)", () => {
  it("C-381 C-382 C-383 C-385 a token minted by POST /dev/bot-service-token passes the bot endpoint's verifier (RS256 from the HTTPS key set, Bot Service issuer, the bot's app id, the service URL claim)", async () => {
    const res = await mint({ service_url: SERVICE_URL });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { access_token } = (await res.json()) as { access_token: string };
    const identity = await verifier().verifyToken(`Bearer ${access_token}`);
    expect(identity).toMatchObject({
      serviceUrl: SERVICE_URL,
      issuer: "https://api.botframework.com",
      audience: BOT_APP_ID,
    });
    // In-process minting is the same token shape.
    const inProcess = await idp.botService?.mint({ serviceUrl: SERVICE_URL });
    expect((await verifier().verifyToken(`Bearer ${inProcess}`)).audience).toBe(BOT_APP_ID);
    // Another bot's audience is minted on request, and refused by this bot (401).
    const other = (await (
      await mint({ service_url: SERVICE_URL, audience: "11111111-2222-4333-8444-555555555555" })
    ).json()) as {
      access_token: string;
    };
    await expect(verifier().verifyToken(`Bearer ${other.access_token}`)).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it("refuses malformed requests (422) and answers only loopback Host names on its key-set port (421)", async () => {
    for (const body of [
      {},
      { service_url: "ftp://x" },
      { service_url: SERVICE_URL, audience: "bot" },
      { service_url: SERVICE_URL, extra: 1 },
    ])
      expect((await mint(body)).status, JSON.stringify(body)).toBe(422);
    const metadataUrl = new URL(idp.botService?.metadataUrl ?? "");
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.get(
        metadataUrl,
        {
          ca: tls.cert,
          servername: "localhost",
          checkServerIdentity: () => undefined,
          headers: { host: `rebound.example:${metadataUrl.port}` },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
    });
    expect(status).toBe(421);
  });

  it("mints for loopback service URLs only: a token naming another host (where the replies and their bearer would go) is refused (422)", async () => {
    for (const service_url of [
      "https://attacker.example/",
      "https://smba.trafficmanager.net/amer/",
      "http://10.0.0.5:8080/",
    ]) {
      const res = await mint({ service_url });
      expect(res.status, service_url).toBe(422);
      expect(await res.json()).toEqual({ detail: expect.stringContaining("loopback") });
    }
    await expect(idp.botService?.mint({ serviceUrl: "https://attacker.example/" })).rejects.toBeInstanceOf(TypeError);
    for (const service_url of ["http://localhost:56150/_connector", "https://127.0.0.2:9/x", "http://[::1]:3978/"])
      expect((await mint({ service_url })).status, service_url).toBe(200);
  });

  it("is trusted by npm start only while the replies' app token is local too; a local metadata URL beside a real token stops start-up", () => {
    const local = "https://127.0.0.1:40123/v1/.well-known/openidconfiguration";
    const botFramework = "https://login.botframework.com/v1/.well-known/openidconfiguration";
    const standIn = "https://127.0.0.1:40123";
    const cases: [string, Parameters<typeof localIssuerTrust>[0], string][] = [
      [
        "no secret: no app token",
        { metadataUrl: undefined, clientSecretRef: undefined, authorityHost: undefined },
        "trust",
      ],
      [
        "env: secret, the local Entra stand-in",
        { metadataUrl: undefined, clientSecretRef: "env:S", authorityHost: standIn },
        "trust",
      ],
      [
        "kv: secret: a real token",
        { metadataUrl: undefined, clientSecretRef: "kv:bot-secret", authorityHost: undefined },
        "keep",
      ],
      [
        "env: secret with a real authority",
        { metadataUrl: undefined, clientSecretRef: "env:S", authorityHost: "https://login.microsoftonline.us" },
        "keep",
      ],
      [
        "Bot Framework's, set by hand",
        { metadataUrl: botFramework, clientSecretRef: "kv:bot-secret", authorityHost: undefined },
        "keep",
      ],
      [
        "a local issuer beside a real token",
        { metadataUrl: local, clientSecretRef: "kv:bot-secret", authorityHost: undefined },
        "refuse",
      ],
      [
        "a local issuer with the local stand-in",
        { metadataUrl: local, clientSecretRef: "env:S", authorityHost: standIn },
        "keep",
      ],
    ];
    for (const [what, input, action] of cases) expect(localIssuerTrust(input).action, what).toBe(action);
    expect(
      localIssuerTrust({ metadataUrl: local, clientSecretRef: "kv:bot-secret", authorityHost: undefined }),
    ).toMatchObject({ reason: expect.stringContaining("SVC_PLATFORM_A_OPENID_METADATA_URL") });
  });

  it("the managed-identity endpoint answers only the stack's X-IDENTITY-HEADER (compared in constant time)", async () => {
    const endpoint = `${idp.managedIdentity.endpoint}?api-version=2019-08-01&resource=https://storage.azure.com`;
    expect((await fetch(endpoint)).status).toBe(401);
    expect((await fetch(endpoint, { headers: { "x-identity-header": "wrong" } })).status).toBe(401);
    const ok = await fetch(endpoint, { headers: { "x-identity-header": idp.managedIdentity.identityHeader } });
    expect(ok.status).toBe(200);
  });

  it("without an app id to default to, the audience is required", async () => {
    const bare = await startDevIdentityProvider({
      port: 0,
      clientId: "c",
      tenantId: "t",
      botService: { tls },
    });
    try {
      const res = await fetch(`${bare.url}/dev/bot-service-token`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ service_url: SERVICE_URL }),
      });
      expect(res.status).toBe(422);
      expect(await res.json()).toEqual({ detail: expect.stringContaining("audience") });
    } finally {
      await bare.close();
    }
  });

  it("with the bot's secret it stands in for Entra: client credentials for the bot's app id answer an RS256 app token for the resource; a wrong secret or client is invalid_client (401)", async () => {
    const tenant = "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6";
    const withEntra = await startDevIdentityProvider({
      port: 0,
      clientId: "c",
      tenantId: "t",
      botService: { tls, botAppId: BOT_APP_ID, entra: { tenantId: tenant, clientSecret: "s3cret" } },
    });
    try {
      const host = withEntra.botService?.authorityHost;
      expect(host).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const token = (form: Record<string, string>) =>
        new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
          const body = new URLSearchParams(form).toString();
          const req = https.request(
            `${host}/${tenant}/oauth2/v2.0/token`,
            { method: "POST", ca: tls.cert, headers: { "content-type": "application/x-www-form-urlencoded" } },
            (res) => {
              const chunks: Buffer[] = [];
              res.on("data", (c: Buffer) => chunks.push(c));
              res.on("end", () =>
                resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) }),
              );
            },
          );
          req.on("error", reject);
          req.end(body);
        });
      const form = {
        grant_type: "client_credentials",
        client_id: BOT_APP_ID,
        client_secret: "s3cret",
        scope: "https://api.botframework.com/.default",
      };
      const ok = await token(form);
      expect(ok.status).toBe(200);
      const keys = (await getHttpsJson(`${host}/${tenant}/discovery/v2.0/keys`, { ca: tls.cert })) as { keys: JWK[] };
      const { payload } = await jwtVerify(String(ok.body.access_token), createLocalJWKSet({ keys: keys.keys }), {
        algorithms: ["RS256"],
        issuer: `https://sts.windows.net/${tenant}/`,
        audience: "https://api.botframework.com",
      });
      expect(payload).toMatchObject({ appid: BOT_APP_ID, tid: tenant });
      expect((await token({ ...form, client_secret: "wrong" })).body).toMatchObject({ error: "invalid_client" });
      expect((await token({ ...form, client_id: "11111111-2222-4333-8444-555555555555" })).status).toBe(401);
    } finally {
      await withEntra.close();
    }
  });
});
