import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevIdentityProvider, startDevIdentityProvider } from "../../local/dev-idp.js";
import { createCodeFlow } from "../../local/oauth-code-flow.js";
import { createJwtValidator } from "../../shared/auth/jwt-validator.js";

const CLIENT_ID = "blastplane-test-api";
const TENANT_ID = "blastplane-test";
const APP = "http://127.0.0.1:65000";
const REDIRECT = `${APP}/`;
const SCOPE = `api://${CLIENT_ID}/user_impersonation openid profile offline_access`;

let idp: DevIdentityProvider;
let oauth: string;

beforeAll(async () => {
  idp = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
  idp.allowRedirectUri(REDIRECT);
  oauth = `${idp.url}/${TENANT_ID}/oauth2/v2.0`;
});

afterAll(async () => {
  await idp?.close();
});

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

function authorizeParams(overrides: Record<string, string | undefined> = {}): URLSearchParams {
  const base: Record<string, string | undefined> = {
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT,
    response_type: "code",
    scope: SCOPE,
    state: "state-123",
    nonce: "nonce-456",
    code_challenge: pkce().challenge,
    code_challenge_method: "S256",
    response_mode: "fragment",
    ...overrides,
  };
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(base)) if (v !== undefined) params.set(k, v);
  return params;
}

/** Signs in on the authorize endpoint (as the page's form does) and returns the redirect's fields. */
async function signIn(challenge: string, role = "Contributor", name = "Test User"): Promise<URLSearchParams> {
  const body = authorizeParams({ code_challenge: challenge });
  body.set("role", role);
  body.set("name", name);
  const res = await fetch(`${oauth}/authorize`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body,
    redirect: "manual",
  });
  expect(res.status).toBe(302);
  const location = res.headers.get("location") ?? "";
  expect(location.startsWith(`${REDIRECT}#`)).toBe(true);
  return new URLSearchParams(location.slice(REDIRECT.length + 1));
}

async function redeem(fields: Record<string, string>, origin = APP): Promise<Response> {
  return fetch(`${oauth}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      client_id: CLIENT_ID,
      redirect_uri: REDIRECT,
      ...fields,
    }),
  });
}

describe("the development identity provider's authorization code flow with PKCE", () => {
  it("B-183 B-184 B-185 shows the sign-in page, redirects back with a code, and the code and its verifier buy tokens the API accepts", async () => {
    const page = await fetch(`${oauth}/authorize?${authorizeParams()}`);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('<label for="name">Your name</label>');
    for (const role of ["Reader", "Contributor", "Approver", "Owner"]) expect(html).toContain(`value="${role}"`);
    expect(page.headers.get("content-security-policy")).toContain(`form-action 'self' ${APP}`);

    const { verifier, challenge } = pkce();
    const back = await signIn(challenge, "Owner", "Ada Lovelace");
    expect(back.get("state")).toBe("state-123");
    const code = back.get("code") ?? "";
    expect(code.length).toBeGreaterThan(20);

    const res = await redeem({ code, code_verifier: verifier });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const tokens = (await res.json()) as {
      token_type: string;
      access_token: string;
      id_token: string;
      scope: string;
      expires_in: number;
    };
    expect(tokens.token_type).toBe("Bearer");
    expect(tokens.scope).toBe(SCOPE);
    const caller = await createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: idp.audience }).validate(
      `Bearer ${tokens.access_token}`,
    );
    expect(caller).toMatchObject({ name: "Ada Lovelace", tenant_id: TENANT_ID, roles: ["Owner"] });
    // The sign-in page was just submitted: auth_time is that moment (what an approval decision checks, C-372).
    expect(Math.abs((caller.auth_time ?? 0) - Date.now() / 1000)).toBeLessThan(120);
    const id = decodeJwt(tokens.id_token);
    expect(id).toMatchObject({
      aud: CLIENT_ID,
      iss: idp.issuer,
      nonce: "nonce-456",
      name: "Ada Lovelace",
      oid: caller.oid,
    });
  });

  it("a code is single-use: a wrong verifier burns it, and a replay of a redeemed code is refused", async () => {
    const first = pkce();
    const burnt = (await signIn(first.challenge)).get("code") ?? "";
    const wrong = await redeem({ code: burnt, code_verifier: pkce().verifier });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toEqual({
      error: "invalid_grant",
      error_description: "code_verifier does not match the code_challenge",
    });
    const retried = await redeem({ code: burnt, code_verifier: first.verifier });
    expect(retried.status).toBe(400);
    expect(((await retried.json()) as { error: string }).error).toBe("invalid_grant");

    const second = pkce();
    const code = (await signIn(second.challenge)).get("code") ?? "";
    expect((await redeem({ code, code_verifier: second.verifier })).status).toBe(200);
    const replay = await redeem({ code, code_verifier: second.verifier });
    expect(replay.status).toBe(400);
    expect(await replay.json()).toEqual({
      error: "invalid_grant",
      error_description: "the authorization code is unknown, already used or expired",
    });
  });

  it("a code redeemed for another redirect URI or client is refused", async () => {
    idp.allowRedirectUri(`${APP}/other`);
    const { verifier, challenge } = pkce();
    const code = (await signIn(challenge)).get("code") ?? "";
    const res = await redeem({ code, code_verifier: verifier, redirect_uri: `${APP}/other` });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: "invalid_grant",
      error_description: "the code was issued to another client or redirect_uri",
    });
  });

  it("an unknown client or an unregistered redirect URI gets an error page, never a redirect", async () => {
    for (const params of [
      authorizeParams({ client_id: "someone-else" }),
      authorizeParams({ redirect_uri: "http://127.0.0.1:65000/evil" }),
    ]) {
      const res = await fetch(`${oauth}/authorize?${params}`, { redirect: "manual" });
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("Sign-in refused");
    }
  });

  it("B-183 the implicit grant, a plain PKCE challenge, a missing API scope and prompt=none are refused back to the app", async () => {
    const cases: [Record<string, string | undefined>, string, string][] = [
      [{ response_type: "token" }, "invalid_request", "response_type must be code"],
      [{ code_challenge_method: "plain" }, "invalid_request", "code_challenge_method must be S256"],
      [{ code_challenge: undefined }, "invalid_request", "code_challenge"],
      [{ scope: "openid profile" }, "invalid_scope", `api://${CLIENT_ID}/user_impersonation`],
      [{ scope: `${SCOPE} api://another-api/.default` }, "invalid_scope", `api://${CLIENT_ID}/user_impersonation`],
      [{ prompt: "none" }, "login_required", "sign in again"],
    ];
    for (const [overrides, error, description] of cases) {
      const res = await fetch(`${oauth}/authorize?${authorizeParams(overrides)}`, { redirect: "manual" });
      expect(res.status).toBe(302);
      const back = new URLSearchParams((res.headers.get("location") ?? "").split("#")[1]);
      expect(back.get("error")).toBe(error);
      expect(back.get("error_description")).toContain(description);
      expect(back.get("state")).toBe("state-123");
      expect(back.has("code")).toBe(false);
    }
  });

  it("the sign-in form refuses an unknown role and a name with control characters", async () => {
    for (const [role, name, why] of [
      ["Admin", "Test", "role"],
      ["Reader", "evil\u0007name", "control characters"],
    ] as const) {
      const body = authorizeParams();
      body.set("role", role);
      body.set("name", name);
      const res = await fetch(`${oauth}/authorize`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body,
        redirect: "manual",
      });
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain(why);
    }
  });

  it("the token endpoint refuses other grant types and malformed verifiers", async () => {
    const other = await redeem({ grant_type: "client_credentials", code: "x", code_verifier: pkce().verifier });
    expect(other.status).toBe(400);
    expect(((await other.json()) as { error: string }).error).toBe("unsupported_grant_type");
    const short = await redeem({ code: "x", code_verifier: "too-short" });
    expect(short.status).toBe(400);
    expect(await short.json()).toMatchObject({ error: "invalid_request" });
    const json = await fetch(`${oauth}/token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(json.status).toBe(400);
  });

  it("CORS admits only the origins of registered redirect URIs, on discovery and token", async () => {
    const allowed = await fetch(`${oauth}/token`, {
      method: "OPTIONS",
      headers: {
        origin: APP,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe(APP);
    expect(allowed.headers.get("access-control-allow-headers")).toBe("content-type");
    const refused = await fetch(`${oauth}/token`, {
      method: "OPTIONS",
      headers: { origin: "http://127.0.0.1:1", "access-control-request-method": "POST" },
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
    const discovery = await fetch(idp.discoveryUrl, { headers: { origin: APP } });
    expect(discovery.headers.get("access-control-allow-origin")).toBe(APP);
    const metadata = (await discovery.json()) as Record<string, unknown>;
    expect(metadata).toMatchObject({
      authorization_endpoint: `${oauth}/authorize`,
      token_endpoint: `${oauth}/token`,
      code_challenge_methods_supported: ["S256"],
    });
    const elsewhere = await fetch(idp.discoveryUrl, { headers: { origin: "http://127.0.0.1:1" } });
    expect(elsewhere.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("logout returns only to a registered URI", async () => {
    const back = await fetch(`${oauth}/logout?post_logout_redirect_uri=${encodeURIComponent(REDIRECT)}`, {
      redirect: "manual",
    });
    expect(back.status).toBe(302);
    expect(back.headers.get("location")).toBe(REDIRECT);
    const elsewhere = await fetch(
      `${oauth}/logout?post_logout_redirect_uri=${encodeURIComponent("https://example.invalid/")}`,
      { redirect: "manual" },
    );
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.headers.get("location")).toBeNull();
  });

  it("a code expires after its lifetime", async () => {
    let clock = 1_000_000;
    const flow = createCodeFlow({
      clientId: CLIENT_ID,
      requiredScope: `api://${CLIENT_ID}/user_impersonation`,
      codeTtlSeconds: 60,
      now: () => clock,
      issue: async () => ({ accessToken: "a", idToken: "i", expiresInSeconds: 60 }),
    });
    flow.allowRedirectUri(REDIRECT);
    const server: Server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      void (url.pathname === "/authorize" ? flow.authorize(req, res, url) : flow.token(req, res));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const code = async (challenge: string) => {
        const body = authorizeParams({ code_challenge: challenge });
        body.set("role", "Reader");
        const res = await fetch(`${base}/authorize`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body,
          redirect: "manual",
        });
        return new URLSearchParams((res.headers.get("location") ?? "").split("#")[1]).get("code") ?? "";
      };
      const exchange = (c: string, verifier: string) =>
        fetch(`${base}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "authorization_code",
            client_id: CLIENT_ID,
            redirect_uri: REDIRECT,
            code: c,
            code_verifier: verifier,
          }),
        });
      const fresh = pkce();
      const inTime = await code(fresh.challenge);
      clock += 59_000;
      expect((await exchange(inTime, fresh.verifier)).status).toBe(200);
      const late = pkce();
      const expired = await code(late.challenge);
      clock += 60_000;
      const res = await exchange(expired, late.verifier);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe("invalid_grant");
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
