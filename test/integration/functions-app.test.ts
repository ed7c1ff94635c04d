import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { importJWK, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devIssuer, startDevIdentityProvider } from "../../local/dev-idp.js";
import { eventually, ROOT, startStack, type TestStack } from "../support/local-stack.js";

const run = promisify(execFile);
let stack: TestStack;
let base: string;

beforeAll(async () => {
  stack = await startStack({ env: { NOOP_RATE_LIMIT_PER_MINUTE: "12" } });
  base = stack.info.functions_url;
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

/** Signs claims with the running stack's own development key (read from its data folder). */
async function signWithStackKey(claims: Record<string, unknown>): Promise<string> {
  const jwk = JSON.parse(readFileSync(path.join(stack.dataDir, "idp-signing-key.json"), "utf8")) as JWK & {
    kid?: string;
  };
  const key = await importJWK(jwk, "RS256");
  return new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: jwk.kid }).sign(key);
}

function goodClaims(): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  return {
    iss: devIssuer("blastplane-local"),
    aud: "api://blastplane-local-api",
    oid: "11111111-2222-3333-4444-555555555555",
    name: "Test User",
    tid: "blastplane-local",
    roles: ["Reader"],
    iat: now,
    nbf: now,
    exp: now + 600,
  };
}

async function me(token?: string): Promise<Response> {
  return fetch(`${base}/api/me`, { headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } });
}

describe("dashboard backend foundation routes", () => {
  it("B-160 answers liveness without a token, with X-Request-Id", async () => {
    const res = await fetch(`${base}/api/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok" });
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("B-127 keeps a well-formed inbound request id on success", async () => {
    const res = await fetch(`${base}/api/health`, { headers: { "X-Request-Id": "client-trace-0042" } });
    expect(res.headers.get("x-request-id")).toBe("client-trace-0042");
  });

  it("B-161 answers readiness with every dependency checked", async () => {
    const res = await fetch(`${base}/api/health/ready`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      status: "ready",
      checks: { storage: "ok", durable_backend: "ok", job_api: "ok" },
    });
  });

  it("B-159 B-185 B-191 accepts a token minted by `npx blastplane token` and returns the caller", async () => {
    const { stdout } = await run(
      process.execPath,
      [path.join(ROOT, "bin/blastplane.mjs"), "token", "--role", "Contributor", "--name", "Ada"],
      {
        env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir },
      },
    );
    const res = await me(stdout.trim());
    expect(res.status).toBe(200);
    const body = (await res.json()) as { caller: Record<string, unknown> };
    expect(body.caller).toMatchObject({ name: "Ada", tenant_id: "blastplane-local", roles: ["Contributor"] });
    expect(body.caller.oid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("B-158 refuses a missing token with 401 in the envelope", async () => {
    const res = await me();
    expect(res.status).toBe(401);
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(["detail", "request_id"]);
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
  });

  it("B-186 refuses an unsigned alg:none token", async () => {
    const token = `${b64url({ alg: "none", typ: "JWT" })}.${b64url(goodClaims())}.`;
    expect((await me(token)).status).toBe(401);
  });

  it("B-186 refuses HS256 signed with the public key", async () => {
    const jwks = (await (await fetch(`${stack.info.idp_url}/blastplane-local/discovery/v2.0/keys`)).json()) as {
      keys: JWK[];
    };
    const publicKey = jwks.keys[0];
    const secret = new TextEncoder().encode(JSON.stringify(publicKey));
    const token = await new SignJWT(goodClaims())
      .setProtectedHeader({ alg: "HS256", kid: publicKey?.kid })
      .sign(secret);
    expect((await me(token)).status).toBe(401);
  });

  it("B-186 refuses a tampered payload", async () => {
    const token = await signWithStackKey(goodClaims());
    const [h, , s] = token.split(".");
    const tampered = `${h}.${b64url({ ...goodClaims(), roles: ["Owner"] })}.${s}`;
    expect((await me(tampered)).status).toBe(401);
    // The untampered token is fine, so the refusal above is the signature's doing.
    expect((await me(token)).status).toBe(200);
  });

  it("B-188 refuses a wrong issuer", async () => {
    expect(
      (await me(await signWithStackKey({ ...goodClaims(), iss: "https://login.example.com/other/v2.0" }))).status,
    ).toBe(401);
  });

  it("B-189 refuses a wrong audience", async () => {
    expect((await me(await signWithStackKey({ ...goodClaims(), aud: "api://someone-else" }))).status).toBe(401);
  });

  it("B-185 B-189 refuses the ID token of a browser sign-in at the local provider and accepts its access token", async () => {
    const tenant = "blastplane-local";
    const clientId = "blastplane-local-api";
    const redirectUri = `${base}/`;
    const verifier = randomBytes(32).toString("base64url");
    const form = new URLSearchParams({
      client_id: clientId,
      redirect_uri: redirectUri,
      response_type: "code",
      response_mode: "fragment",
      scope: `api://${clientId}/user_impersonation openid profile offline_access`,
      state: "s",
      nonce: "n",
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256",
      role: "Owner",
      name: "Ida Token",
    });
    const oauth = `${stack.info.idp_url}/${tenant}/oauth2/v2.0`;
    const back = await fetch(`${oauth}/authorize`, { method: "POST", body: form, redirect: "manual" });
    expect(back.status).toBe(302);
    const code = new URLSearchParams((back.headers.get("location") ?? "").split("#")[1]).get("code") ?? "";
    const redeemed = await fetch(`${oauth}/token`, {
      method: "POST",
      body: new URLSearchParams({
        grant_type: "authorization_code",
        client_id: clientId,
        redirect_uri: redirectUri,
        code,
        code_verifier: verifier,
      }),
    });
    expect(redeemed.status).toBe(200);
    const tokens = (await redeemed.json()) as { access_token: string; id_token: string };
    const idRes = await me(tokens.id_token);
    expect(idRes.status).toBe(401);
    expect(await idRes.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    const accessRes = await me(tokens.access_token);
    expect(accessRes.status).toBe(200);
    expect(await accessRes.json()).toMatchObject({ caller: { name: "Ida Token", roles: ["Owner"] } });
  });

  it("B-189 refuses the bare client id as audience and a token with neither the API scope nor an app role", async () => {
    const { roles: _roles, ...noRoles } = goodClaims();
    expect((await me(await signWithStackKey({ ...goodClaims(), aud: "blastplane-local-api" }))).status).toBe(401);
    expect(
      (await me(await signWithStackKey({ ...goodClaims(), aud: "blastplane-local-api", scp: "user_impersonation" })))
        .status,
    ).toBe(401);
    expect((await me(await signWithStackKey(noRoles))).status).toBe(401);
    expect((await me(await signWithStackKey({ ...noRoles, scp: "openid profile" }))).status).toBe(401);
    // The delegated scope alone is enough (a user with no app role is a caller with no roles).
    expect((await me(await signWithStackKey({ ...noRoles, scp: "openid user_impersonation" }))).status).toBe(200);
  });

  it("B-190 refuses an expired token", async () => {
    const now = Math.floor(Date.now() / 1000);
    expect(
      (await me(await signWithStackKey({ ...goodClaims(), iat: now - 7200, nbf: now - 7200, exp: now - 3600 }))).status,
    ).toBe(401);
  });

  it("refuses a token from an unknown key (another identity provider with the same issuer path)", async () => {
    const other = await startDevIdentityProvider({
      port: 0,
      clientId: "blastplane-local-api",
      tenantId: "blastplane-local",
    });
    try {
      expect((await me(await other.mint({ role: "Owner" }))).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it("refuses malformed tokens", async () => {
    for (const token of ["abc", "a.b.c", "....", "Bearer", "x".repeat(5000)]) {
      const res = await me(token);
      expect(res.status).toBe(401);
      expect(await res.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    }
    const basic = await fetch(`${base}/api/me`, { headers: { Authorization: "Basic dXNlcjpwYXNz" } });
    expect(basic.status).toBe(401);
  });

  it("B-162 B-128 B-129 B-130 B-131 B-132 B-133 B-134 B-135 B-137 B-138 reports every §2.9 field without a token", async () => {
    const res = await fetch(`${base}/api/health/queue`);
    expect(res.status).toBe(200);
    const d = (await res.json()) as Record<string, unknown>;
    expect(Number.isInteger(d.task_app_id)).toBe(true);
    expect(d.celery_app_id).toBe(d.task_app_id);
    expect(d.current_app_id).toBe(d.task_app_id);
    expect(d.task_app_main).toBe("blastplane");
    expect(d.task_app_default_queue).toBe("default");
    expect(d.resolved_route).toEqual({ queue: "cloud" });
    expect(Object.keys(d.queues as object).sort()).toEqual(["blast", "cloud", "default", "fallback", "storage"]);
    expect((d.queues as Record<string, number>).fallback).toBe(0);
    expect(d.redis_keys_db0).toEqual([]);
    for (const route of Object.values(d.task_app_routes as Record<string, { queue: string }>)) {
      expect(["default", "cloud", "blast", "storage"]).toContain(route.queue);
    }
  });

  it("B-139 B-140 B-141 B-164 B-165 B-166 runs the no-op round trip: SUCCESS with the message unchanged", async () => {
    const message = "héllo & <world> ✓";
    const res = await fetch(`${base}/api/health/queue/enqueue-noop?message=${encodeURIComponent(message)}`, {
      method: "POST",
    });
    expect(res.status).toBe(200);
    const enqueued = (await res.json()) as { task_id: string; resolved_route: { queue: string }; queues: object };
    expect(enqueued.task_id).toMatch(/^[0-9a-f]{32}$/);
    expect(enqueued.resolved_route.queue).toBe("cloud");
    expect(enqueued.queues).toBeDefined();
    const started = Date.now();
    const done = await eventually(
      async () => {
        const r = (await (await fetch(`${base}/api/health/queue/result/${enqueued.task_id}`)).json()) as {
          status: string;
          result: { message: string } | null;
        };
        return r.status === "SUCCESS" ? r : undefined;
      },
      5_000,
      50,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(done.result?.message).toBe(message);
  });

  it("B-163 keeps the diagnostics read-only", async () => {
    const a = await (await fetch(`${base}/api/health/queue`)).json();
    const b = await (await fetch(`${base}/api/health/queue`)).json();
    expect(b).toEqual(a);
  });

  it("B-125 B-238 answers 422 for a missing message, 404 for an unknown task and 400 for a malformed task id", async () => {
    const missing = await fetch(`${base}/api/health/queue/enqueue-noop`, { method: "POST" });
    expect(missing.status).toBe(422);
    expect(await missing.json()).toMatchObject({
      detail: [{ loc: ["query", "message"], msg: "field required", type: "missing" }],
    });
    const unknown = await fetch(`${base}/api/health/queue/result/0123456789abcdef0123456789abcdef`);
    expect(unknown.status).toBe(404);
    const malformed = await fetch(`${base}/api/health/queue/result/${encodeURIComponent("../../etc")}`);
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({
      detail: expect.stringContaining("task_id"),
      request_id: expect.any(String),
    });
  });

  it("B-239 B-240 rate-limits the unauthenticated no-op with 429 and Retry-After", async () => {
    let limited: Response | undefined;
    for (let i = 0; i < 20 && !limited; i++) {
      const res = await fetch(`${base}/api/health/queue/enqueue-noop?message=x`, { method: "POST" });
      if (res.status === 429) limited = res;
      else expect(res.status).toBe(200);
    }
    expect(limited?.status).toBe(429);
    expect(Number(limited?.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("B-243 answers 503 naming storage when storage cannot be reached", async () => {
    const children = readFileSync(`/proc/${stack.info.pid}/task/${stack.info.pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    for (const pid of children) process.kill(pid, "SIGKILL");
    const res = await fetch(`${base}/api/health/ready`);
    expect(res.status).toBe(503);
    const body = (await res.json()) as { detail: string; request_id: string };
    expect(body.detail).toContain("storage");
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
  });
});
