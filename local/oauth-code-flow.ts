/**
 * The authorization code flow with PKCE (RFC 6749 §4.1, RFC 7636) of the development identity
 * provider, as Entra ID runs it for single-page apps: `/authorize` shows a small page to choose a
 * user and role and redirects back with a code; `/token` exchanges the code and the PKCE verifier
 * for tokens, with CORS for the app's origin. Codes are single-use, expire after a minute and are
 * bound to the client, the redirect URI and the S256 challenge; redirect URIs are an exact-match
 * allowlist, so a code never goes anywhere else.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { ROLES, type Role } from "../shared/auth/roles.js";

/** What a user chose on the sign-in page; the token endpoint mints tokens for it. */
export interface CodeGrant {
  clientId: string;
  role: Role;
  name: string;
  nonce: string | undefined;
  scope: string;
  /** When the user submitted the sign-in page (seconds since the epoch): the tokens' `auth_time`. */
  authTime: number;
}

/** The tokens of a successful exchange (RFC 6749 §5.1 fields). */
export interface IssuedTokens {
  accessToken: string;
  idToken: string;
  expiresInSeconds: number;
}

/** Options for {@link createCodeFlow}. */
export interface CodeFlowOptions {
  /** The only client allowed to sign in (the API's app registration, as one SPA + API registration). */
  clientId: string;
  /** The scope every sign-in must request: `api://<client id>/user_impersonation`. */
  requiredScope: string;
  /** Mints the access and ID tokens for a redeemed code. */
  issue(grant: CodeGrant): Promise<IssuedTokens>;
  /** How long a code stays redeemable. Default 60 s. */
  codeTtlSeconds?: number;
  /** Clock for tests. */
  now?: () => number;
}

/** The flow's endpoints; each answers the request itself. */
export interface CodeFlow {
  /** Adds a redirect URI (exact match, http(s), no fragment) to the allowlist. */
  allowRedirectUri(uri: string): void;
  /** The origins of the allowlisted redirect URIs: the only ones CORS admits. */
  allowedOrigins(): string[];
  /** `GET` shows the sign-in page (or refuses `prompt=none`); `POST` issues the code. */
  authorize(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void>;
  /** `POST` exchanges a code and its PKCE verifier for tokens. */
  token(req: IncomingMessage, res: ServerResponse): Promise<void>;
  /** `GET` ends the session (there is none to keep) and returns to an allowlisted URI. */
  logout(req: IncomingMessage, res: ServerResponse, url: URL): void;
  /**
   * Adds CORS headers for an allowlisted origin; answers a preflight (`OPTIONS`) itself.
   * Returns true when the request was a preflight and has been answered.
   */
  cors(req: IncomingMessage, res: ServerResponse): boolean;
}

const MAX_FORM_BYTES = 64 * 1024;
const MAX_PENDING_CODES = 1000;
const DEFAULT_NAME = "Local Developer";
/** Scopes a sign-in may add to the API scope (OpenID Connect's own). */
const OIDC_SCOPES = new Set(["openid", "profile", "offline_access", "email"]);
/** PKCE verifier: 43–128 unreserved characters (RFC 7636 §4.1); the S256 challenge is 43 base64url characters. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const ROLE_HELP: Readonly<Record<Role, string>> = {
  Reader: "views jobs, results, databases and settings",
  Contributor: "also submits and cancels searches, saves the workspace, prepares and warms databases",
  Approver: "also approves operator actions",
  Owner: "also reveals and regenerates the job API's token",
};

const authorizeSchema = z.object({
  response_type: z.literal("code", { error: "response_type must be code (the implicit grant is not offered)" }),
  scope: z.string().min(1).max(2000),
  state: z.string().max(4000).optional(),
  nonce: z.string().max(500).optional(),
  code_challenge: z.string().regex(CHALLENGE, "code_challenge must be an S256 challenge (43 base64url characters)"),
  code_challenge_method: z.literal("S256", { error: "code_challenge_method must be S256" }),
  response_mode: z.enum(["query", "fragment"]).default("query"),
  prompt: z.string().max(100).optional(),
});

const signInSchema = z.object({
  role: z.enum(ROLES),
  name: z
    .string()
    .trim()
    .min(1, "enter a name")
    .max(200)
    .refine(
      (v) => ![...v].some((c) => c.charCodeAt(0) < 32 || (c.charCodeAt(0) >= 127 && c.charCodeAt(0) < 160)),
      "the name has control characters",
    ),
});

const tokenSchema = z.object({
  grant_type: z.literal("authorization_code", { error: "grant_type must be authorization_code" }),
  code: z.string().min(1).max(200),
  redirect_uri: z.string().min(1).max(2000),
  client_id: z.string().min(1).max(200),
  code_verifier: z.string().regex(VERIFIER, "code_verifier must be 43-128 unreserved characters"),
});

interface PendingCode extends CodeGrant {
  redirectUri: string;
  codeChallenge: string;
  expiresAt: number;
}

/** Creates the flow for one client; the redirect allowlist starts empty. */
export function createCodeFlow(options: CodeFlowOptions): CodeFlow {
  const now = options.now ?? Date.now;
  const ttlMs = (options.codeTtlSeconds ?? 60) * 1000;
  const redirectUris = new Set<string>();
  const codes = new Map<string, PendingCode>();

  function allowedOrigins(): string[] {
    return [...new Set([...redirectUris].map((u) => new URL(u).origin))];
  }

  /** Client and redirect URI first: until both are known-good, errors are shown, never redirected. */
  function checkClient(params: URLSearchParams): { redirectUri: string } | { error: string } {
    const clientId = params.get("client_id");
    const redirectUri = params.get("redirect_uri");
    if (clientId !== options.clientId) return { error: `unknown client_id '${clientId ?? ""}'` };
    if (!redirectUri || !redirectUris.has(redirectUri))
      return { error: `redirect_uri '${redirectUri ?? ""}' is not registered for this client` };
    return { redirectUri };
  }

  function redirectWith(
    res: ServerResponse,
    redirectUri: string,
    mode: "query" | "fragment",
    fields: Record<string, string | undefined>,
  ): void {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(fields)) if (value !== undefined) params.set(key, value);
    const target =
      mode === "fragment"
        ? `${redirectUri}#${params}`
        : `${redirectUri}${redirectUri.includes("?") ? "&" : "?"}${params}`;
    res.writeHead(302, { location: target, "cache-control": "no-store" });
    res.end();
  }

  function issueCode(grant: CodeGrant, redirectUri: string, codeChallenge: string): string {
    const t = now();
    if (codes.size >= MAX_PENDING_CODES) {
      for (const [key, pending] of codes) if (pending.expiresAt <= t) codes.delete(key);
      // Still full: the oldest goes (a Map iterates in insertion order).
      if (codes.size >= MAX_PENDING_CODES) codes.delete(codes.keys().next().value as string);
    }
    const code = randomBytes(32).toString("base64url");
    codes.set(code, { ...grant, redirectUri, codeChallenge, expiresAt: t + ttlMs });
    return code;
  }

  async function authorize(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    if (req.method !== "GET" && req.method !== "POST") {
      sendText(res, 405, "method not allowed", { allow: "GET, POST" });
      return;
    }
    const params = req.method === "POST" ? await readForm(req) : url.searchParams;
    if (params === undefined) {
      sendPage(res, 413, "Request too large", "<p>The sign-in form was too large.</p>", []);
      return;
    }
    const client = checkClient(params);
    if ("error" in client) {
      sendPage(res, 400, "Sign-in refused", `<p>${escapeHtml(client.error)}.</p>`, []);
      return;
    }
    const parsed = authorizeSchema.safeParse(Object.fromEntries(params));
    const state = params.get("state") ?? undefined;
    const mode = params.get("response_mode") === "fragment" ? "fragment" : "query";
    if (!parsed.success) {
      redirectWith(res, client.redirectUri, mode, {
        error: "invalid_request",
        error_description: describe(parsed.error),
        state,
      });
      return;
    }
    const request = parsed.data;
    const scopes = request.scope.split(" ").filter(Boolean);
    const unknown = scopes.filter((s) => s !== options.requiredScope && !OIDC_SCOPES.has(s));
    if (!scopes.includes(options.requiredScope) || unknown.length > 0) {
      redirectWith(res, client.redirectUri, mode, {
        error: "invalid_scope",
        error_description: `request the scope ${options.requiredScope} (and only OpenID scopes besides it)`,
        state,
      });
      return;
    }
    if (req.method === "GET") {
      // No session is kept here, so a silent renewal always needs the user.
      if (request.prompt === "none") {
        redirectWith(res, client.redirectUri, mode, {
          error: "login_required",
          error_description: "sign in again",
          state,
        });
        return;
      }
      sendPage(res, 200, "Sign in to blastplane (local)", signInForm(url.pathname, params), allowedOrigins());
      return;
    }
    const chosen = signInSchema.safeParse({
      role: params.get("role") ?? undefined,
      name: params.get("name") ?? DEFAULT_NAME,
    });
    if (!chosen.success) {
      sendPage(res, 400, "Sign-in refused", `<p>${escapeHtml(describe(chosen.error))}.</p>`, []);
      return;
    }
    const code = issueCode(
      {
        clientId: options.clientId,
        role: chosen.data.role,
        name: chosen.data.name,
        nonce: request.nonce,
        scope: scopes.join(" "),
        authTime: Math.floor(now() / 1000),
      },
      client.redirectUri,
      request.code_challenge,
    );
    redirectWith(res, client.redirectUri, mode, { code, state });
  }

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST") {
      sendOAuthError(res, 405, "invalid_request", "use POST");
      return;
    }
    const mediaType = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
    if (mediaType !== "application/x-www-form-urlencoded") {
      sendOAuthError(res, 400, "invalid_request", "content-type must be application/x-www-form-urlencoded");
      return;
    }
    const params = await readForm(req);
    if (params === undefined) {
      sendOAuthError(res, 413, "invalid_request", "request body too large");
      return;
    }
    const parsed = tokenSchema.safeParse(Object.fromEntries(params));
    if (!parsed.success) {
      sendOAuthError(
        res,
        400,
        params.get("grant_type") === "authorization_code" ? "invalid_request" : "unsupported_grant_type",
        describe(parsed.error),
      );
      return;
    }
    const request = parsed.data;
    // Single use: the code is gone from here on, whatever the outcome.
    const pending = codes.get(request.code);
    codes.delete(request.code);
    if (!pending || pending.expiresAt <= now()) {
      sendOAuthError(res, 400, "invalid_grant", "the authorization code is unknown, already used or expired");
      return;
    }
    if (pending.clientId !== request.client_id || pending.redirectUri !== request.redirect_uri) {
      sendOAuthError(res, 400, "invalid_grant", "the code was issued to another client or redirect_uri");
      return;
    }
    const challenge = Buffer.from(createHash("sha256").update(request.code_verifier, "ascii").digest("base64url"));
    const expected = Buffer.from(pending.codeChallenge);
    if (challenge.length !== expected.length || !timingSafeEqual(challenge, expected)) {
      sendOAuthError(res, 400, "invalid_grant", "code_verifier does not match the code_challenge");
      return;
    }
    const tokens = await options.issue(pending);
    sendJson(res, 200, {
      token_type: "Bearer",
      scope: pending.scope,
      expires_in: tokens.expiresInSeconds,
      ext_expires_in: tokens.expiresInSeconds,
      access_token: tokens.accessToken,
      id_token: tokens.idToken,
    });
  }

  function logout(req: IncomingMessage, res: ServerResponse, url: URL): void {
    if (req.method !== "GET") {
      sendText(res, 405, "method not allowed", { allow: "GET" });
      return;
    }
    const target = url.searchParams.get("post_logout_redirect_uri");
    if (target && redirectUris.has(target)) {
      res.writeHead(302, { location: target, "cache-control": "no-store" });
      res.end();
      return;
    }
    sendPage(res, 200, "Signed out", "<p>You are signed out. Close this tab, or open the dashboard again.</p>", []);
  }

  function cors(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = req.headers.origin;
    const allowed = origin !== undefined && allowedOrigins().includes(origin);
    if (allowed) {
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("vary", "Origin");
    }
    if (req.method !== "OPTIONS") return false;
    if (!allowed) {
      sendText(res, 403, "origin not allowed");
      return true;
    }
    const requested = req.headers["access-control-request-headers"];
    res.writeHead(204, {
      "access-control-allow-methods": "GET, POST, OPTIONS",
      // Echo the requested header names when they are plain names (MSAL adds its telemetry headers).
      ...(typeof requested === "string" && /^[A-Za-z0-9-]+(?:\s*,\s*[A-Za-z0-9-]+)*$/.test(requested)
        ? { "access-control-allow-headers": requested }
        : {}),
      "access-control-max-age": "600",
    });
    res.end();
    return true;
  }

  return {
    allowRedirectUri(uri) {
      const parsed = new URL(uri);
      if (
        (parsed.protocol !== "http:" && parsed.protocol !== "https:") ||
        parsed.hash !== "" ||
        parsed.username !== ""
      ) {
        throw new TypeError(`redirect URI must be an http(s) URL without fragment or credentials: ${uri}`);
      }
      redirectUris.add(uri);
    },
    allowedOrigins,
    authorize,
    token,
    logout,
    cors,
  };
}

function signInForm(action: string, params: URLSearchParams): string {
  const carried = [
    "client_id",
    "redirect_uri",
    "response_type",
    "scope",
    "state",
    "nonce",
    "code_challenge",
    "code_challenge_method",
    "response_mode",
  ]
    .filter((key) => params.has(key))
    .map((key) => `<input type="hidden" name="${key}" value="${escapeHtml(params.get(key) ?? "")}">`)
    .join("\n      ");
  const roles = ROLES.map(
    (role, i) => `<label class="role"><input type="radio" name="role" value="${role}"${i === 1 ? " checked" : ""}>
          <span><strong>${role}</strong> <span class="help">${ROLE_HELP[role]}</span></span></label>`,
  ).join("\n        ");
  return `<p class="lead">This is the local stack's development identity provider. Choose who you are and the role your session gets; in Azure, Microsoft Entra ID signs you in instead.</p>
    <form method="post" action="${escapeHtml(action)}">
      ${carried}
      <label for="name">Your name</label>
      <input id="name" name="name" type="text" value="${DEFAULT_NAME}" maxlength="200" autocomplete="name" required>
      <fieldset>
        <legend>Role</legend>
        ${roles}
      </fieldset>
      <button type="submit">Sign in</button>
    </form>`;
}

const PAGE_STYLE = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:0;background:#f1f5f9;color:#0f172a;line-height:1.5}
main{max-width:34rem;margin:2rem auto;background:#fff;border:1px solid #cbd5e1;border-radius:10px;padding:1.25rem 1.5rem}
h1{font-size:1.4rem;margin:0 0 .5rem}.lead{color:#475569}label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input[type=text]{font:inherit;width:100%;box-sizing:border-box;padding:.45rem .6rem;border:1px solid #64748b;border-radius:6px}
fieldset{border:1px solid #cbd5e1;border-radius:8px;margin:1rem 0;padding:.5rem 1rem}legend{font-weight:600}
.role{display:flex;gap:.6rem;font-weight:400;margin:.5rem 0}.help{color:#475569}
button{font:inherit;background:#0b5cad;color:#fff;border:1px solid #0b5cad;border-radius:6px;padding:.5rem 1.2rem;cursor:pointer}
:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}@media (max-width:600px){main{margin:.5rem;padding:1rem}}`;

/** An HTML page; `formTargets` are the origins the form may redirect to (CSP form-action covers redirects). */
function sendPage(res: ServerResponse, status: number, title: string, body: string, formTargets: string[]): void {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head>
<body><main><h1>${escapeHtml(title)}</h1>
    ${body}
</main></body></html>`;
  const csp = `default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ${formTargets.join(" ")}; frame-ancestors 'none'; base-uri 'none'`;
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    "content-security-policy": csp,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
  });
  res.end(html);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    pragma: "no-cache",
  });
  res.end(text);
}

function sendOAuthError(res: ServerResponse, status: number, error: string, description: string): void {
  sendJson(res, status, { error, error_description: description });
}

function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/** A form-urlencoded body, or undefined when it exceeds the limit. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  if (Number(req.headers["content-length"] ?? "0") > MAX_FORM_BYTES) {
    req.resume();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) {
      req.resume();
      return undefined;
    }
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

function describe(error: z.ZodError): string {
  return error.issues.map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ");
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
