import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { createServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CryptoKey, exportSPKI, generateKeyPair, importJWK, type JWTPayload, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type DevIdentityProvider, startDevIdentityProvider } from "../../local/dev-idp.js";
import {
  apiAudience,
  createJwtValidator,
  entraDiscoveryUrl,
  type JwtValidator,
} from "../../shared/auth/jwt-validator.js";
import { hasRoleAtLeast, ROLES, type Role, roleRank } from "../../shared/auth/roles.js";
import { DependencyUnavailableError, UnauthorizedError } from "../../shared/errors.js";
import { httpMappingOf } from "../../shared/http/envelope.js";

const TENANT_ID = "11111111-2222-3333-4444-555555555555";
const CLIENT_ID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

let dir: string;
let keyFile: string;
let idp: DevIdentityProvider;
let validator: JwtValidator;
let idpKey: CryptoKey;
let idpKid: string;
let idpPublicJwk: { n: string; e: string; kid: string };

const now = () => Math.floor(Date.now() / 1000);
const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const jwksSchema = z.object({ keys: z.array(z.looseObject({ n: z.string(), e: z.string(), kid: z.string() })) });
const storedKeySchema = z.looseObject({ kty: z.literal("RSA"), n: z.string(), e: z.string(), d: z.string() });
const tokenResponseSchema = z.object({
  access_token: z.string(),
  token_type: z.literal("Bearer"),
  expires_in: z.number(),
});
const decodePart = (part: string | undefined): Record<string, unknown> =>
  z.record(z.string(), z.unknown()).parse(JSON.parse(Buffer.from(part ?? "", "base64url").toString("utf8")));
const keysPathOf = (provider: DevIdentityProvider) =>
  new URL(provider.discoveryUrl).pathname.replace("/v2.0/.well-known/openid-configuration", "/discovery/v2.0/keys");

function validClaims(): JWTPayload {
  const t = now();
  return {
    iss: idp.issuer,
    aud: idp.audience,
    sub: "0c8f6e4a-1d2b-4c3e-8f9a-0b1c2d3e4f50",
    oid: "0c8f6e4a-1d2b-4c3e-8f9a-0b1c2d3e4f50",
    name: "Test User",
    tid: TENANT_ID,
    roles: ["Contributor"],
    iat: t,
    nbf: t,
    exp: t + 600,
  };
}

/** Signs with the dev IdP's own private key, so only the claims under test can be wrong. */
async function signWithIdpKey(overrides: JWTPayload, omit: readonly string[] = []): Promise<string> {
  const claims: JWTPayload = { ...validClaims(), ...overrides };
  for (const claim of omit) delete claims[claim];
  return new SignJWT(claims).setProtectedHeader({ alg: "RS256", typ: "JWT", kid: idpKid }).sign(idpKey);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (err: unknown) => err,
  );
}

async function expectUnauthorized(header: string | null | undefined, token?: string): Promise<UnauthorizedError> {
  const err = await rejection(validator.validate(header));
  expect(err).toBeInstanceOf(UnauthorizedError);
  if (!(err instanceof UnauthorizedError)) throw err;
  if (token !== undefined && token.length > 0) expect(err.message).not.toContain(token);
  return err;
}

function countingFetch(): { fetchImpl: typeof fetch; calls: string[] } {
  const calls: string[] = [];
  const fetchImpl: typeof fetch = (input, init) => {
    calls.push(input instanceof Request ? input.url : String(input));
    return fetch(input, init);
  };
  return { fetchImpl, calls };
}

async function postToken(
  provider: DevIdentityProvider,
  body: string,
  contentType = "application/json",
): Promise<Response> {
  return fetch(`${provider.url}/dev/token`, { method: "POST", headers: { "content-type": contentType }, body });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "dev-idp-test-"));
  keyFile = join(dir, "keys", "dev-idp-key.json");
  idp = await startDevIdentityProvider({ port: 0, keyFile, clientId: CLIENT_ID, tenantId: TENANT_ID });
  validator = createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: idp.audience });
  idpKey = await importJWK(storedKeySchema.parse(JSON.parse(await readFile(keyFile, "utf8"))), "RS256");
  const jwks = jwksSchema.parse(await (await fetch(`${idp.url}${keysPathOf(idp)}`)).json());
  const first = jwks.keys[0];
  if (first === undefined) throw new Error("JWKS has no keys");
  idpPublicJwk = { n: first.n, e: first.e, kid: first.kid };
  idpKid = first.kid;
});

afterAll(async () => {
  await idp?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe("createJwtValidator against the dev identity provider", () => {
  it("B-185 accepts a minted token and maps oid, name, tenant_id, roles", async () => {
    const token = await idp.mint({ role: "Approver", oid: "user-oid-1", name: "Ada Lovelace" });
    const caller = await validator.validate(`Bearer ${token}`);
    expect(caller).toEqual({
      oid: "user-oid-1",
      name: "Ada Lovelace",
      tenant_id: TENANT_ID,
      roles: ["Approver"],
      auth_time: expect.any(Number),
    });
  });

  it("C-372: carries the token's auth_time (the last interactive sign-in) for approval decisions; null when the token has none", async () => {
    const before = Math.floor(Date.now() / 1000);
    const token = await idp.mint({ role: "Approver", authAgeSeconds: 600 });
    const { auth_time: authTime } = await validator.validate(`Bearer ${token}`);
    expect(authTime).toBeGreaterThanOrEqual(before - 600);
    expect(authTime).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) - 600);
    expect((await validator.validate(`Bearer ${await signWithIdpKey({})}`)).auth_time).toBeNull();
  });

  it("B-185 accepts a lower-case bearer scheme", async () => {
    const token = await idp.mint({ role: "Reader" });
    await expect(validator.validate(`bearer ${token}`)).resolves.toMatchObject({ roles: ["Reader"] });
  });

  it("B-185 a token signed with the IdP key and correct claims is accepted (control for the signed-claims tests)", async () => {
    const caller = await validator.validate(`Bearer ${await signWithIdpKey({})}`);
    expect(caller.oid).toBe("0c8f6e4a-1d2b-4c3e-8f9a-0b1c2d3e4f50");
  });

  it("B-185 falls back to preferred_username, empty tenant_id, and drops unknown roles", async () => {
    const token = await signWithIdpKey(
      { preferred_username: "ada@example.test", roles: ["Owner", "Admin", 7, "Owner", "reader"] },
      ["name", "tid"],
    );
    const caller = await validator.validate(`Bearer ${token}`);
    expect(caller).toEqual({
      oid: "0c8f6e4a-1d2b-4c3e-8f9a-0b1c2d3e4f50",
      name: "ada@example.test",
      tenant_id: "",
      roles: ["Owner"],
      auth_time: null,
    });
  });

  it("B-185 name is empty and roles empty when the token has neither (a delegated-scope token)", async () => {
    const caller = await validator.validate(
      `Bearer ${await signWithIdpKey({ scp: "user_impersonation" }, ["name", "roles"])}`,
    );
    expect(caller.name).toBe("");
    expect(caller.roles).toEqual([]);
  });

  it("B-185 rejects a missing Authorization header", async () => {
    await expectUnauthorized(undefined);
    await expectUnauthorized(null);
    await expectUnauthorized("");
  });

  it("B-185 rejects a non-Bearer scheme", async () => {
    const token = await idp.mint({ role: "Owner" });
    await expectUnauthorized(`Basic ${Buffer.from("user:pass").toString("base64")}`);
    await expectUnauthorized(`Token ${token}`, token);
    await expectUnauthorized(token, token);
    await expectUnauthorized("Bearer");
    await expectUnauthorized("Bearer ");
  });

  it("B-185 rejects malformed tokens", async () => {
    await expectUnauthorized("Bearer abc", "abc");
    await expectUnauthorized("Bearer Zm9v.YmFy.YmF6", "Zm9v.YmFy.YmF6");
    await expectUnauthorized("Bearer !!!.???.***", "!!!.???.***");
    await expectUnauthorized("Bearer a.b.c.d.e", "a.b.c.d.e");
    const token = await idp.mint({ role: "Reader" });
    await expectUnauthorized(`Bearer ${token} ${token}`, token);
  });

  it("B-185 rejects a token without the oid claim", async () => {
    await expectUnauthorized(`Bearer ${await signWithIdpKey({}, ["oid"])}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ oid: 42 })}`);
  });

  it("B-186 rejects an unsigned token with alg none", async () => {
    const claims = validClaims();
    for (const header of [{ alg: "none", typ: "JWT" }, { alg: "none", typ: "JWT", kid: idpKid }, { alg: "NONE" }]) {
      const token = `${b64json(header)}.${b64json(claims)}.`;
      await expectUnauthorized(`Bearer ${token}`, token);
    }
  });

  it("B-186 rejects HS256 tokens keyed with the public key material (algorithm confusion)", async () => {
    const claims = validClaims();
    const publicKey = await importJWK({ kty: "RSA", n: idpPublicJwk.n, e: idpPublicJwk.e }, "RS256");
    const pem = await exportSPKI(publicKey);
    const secrets = [
      Buffer.from(idpPublicJwk.n, "base64url"),
      new TextEncoder().encode(pem),
      new TextEncoder().encode(JSON.stringify(idpPublicJwk)),
    ];
    for (const secret of secrets) {
      const token = await new SignJWT(claims)
        .setProtectedHeader({ alg: "HS256", typ: "JWT", kid: idpKid })
        .sign(secret);
      await expectUnauthorized(`Bearer ${token}`, token);
    }
  });

  it("B-186 accepts only RS256, even from the real key when the JWKS omits alg (as Entra's does)", async () => {
    const withoutAlg: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const url = input instanceof Request ? input.url : String(input);
      if (!url.endsWith("/discovery/v2.0/keys")) return response;
      const jwks = jwksSchema.parse(await response.json());
      return Response.json({ keys: jwks.keys.map(({ alg: _alg, ...rest }) => rest) });
    };
    const entraLike = createJwtValidator({
      discoveryUrl: idp.discoveryUrl,
      audience: idp.audience,
      fetchImpl: withoutAlg,
    });
    await expect(entraLike.validate(`Bearer ${await signWithIdpKey({})}`)).resolves.toBeDefined();
    const stored = storedKeySchema.parse(JSON.parse(await readFile(keyFile, "utf8")));
    for (const alg of ["PS256", "RS384", "RS512"]) {
      const key = await importJWK({ ...stored, alg }, alg);
      const token = await new SignJWT(validClaims()).setProtectedHeader({ alg, kid: idpKid }).sign(key);
      await expect(rejection(entraLike.validate(`Bearer ${token}`))).resolves.toBeInstanceOf(UnauthorizedError);
    }
  });

  it("B-186 rejects a tampered payload carrying the original signature", async () => {
    const token = await idp.mint({ role: "Reader", oid: "victim" });
    const [header, payload, signature] = token.split(".");
    if (header === undefined || payload === undefined || signature === undefined)
      throw new Error("minted token is not compact JWS");
    const forged = `${header}.${b64json({ ...decodePart(payload), roles: ["Owner"] })}.${signature}`;
    await expect(validator.validate(`Bearer ${token}`)).resolves.toMatchObject({ roles: ["Reader"] });
    await expectUnauthorized(`Bearer ${forged}`, forged);
    const flipped = `${header}.${payload}.${signature.startsWith("A") ? "B" : "A"}${signature.slice(1)}`;
    await expectUnauthorized(`Bearer ${flipped}`, flipped);
  });

  it("B-186 rejects a token signed by a key that is not in the JWKS (unknown kid and reused kid)", async () => {
    const { privateKey } = await generateKeyPair("RS256");
    const claims = validClaims();
    const unknownKid = await new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", kid: "not-in-jwks" })
      .sign(privateKey);
    await expectUnauthorized(`Bearer ${unknownKid}`, unknownKid);
    const borrowedKid = await new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: idpKid }).sign(privateKey);
    await expectUnauthorized(`Bearer ${borrowedKid}`, borrowedKid);
    const noKid = await new SignJWT(claims).setProtectedHeader({ alg: "RS256" }).sign(privateKey);
    await expectUnauthorized(`Bearer ${noKid}`, noKid);
  });

  it("B-186 rejects a token from another dev IdP instance with its own key", async () => {
    const other = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
    try {
      const token = await other.mint({ role: "Owner" });
      await expectUnauthorized(`Bearer ${token}`, token);
    } finally {
      await other.close();
    }
  });

  it("B-188 rejects a token with the wrong issuer", async () => {
    await expectUnauthorized(
      `Bearer ${await signWithIdpKey({ iss: `https://login.microsoftonline.com/${TENANT_ID}/v2.0` })}`,
    );
    await expectUnauthorized(`Bearer ${await signWithIdpKey({}, ["iss"])}`);
  });

  it("B-188 rejects a token from another tenant's IdP even when it shares the signing key", async () => {
    const otherTenant = await startDevIdentityProvider({
      port: 0,
      keyFile,
      clientId: CLIENT_ID,
      tenantId: "other-tenant",
    });
    try {
      const token = await otherTenant.mint({ role: "Owner" });
      await expectUnauthorized(`Bearer ${token}`, token);
      const sameIssuer = createJwtValidator({
        discoveryUrl: idp.discoveryUrl,
        audience: idp.audience,
        issuer: otherTenant.issuer,
      });
      await expect(sameIssuer.validate(`Bearer ${token}`)).resolves.toMatchObject({ tenant_id: "other-tenant" });
    } finally {
      await otherTenant.close();
    }
  });

  it("B-189 rejects a token with the wrong audience", async () => {
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ aud: "api://some-other-api" })}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ aud: CLIENT_ID })}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ aud: ["api://a", "api://b"] })}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({}, ["aud"])}`);
  });

  it("B-185 accepts only access tokens: the user_impersonation scope or an app role, never an ID token's claims", async () => {
    // Even a validator that (wrongly) accepted the client id as an audience refuses an ID token.
    const lenient = createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: [CLIENT_ID, idp.audience] });
    const idTokenClaims = { aud: CLIENT_ID, nonce: "n", preferred_username: "Test User" };
    const idToken = await signWithIdpKey(idTokenClaims, ["roles"]);
    const err = await rejection(lenient.validate(`Bearer ${idToken}`));
    expect(err).toBeInstanceOf(UnauthorizedError);
    expect((err as Error).message).toBe("bearer token is not an access token for this API");
    await expectUnauthorized(`Bearer ${await signWithIdpKey({}, ["roles"])}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ roles: [] })}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ scp: "openid profile", roles: [""] })}`);
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ scp: "user_impersonation_extra" }, ["roles"])}`);
    await expect(
      validator.validate(`Bearer ${await signWithIdpKey({ scp: "openid user_impersonation" }, ["roles"])}`),
    ).resolves.toMatchObject({ roles: [] });
    await expect(validator.validate(`Bearer ${await signWithIdpKey({})}`)).resolves.toMatchObject({
      roles: ["Contributor"],
    });
  });

  it("B-190 rejects a token expired beyond the clock skew and accepts one inside it", async () => {
    const expired = await expectUnauthorized(`Bearer ${await signWithIdpKey({ exp: now() - 120 })}`);
    expect(expired.message).toBe("bearer token expired");
    await expect(validator.validate(`Bearer ${await signWithIdpKey({ exp: now() - 20 })}`)).resolves.toBeDefined();
  });

  it("B-190 rejects a token without exp", async () => {
    await expectUnauthorized(`Bearer ${await signWithIdpKey({}, ["exp"])}`);
  });

  it("B-190 rejects a token whose nbf is in the future beyond the skew and accepts one inside it", async () => {
    await expectUnauthorized(`Bearer ${await signWithIdpKey({ nbf: now() + 120 })}`);
    await expect(validator.validate(`Bearer ${await signWithIdpKey({ nbf: now() + 20 })}`)).resolves.toBeDefined();
  });

  it("B-190 honours a custom clock tolerance", async () => {
    const strict = createJwtValidator({
      discoveryUrl: idp.discoveryUrl,
      audience: idp.audience,
      clockToleranceSeconds: 0,
    });
    const token = await signWithIdpKey({ exp: now() - 20 });
    await expect(validator.validate(`Bearer ${token}`)).resolves.toBeDefined();
    await expect(rejection(strict.validate(`Bearer ${token}`))).resolves.toBeInstanceOf(UnauthorizedError);
  });
});

describe("B-192 B-193 the bearer token identifies the caller only", () => {
  it("B-192 B-193 validation asks the identity provider only for discovery and signing keys (no token request, so no on-behalf-of exchange) and the caller keeps no part of the token", async () => {
    const provider = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
    try {
      const { fetchImpl, calls } = countingFetch();
      const own = createJwtValidator({ discoveryUrl: provider.discoveryUrl, audience: provider.audience, fetchImpl });
      const token = await provider.mint({ role: "Contributor", oid: "user-oid-9", name: "Grace Hopper" });
      const caller = await own.validate(`Bearer ${token}`);
      expect(caller.oid).toBe("user-oid-9");
      expect(calls.map((url) => new URL(url).pathname)).toEqual([
        new URL(provider.discoveryUrl).pathname,
        keysPathOf(provider),
      ]);
      const tokenPath = `/${TENANT_ID}/oauth2/v2.0/token`;
      expect(provider.requestCount(tokenPath)).toBe(0);
      // What handlers receive holds none of the token's three parts, so none can be forwarded.
      const held = JSON.stringify(caller);
      for (const part of token.split(".")) expect(held).not.toContain(part);
    } finally {
      await provider.close();
    }
  });
});

describe("B-187 discovery and signing-key caching", () => {
  it("B-187 fetches discovery and keys once for many validations", async () => {
    const provider = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
    try {
      const { fetchImpl, calls } = countingFetch();
      const cached = createJwtValidator({
        discoveryUrl: provider.discoveryUrl,
        audience: provider.audience,
        fetchImpl,
      });
      const keysPath = keysPathOf(provider);
      const tokens = await Promise.all(ROLES.map((role) => provider.mint({ role })));
      // The first burst is concurrent: in-flight discovery and JWKS fetches must be shared.
      await Promise.all(tokens.map((token) => cached.validate(`Bearer ${token}`)));
      for (let round = 0; round < 5; round++) {
        for (const token of tokens) await cached.validate(`Bearer ${token}`);
      }
      expect(calls.filter((url) => url === provider.discoveryUrl)).toHaveLength(1);
      expect(calls.filter((url) => new URL(url).pathname === keysPath)).toHaveLength(1);
      expect(calls).toHaveLength(2);
      expect(provider.requestCount(new URL(provider.discoveryUrl).pathname)).toBe(1);
      expect(provider.requestCount(keysPath)).toBe(1);

      // A second validator has its own cache: this proves the counters see every fetch.
      const second = createJwtValidator({ discoveryUrl: provider.discoveryUrl, audience: provider.audience });
      await second.validate(`Bearer ${tokens[0]}`);
      expect(provider.requestCount(keysPath)).toBe(2);
    } finally {
      await provider.close();
    }
  });

  it("B-187 a discovery failure is a 503, is not cached, and the next call retries", async () => {
    let failuresLeft = 1;
    const { fetchImpl: counting, calls } = countingFetch();
    const flaky: typeof fetch = async (input, init) => {
      if (failuresLeft > 0) {
        failuresLeft--;
        calls.push("failed");
        return new Response("upstream down", { status: 502 });
      }
      return counting(input, init);
    };
    const retrying = createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: idp.audience, fetchImpl: flaky });
    const token = await idp.mint({ role: "Reader" });
    const err = await rejection(retrying.validate(`Bearer ${token}`));
    expect(err).toBeInstanceOf(DependencyUnavailableError);
    expect(httpMappingOf(err)?.status).toBe(503);
    await expect(retrying.validate(`Bearer ${token}`)).resolves.toMatchObject({ roles: ["Reader"] });
    expect(calls[0]).toBe("failed");
    expect(calls.filter((url) => url === idp.discoveryUrl)).toHaveLength(1);
  });

  it("B-187 an unreachable identity provider is a 503, not a 401", async () => {
    const provider = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
    const token = await provider.mint({ role: "Reader" });
    const discoveryUrl = provider.discoveryUrl;
    await provider.close();
    const unreachable = createJwtValidator({ discoveryUrl, audience: provider.audience });
    await expect(rejection(unreachable.validate(`Bearer ${token}`))).resolves.toBeInstanceOf(
      DependencyUnavailableError,
    );
  });

  it("B-187 an unavailable JWKS endpoint is a 503, not a 401", async () => {
    const keysDown: typeof fetch = async (input, init) => {
      const url = input instanceof Request ? input.url : String(input);
      if (url.endsWith("/discovery/v2.0/keys")) return new Response("<html>maintenance</html>", { status: 200 });
      return fetch(input, init);
    };
    const broken = createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: idp.audience, fetchImpl: keysDown });
    const token = await idp.mint({ role: "Reader" });
    await expect(rejection(broken.validate(`Bearer ${token}`))).resolves.toBeInstanceOf(DependencyUnavailableError);
  });
});

describe("roles", () => {
  // Rows: role held; columns: floor Reader, Contributor, Approver, Owner.
  const matrix: Record<Role, [boolean, boolean, boolean, boolean]> = {
    Reader: [true, false, false, false],
    Contributor: [true, true, false, false],
    Approver: [true, true, true, false],
    Owner: [true, true, true, true],
  };
  for (const held of ROLES) {
    it(`hasRoleAtLeast: ${held} admits exactly the floors at or below it`, () => {
      expect(ROLES.map((floor) => hasRoleAtLeast([held], floor))).toEqual(matrix[held]);
    });
  }

  it("hasRoleAtLeast ignores unknown role strings and uses the highest known role", () => {
    for (const floor of ROLES) {
      expect(hasRoleAtLeast([], floor)).toBe(false);
      expect(hasRoleAtLeast(["owner", "Admin", "READER", ""], floor)).toBe(false);
    }
    expect(hasRoleAtLeast(["Bogus", "Reader", "Approver"], "Approver")).toBe(true);
    expect(hasRoleAtLeast(["Bogus", "Reader", "Approver"], "Owner")).toBe(false);
  });

  it("roleRank orders Reader < Contributor < Approver < Owner", () => {
    expect(ROLES.map(roleRank)).toEqual([0, 1, 2, 3]);
  });

  it("Entra helpers build the discovery URL and the audience", () => {
    expect(entraDiscoveryUrl(TENANT_ID)).toBe(
      `https://login.microsoftonline.com/${TENANT_ID}/v2.0/.well-known/openid-configuration`,
    );
    expect(apiAudience(CLIENT_ID)).toBe(`api://${CLIENT_ID}`);
  });
});

describe("dev identity provider", () => {
  it("serves an Entra-shaped discovery document and a public-only JWKS", async () => {
    const discovery: unknown = await (await fetch(idp.discoveryUrl)).json();
    expect(discovery).toMatchObject({
      issuer: `https://login.blastplane.local/${TENANT_ID}/v2.0`,
      jwks_uri: `${idp.url}/${TENANT_ID}/discovery/v2.0/keys`,
      id_token_signing_alg_values_supported: ["RS256"],
      response_types_supported: ["code"],
      subject_types_supported: ["public"],
    });
    expect(idp.issuer).toBe(`https://login.blastplane.local/${TENANT_ID}/v2.0`);
    expect(idp.audience).toBe(`api://${CLIENT_ID}`);
    expect(idp.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const jwks: unknown = await (await fetch(`${idp.url}${keysPathOf(idp)}`)).json();
    expect(jwks).toEqual({
      keys: [{ kty: "RSA", n: idpPublicJwk.n, e: idpPublicJwk.e, kid: idpKid, alg: "RS256", use: "sig" }],
    });
  });

  it("mints Entra-style claims with stable defaults", async () => {
    const token = await idp.mint({ role: "Contributor" });
    const [headerPart, payloadPart] = token.split(".");
    expect(decodePart(headerPart)).toMatchObject({ alg: "RS256", kid: idpKid });
    const claims = decodePart(payloadPart);
    expect(claims).toMatchObject({
      iss: idp.issuer,
      aud: idp.audience,
      name: "Local Developer",
      tid: TENANT_ID,
      roles: ["Contributor"],
      scp: "user_impersonation",
    });
    expect(claims.sub).toBe(claims.oid);
    expect(claims.oid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(claims.exp).toBe(Number(claims.iat) + 3600);
    expect(claims.nbf).toBe(claims.iat);
    const again = await idp.mint({ role: "Owner" });
    expect(decodePart(again.split(".")[1]).oid).toBe(claims.oid);
    const other = await idp.mint({ role: "Owner", name: "Someone Else" });
    expect((await validator.validate(`Bearer ${other}`)).oid).not.toBe(claims.oid);
  });

  it("mint refuses claims that /dev/token would refuse", async () => {
    await expect(idp.mint({ role: "Reader", ttlSeconds: 10 })).rejects.toBeInstanceOf(TypeError);
    await expect(idp.mint({ role: "Reader", name: "x".repeat(201) })).rejects.toBeInstanceOf(TypeError);
    const notARole: unknown = "Admin";
    await expect(idp.mint({ role: notARole as Role })).rejects.toBeInstanceOf(TypeError);
  });

  it("POST /dev/token mints a token the validator accepts", async () => {
    const response = await postToken(
      idp,
      JSON.stringify({ role: "Owner", oid: "dev-oid", name: "Dev", ttl_seconds: 120 }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    const body = tokenResponseSchema.parse(await response.json());
    expect(body.expires_in).toBe(120);
    const token = body.access_token;
    await expect(validator.validate(`Bearer ${token}`)).resolves.toEqual({
      oid: "dev-oid",
      name: "Dev",
      tenant_id: TENANT_ID,
      roles: ["Owner"],
      auth_time: expect.any(Number),
    });
  });

  it("POST /dev/token refuses a bad role with 422", async () => {
    for (const body of [{ role: "Admin" }, { role: "owner" }, {}, { role: ["Owner"] }]) {
      const response = await postToken(idp, JSON.stringify(body));
      expect(response.status).toBe(422);
      expect(await response.json()).toMatchObject({ detail: expect.stringContaining("role") });
    }
  });

  it("POST /dev/token refuses bad oid, name, ttl and unknown fields with 422", async () => {
    const bodies = [
      { role: "Reader", oid: "x".repeat(201) },
      { role: "Reader", oid: "" },
      { role: "Reader", name: 5 },
      { role: "Reader", ttl_seconds: 59 },
      { role: "Reader", ttl_seconds: 86_401 },
      { role: "Reader", ttl_seconds: 600.5 },
      { role: "Reader", roles: ["Owner"] },
    ];
    for (const body of bodies) {
      expect((await postToken(idp, JSON.stringify(body))).status).toBe(422);
    }
    for (const body of ["[]", "null", '"Owner"', "42"]) {
      expect((await postToken(idp, body)).status).toBe(422);
    }
  });

  it("POST /dev/token refuses invalid JSON and a wrong content type with 400", async () => {
    for (const body of ["{", "", "{role: Owner}", "\u0000"]) {
      const response = await postToken(idp, body);
      expect(response.status).toBe(400);
      expect(await response.json()).toHaveProperty("detail");
    }
    expect((await postToken(idp, JSON.stringify({ role: "Owner" }), "text/plain")).status).toBe(400);
  });

  it("POST /dev/token refuses a body over 64 KiB with 413 and keeps serving", async () => {
    const huge = JSON.stringify({ role: "Reader", name: "x".repeat(100 * 1024) });
    const response = await postToken(idp, huge);
    expect(response.status).toBe(413);
    expect(await response.json()).toHaveProperty("detail");
    expect((await postToken(idp, JSON.stringify({ role: "Reader" }))).status).toBe(200);
  });

  it("answers 404 JSON for anything else", async () => {
    for (const [method, path] of [
      ["GET", "/"],
      ["GET", "/dev/token"],
      ["POST", keysPathOf(idp)],
      ["GET", "/other-tenant/v2.0/.well-known/openid-configuration"],
    ] as const) {
      const response = await fetch(`${idp.url}${path}`, { method });
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ detail: "not found" });
    }
  });

  it("refuses a non-loopback Host header (DNS rebinding)", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${idp.url}/dev/token`,
        { method: "POST", headers: { host: "attacker.example", "content-type": "application/json" } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ role: "Owner" }));
    });
    expect(status).toBe(421);
  });

  it("counts requests per path, its own paths only (made-up paths grow nothing)", async () => {
    const keysPath = new URL(idp.jwksUrl).pathname;
    const before = idp.requestCount(keysPath);
    await (await fetch(`${idp.jwksUrl}?x=1`)).text();
    await (await fetch(idp.jwksUrl)).text();
    expect(idp.requestCount(keysPath)).toBe(before + 2);
    for (let i = 0; i < 3; i++) await (await fetch(`${idp.url}/nowhere-${i}`)).text();
    expect([0, 1, 2].map((i) => idp.requestCount(`/nowhere-${i}`))).toEqual([0, 0, 0]);
  });
});

describe("dev identity provider key persistence", () => {
  it("stores the key pair with mode 0600 and reuses it across a restart on the same port", async () => {
    const persistDir = await mkdtemp(join(tmpdir(), "dev-idp-persist-"));
    const file = join(persistDir, "key.json");
    try {
      const first = await startDevIdentityProvider({
        port: 0,
        keyFile: file,
        clientId: CLIENT_ID,
        tenantId: TENANT_ID,
      });
      const port = Number(new URL(first.url).port);
      const token = await first.mint({ role: "Approver" });
      await first.close();
      if (process.platform !== "win32") expect((await stat(file)).mode & 0o777).toBe(0o600);

      const restarted = await startDevIdentityProvider({
        port,
        keyFile: file,
        clientId: CLIENT_ID,
        tenantId: TENANT_ID,
      });
      try {
        const fresh = createJwtValidator({ discoveryUrl: restarted.discoveryUrl, audience: restarted.audience });
        await expect(fresh.validate(`Bearer ${token}`)).resolves.toMatchObject({ roles: ["Approver"] });
      } finally {
        await restarted.close();
      }
    } finally {
      await rm(persistDir, { recursive: true, force: true });
    }
  });

  it("keeps its issuer across a restart on another port, so tokens minted before stay valid", async () => {
    const persistDir = await mkdtemp(join(tmpdir(), "dev-idp-persist-"));
    const file = join(persistDir, "key.json");
    try {
      const first = await startDevIdentityProvider({
        port: 0,
        keyFile: file,
        clientId: CLIENT_ID,
        tenantId: TENANT_ID,
      });
      const token = await first.mint({ role: "Contributor" });
      await first.close();
      // Hold the first port, so the restart surely listens elsewhere.
      const holder = createServer();
      await new Promise<void>((resolve) => holder.listen(Number(new URL(first.url).port), "127.0.0.1", resolve));
      try {
        const restarted = await startDevIdentityProvider({
          port: 0,
          keyFile: file,
          clientId: CLIENT_ID,
          tenantId: TENANT_ID,
        });
        try {
          expect(restarted.url).not.toBe(first.url);
          expect(restarted.issuer).toBe(first.issuer);
          const fresh = createJwtValidator({ discoveryUrl: restarted.discoveryUrl, audience: restarted.audience });
          await expect(fresh.validate(`Bearer ${token}`)).resolves.toMatchObject({ roles: ["Contributor"] });
        } finally {
          await restarted.close();
        }
      } finally {
        holder.close();
      }
    } finally {
      await rm(persistDir, { recursive: true, force: true });
    }
  });

  it("two providers started together on one key file sign tokens valid against each other's JWKS", async () => {
    const persistDir = await mkdtemp(join(tmpdir(), "dev-idp-persist-"));
    const file = join(persistDir, "key.json");
    try {
      const [a, b] = await Promise.all([
        startDevIdentityProvider({ port: 0, keyFile: file, clientId: CLIENT_ID, tenantId: TENANT_ID }),
        startDevIdentityProvider({ port: 0, keyFile: file, clientId: CLIENT_ID, tenantId: TENANT_ID }),
      ]);
      try {
        const viaB = createJwtValidator({ discoveryUrl: b.discoveryUrl, audience: b.audience, issuer: a.issuer });
        const viaA = createJwtValidator({ discoveryUrl: a.discoveryUrl, audience: a.audience, issuer: b.issuer });
        await expect(viaB.validate(`Bearer ${await a.mint({ role: "Reader" })}`)).resolves.toMatchObject({
          roles: ["Reader"],
        });
        await expect(viaA.validate(`Bearer ${await b.mint({ role: "Owner" })}`)).resolves.toMatchObject({
          roles: ["Owner"],
        });
        // Control: the main provider has a different key, so its tokens must fail against B's JWKS.
        const foreign = createJwtValidator({ discoveryUrl: b.discoveryUrl, audience: b.audience, issuer: idp.issuer });
        await expect(
          rejection(foreign.validate(`Bearer ${await idp.mint({ role: "Reader" })}`)),
        ).resolves.toBeInstanceOf(UnauthorizedError);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    } finally {
      await rm(persistDir, { recursive: true, force: true });
    }
  });
});
