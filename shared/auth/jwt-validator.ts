/**
 * Bearer access-token validation for Entra ID and for the local development identity provider.
 * Both publish an OpenID discovery document and a JWKS, so the same code serves both.
 */
import {
  createRemoteJWKSet,
  customFetch,
  type FetchImplementation,
  type JWTPayload,
  errors as joseErrors,
  jwtVerify,
} from "jose";
import { z } from "zod";
import { UnauthorizedError, DependencyUnavailableError } from "../errors.js";
import { type Caller, type Role, isRole } from "./roles.js";

/** Options for {@link createJwtValidator}. */
export interface JwtValidatorOptions {
  /** OpenID discovery document, e.g. {@link entraDiscoveryUrl}. */
  discoveryUrl: string;

  /**
   * Accepted audiences: the API's Application ID URI, {@link apiAudience} (spec §5 browser item 2).
   * Never the bare client id: that is the audience of the app's ID tokens.
   */
  audience: string | string[];
  /**
   * Delegated scope an access token must carry in `scp` unless it carries an app role in `roles`.
   * Default {@link API_SCOPE}. ID tokens carry neither, so they are refused even with a matching audience.
   */
  requiredScope?: string;
  /** Required `iss` value; defaults to the `issuer` of the discovery document. */
  issuer?: string;
  /** Allowed clock skew for `exp` and `nbf`, in seconds. Default 60. */
  clockToleranceSeconds?: number;
  /** Fetch used for the discovery document and the JWKS (tests count or fake requests with it). */
  fetchImpl?: typeof fetch;
}

/** Validates `Authorization` header values and returns the caller they authenticate. */
export interface JwtValidator {
  /**
   * Resolves to the caller for a valid `Bearer <token>` header. Rejects with `UnauthorizedError`
   * (401) for a missing, malformed, unsigned, mis-signed, expired, not-yet-valid, foreign-issuer or
   * foreign-audience token, and with `DependencyUnavailableError` (503) when the discovery document
   * or the signing keys cannot be fetched, since the token itself may well be valid.
   */
  validate(authorizationHeader: string | null | undefined): Promise<Caller>;
}

/** Discovery document of an Entra tenant (v2.0 endpoints). */
export function entraDiscoveryUrl(tenantId: string): string {
  return `https://login.microsoftonline.com/${encodeURIComponent(tenantId)}/v2.0/.well-known/openid-configuration`;
}

/** Application ID URI of the API app registration, used as the token audience. */
export function apiAudience(clientId: string): string {
  return `api://${clientId}`;
}

/** The delegated scope the web app and the CLI request: `api://<client_id>/user_impersonation`. */
export const API_SCOPE = "user_impersonation";

const DEFAULT_CLOCK_TOLERANCE_SECONDS = 60;
const FETCH_TIMEOUT_MS = 5_000;

const discoverySchema = z.object({
  issuer: z.string().min(1),
  jwks_uri: z.string().min(1),
});

const jwksSchema = z.object({ keys: z.array(z.object({ kty: z.string() })) });

interface ResolvedConfig {
  issuer: string;
  jwks: ReturnType<typeof createRemoteJWKSet>;
}

/**
 * Builds a validator for RS256 access tokens. The discovery document is fetched on first use and
 * cached for the validator's lifetime (a failed fetch is retried on the next call); jose caches the
 * JWKS and refetches it, subject to its cooldown, when a token names an unknown `kid`.
 */
export function createJwtValidator(options: JwtValidatorOptions): JwtValidator {
  const clockTolerance = options.clockToleranceSeconds ?? DEFAULT_CLOCK_TOLERANCE_SECONDS;
  if (!Number.isFinite(clockTolerance) || clockTolerance < 0) {
    throw new TypeError("clockToleranceSeconds must be a non-negative finite number");
  }
  if (options.audience.length === 0) throw new TypeError("audience must not be empty");
  const discoveryUrl = new URL(options.discoveryUrl);
  const fetchImpl = options.fetchImpl ?? fetch;
  const requiredScope = options.requiredScope ?? API_SCOPE;
  let config: Promise<ResolvedConfig> | undefined;

  function resolveConfig(): Promise<ResolvedConfig> {
    if (config === undefined) {
      const pending = loadConfig(discoveryUrl, options.issuer, fetchImpl);
      config = pending;
      // Do not cache a failure: the next request retries discovery.
      pending.catch(() => {
        if (config === pending) config = undefined;
      });
    }
    return config;
  }

  return {
    async validate(authorizationHeader) {
      const token = bearerToken(authorizationHeader);
      const { issuer, jwks } = await resolveConfig();
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, jwks, {
          algorithms: ["RS256"],
          issuer,
          audience: options.audience,
          clockTolerance,
          requiredClaims: ["exp"],
        }));
      } catch (err) {
        if (err instanceof DependencyUnavailableError) throw err;
        if (err instanceof joseErrors.JWTExpired) throw new UnauthorizedError("bearer token expired");
        // Fail closed: anything else (jose error or otherwise) means the token is not accepted.
        throw new UnauthorizedError("invalid bearer token");
      }
      if (!isAccessTokenForApi(payload, requiredScope)) {
        throw new UnauthorizedError("bearer token is not an access token for this API");
      }
      return toCaller(payload);
    },
  };
}

function bearerToken(header: string | null | undefined): string {
  if (header === undefined || header === null || header.trim() === "") throw new UnauthorizedError();
  const match = /^\s*Bearer +(\S+)\s*$/i.exec(header);
  const token = match?.[1];
  if (token === undefined) throw new UnauthorizedError("bearer token required");
  return token;
}

/**
 * The purpose check: an access token for this API carries the delegated scope in `scp` (a
 * space-separated list) or at least one app role in `roles` (application permissions). An ID token
 * carries neither, whatever its audience.
 */
function isAccessTokenForApi(payload: JWTPayload, requiredScope: string): boolean {
  const { scp, roles } = payload;
  if (typeof scp === "string" && scp.split(" ").includes(requiredScope)) return true;
  return Array.isArray(roles) && roles.some((role) => typeof role === "string" && role.length > 0);
}

function toCaller(payload: JWTPayload): Caller {
  const { oid, name, preferred_username: preferredUsername, tid, roles, auth_time: authTime } = payload;
  if (typeof oid !== "string" || oid.length === 0) throw new UnauthorizedError("invalid bearer token");
  const known: Role[] = Array.isArray(roles) ? roles.filter(isRole) : [];
  return {
    oid,
    name: typeof name === "string" ? name : typeof preferredUsername === "string" ? preferredUsername : "",
    tenant_id: typeof tid === "string" ? tid : "",
    roles: [...new Set(known)],
    auth_time: typeof authTime === "number" && Number.isFinite(authTime) ? authTime : null,
  };
}

async function loadConfig(
  discoveryUrl: URL,
  issuerOverride: string | undefined,
  fetchImpl: typeof fetch,
): Promise<ResolvedConfig> {
  const unavailable = new DependencyUnavailableError("identity provider discovery document unavailable");
  let body: unknown;
  try {
    const response = await fetchImpl(discoveryUrl, {
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    });
    if (response.status !== 200) throw unavailable;
    body = await response.json();
  } catch {
    throw unavailable;
  }
  const parsed = discoverySchema.safeParse(body);
  if (!parsed.success) throw unavailable;
  let jwksUrl: URL;
  try {
    jwksUrl = new URL(parsed.data.jwks_uri);
  } catch {
    throw unavailable;
  }
  const allowedProtocols = discoveryUrl.protocol === "https:" ? ["https:"] : ["https:", "http:"];
  if (!allowedProtocols.includes(jwksUrl.protocol)) throw unavailable;
  return {
    issuer: issuerOverride ?? parsed.data.issuer,
    jwks: createRemoteJWKSet(jwksUrl, {
      timeoutDuration: FETCH_TIMEOUT_MS,
      [customFetch]: upstreamGuardedFetch(fetchImpl),
    }),
  };
}

/**
 * jose reports an unreachable or broken JWKS endpoint as a generic JOSEError, indistinguishable
 * from a bad token; this wrapper turns those cases into DependencyUnavailableError (503) first.
 */
function upstreamGuardedFetch(fetchImpl: typeof fetch): FetchImplementation {
  return async (url, init) => {
    const unavailable = new DependencyUnavailableError("identity provider signing keys unavailable");
    let text: string;
    try {
      const response = await fetchImpl(url, init);
      if (response.status !== 200) throw unavailable;
      text = await response.text();
    } catch {
      throw unavailable;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw unavailable;
    }
    if (!jwksSchema.safeParse(json).success) throw unavailable;
    return new Response(text, { status: 200, headers: { "content-type": "application/json" } });
  };
}
