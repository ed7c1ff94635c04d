import { decodeProtectedHeader, importJWK, type JWTPayload, jwtVerify } from "jose";
import { z } from "zod";
import { normalizeObjectId, sameObjectId } from "../../auth/object-id.js";
import { ForbiddenError, UnauthorizedError, ValidationError } from "../../errors.js";
import { isLoopbackUrl } from "../../http/loopback-host.js";
import { zodIssues } from "../../http/validation.js";
import type { NotificationCategory } from "../../notify/types.js";
import type { BotServiceKeySet } from "./bot-service-keys.js";
import type { TeamsInboundConfig } from "./teams-config.js";

/**
 * Chat platform A (Teams) inbound verification, spec operator-console.md §5 item 7, in its order:
 * the Bot Service token (before the body is read), then the activity against the verified identity,
 * then the tenant, then the sender's principal binding. Token failures are 401
 * ({@link UnauthorizedError}); an unknown tenant or sender is 403 ({@link ForbiddenError}); neither
 * reaches the channel queue.
 */

/** The only channel this endpoint serves. */
export const TEAMS_CHANNEL_ID = "msteams";
/** Bot Framework's allowed clock skew for Bot Service tokens. */
export const CLOCK_TOLERANCE_SECONDS = 300;
/** An activity's body limit: Teams messages are at most about 28 KB; cards and entities add some. */
export const ACTIVITY_BODY_LIMIT_BYTES = 256 * 1024;
/** The deepest nesting an activity's free-form fields (`value`, `channelData`, `entities`) may have. */
export const MAX_ACTIVITY_DEPTH = 32;

/** The claims of a verified Bot Service token. */
export interface BotServiceIdentity {
  /** The `serviceurl` claim: the Bot Connector endpoint this activity's replies go to. */
  serviceUrl: string;
  issuer: string;
  audience: string;
  claims: JWTPayload;
}

const id = (max: number) => z.string().min(1).max(max);

/** The fields of an activity the service reads; unknown fields are kept (the Agents SDK reads them) but bounded by size and depth. */
export const teamsActivitySchema = z.looseObject({
  type: id(64),
  id: id(256).optional(),
  channelId: id(64),
  serviceUrl: id(2048),
  timestamp: z.string().max(64).optional(),
  from: z.looseObject({
    id: id(512),
    name: z.string().max(512).optional(),
    aadObjectId: z.string().max(64).optional(),
  }),
  recipient: z.looseObject({ id: id(512), name: z.string().max(512).optional() }).optional(),
  conversation: z.looseObject({
    id: id(1024),
    tenantId: z.string().max(64).optional(),
    conversationType: z.string().max(64).optional(),
  }),
  channelData: z.looseObject({ tenant: z.looseObject({ id: z.string().max(64).optional() }).optional() }).optional(),
  text: z.string().max(28_000).optional(),
  replyToId: z.string().max(256).optional(),
  attachments: z
    .array(z.looseObject({ contentType: z.string().max(256).optional() }))
    .max(10)
    .optional(),
});
export type TeamsActivity = z.output<typeof teamsActivitySchema>;

/** A Teams activity that passed every check, with its sender's canonical principal. */
export interface VerifiedTeamsActivity {
  activity: TeamsActivity;
  identity: BotServiceIdentity;
  /**
   * The canonical principal (object id) the sender is bound to; the vendor id is not used past
   * here. Undefined only with `SVC_PLATFORM_A_SENDER_ACCESS=pairing`: an unbound sender, whom the
   * channel's sender access answers with a pairing challenge (or its approved pairing) and who never
   * reaches the coordinator otherwise.
   */
  principal: string | undefined;
  /** `same_tenant`: A1–A4; `guest`: A2–A4 (spec §5 item 4). */
  trust: "same_tenant" | "guest";
  /**
   * Accepted without a Bot Service token (`SVC_PLATFORM_A_LOCAL_ANONYMOUS`, local profile, a caller
   * on this machine, a loopback Bot Connector): its reply carries no app token and its conversation
   * is never kept for notifications.
   */
  anonymous?: true;
  categories: readonly NotificationCategory[];
  tenantId: string;
}

/** The depth of a JSON value, walked without recursion (a 256 KB body of `[` is 262,144 levels). */
export function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop() as [unknown, number];
    if (d > deepest) deepest = d;
    if (deepest > limit) return deepest;
    if (v !== null && typeof v === "object")
      for (const child of Object.values(v as Record<string, unknown>)) stack.push([child, d + 1]);
  }
  return deepest;
}

/** A service URL compared by scheme, host (case-insensitively), port and path without trailing slashes. */
function sameServiceUrl(a: string, b: string): boolean {
  if (!URL.canParse(a) || !URL.canParse(b)) return false;
  const norm = (u: URL) => `${u.protocol}//${u.host.toLowerCase()}${u.pathname.replace(/\/+$/, "")}`;
  return norm(new URL(a)) === norm(new URL(b));
}

/**
 * The Bot Service token and activity verifier. `allowLoopbackHttp` (the local profile only) lets a
 * local Bot Connector on `http://127.0.0.1` be a service URL; everywhere else it must be HTTPS.
 */
export function createTeamsVerifier(
  config: TeamsInboundConfig,
  deps: { keys: BotServiceKeySet; now?: () => Date; allowLoopbackHttp?: boolean },
) {
  const imported = new Map<string, CryptoKey | Uint8Array>();

  /** Step 1: the `Authorization: Bearer` Bot Service token, before the body is read. */
  async function verifyToken(authorization: string | null | undefined): Promise<BotServiceIdentity> {
    const token = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/.exec(authorization?.trim() ?? "")?.[1];
    if (!token) throw new UnauthorizedError("a Bot Service bearer token is required");
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new UnauthorizedError("the Bot Service token is malformed");
    }
    // Decided by the server, never by the token: RS256 only (no HS256 with the public key, no `none`).
    if (header.alg !== "RS256") throw new UnauthorizedError("the Bot Service token must be signed with RS256");
    if (typeof header.kid !== "string" || header.kid.length === 0 || header.kid.length > 200)
      throw new UnauthorizedError("the Bot Service token names no signing key");
    const jwk = await deps.keys.get(header.kid);
    if (!jwk) throw new UnauthorizedError("the Bot Service token's signing key is not in the key set");
    // Bot Framework: a key is valid for the channels that endorse it.
    if (jwk.endorsements && !jwk.endorsements.includes(TEAMS_CHANNEL_ID))
      throw new UnauthorizedError("the signing key is not endorsed for this channel");
    let key = imported.get(header.kid);
    if (!key) {
      key = await importJWK({ kty: "RSA", n: jwk.n, e: jwk.e }, "RS256");
      imported.set(header.kid, key);
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: ["RS256"],
        issuer: config.issuer,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ["exp", "iss", "aud"],
        ...(deps.now ? { currentDate: deps.now() } : {}),
      }));
    } catch {
      // Which check failed stays in the server's log, not the answer.
      throw new UnauthorizedError("the Bot Service token is not valid");
    }
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    // Only the bot's app id: the Agents SDK also accepts `https://api.botframework.com` (spec §5 item 7 does not).
    const audience = audiences.find((a) => sameObjectId(a, config.botAppId));
    if (!audience) throw new UnauthorizedError("the Bot Service token is not for this bot");
    const serviceUrl = payload.serviceurl;
    if (typeof serviceUrl !== "string" || !URL.canParse(serviceUrl))
      throw new UnauthorizedError("the Bot Service token carries no service URL");
    const u = new URL(serviceUrl);
    if (u.protocol !== "https:" && !(deps.allowLoopbackHttp && u.protocol === "http:" && isLoopbackUrl(u)))
      throw new UnauthorizedError("the Bot Service token's service URL is not HTTPS");
    return { serviceUrl, issuer: String(payload.iss), audience, claims: payload };
  }

  /**
   * Steps 2–4 on the parsed body: the activity's shape, its service URL and channel against the
   * verified identity (401), its tenant (403) and its sender's binding (403).
   */
  function verifyActivity(identity: BotServiceIdentity, body: unknown): VerifiedTeamsActivity {
    const parsed = teamsActivitySchema.safeParse(body);
    if (!parsed.success) throw new ValidationError(zodIssues(parsed.error, "body", body));
    if (jsonDepth(body, MAX_ACTIVITY_DEPTH) > MAX_ACTIVITY_DEPTH)
      throw new ValidationError([
        { loc: ["body"], msg: `nested deeper than ${MAX_ACTIVITY_DEPTH} levels`, type: "value_error" },
      ]);
    const activity = parsed.data;
    if (!sameServiceUrl(activity.serviceUrl, identity.serviceUrl))
      throw new UnauthorizedError("the activity's service URL does not match the verified service identity");
    if (activity.channelId !== TEAMS_CHANNEL_ID)
      throw new UnauthorizedError("the activity's channel does not match the verified service identity");
    const tenants = [activity.conversation.tenantId, activity.channelData?.tenant?.id].filter(
      (t): t is string => typeof t === "string" && t.length > 0,
    );
    const tenant = tenants[0] !== undefined ? normalizeObjectId(tenants[0]) : undefined;
    if (!tenant || tenants.some((t) => !sameObjectId(t, tenant)))
      throw new ForbiddenError("the activity's tenant is not accepted");
    const trust = sameObjectId(tenant, config.tenantId)
      ? "same_tenant"
      : config.guestTenantIds.some((g) => sameObjectId(g, tenant))
        ? "guest"
        : undefined;
    if (!trust) throw new ForbiddenError("the activity's tenant is not accepted");
    if (config.senderAccess === "disabled") throw new ForbiddenError("sender access to this channel is disabled");
    const sender = activity.from.aadObjectId;
    const principal = sender ? config.bindings.get(normalizeObjectId(sender)) : undefined;
    // Pairing: an unbound sender with a directory object id goes on, to be challenged (spec §5 item 8).
    if (!principal && !(config.senderAccess === "pairing" && sender))
      throw new ForbiddenError("the sender has no principal binding");
    return {
      activity,
      identity,
      principal,
      trust,
      categories: trust === "same_tenant" ? ["A1", "A2", "A3", "A4"] : ["A2", "A3", "A4"],
      tenantId: tenant,
    };
  }

  /**
   * A token-less activity (`SVC_PLATFORM_A_LOCAL_ANONYMOUS`; the caller is checked by the route):
   * its `serviceUrl` must be the configured Bot Connector port on this machine (the Playground's),
   * so the reply cannot be sent anywhere else, and its sender must be the one configured local
   * user (`SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER`) — a token-less body cannot name its way into any
   * other binding or pairing. Then the same activity, tenant and sender checks as a verified one.
   */
  function verifyLocalAnonymousActivity(body: unknown): VerifiedTeamsActivity {
    const raw = (typeof body === "object" && body !== null ? body : {}) as {
      serviceUrl?: unknown;
      from?: { aadObjectId?: unknown } | null;
    };
    const serviceUrl = raw.serviceUrl;
    const connector = typeof serviceUrl === "string" && URL.canParse(serviceUrl) ? new URL(serviceUrl) : undefined;
    const port = connector ? Number(connector.port || (connector.protocol === "https:" ? 443 : 80)) : undefined;
    if (
      !connector ||
      !["http:", "https:"].includes(connector.protocol) ||
      !isLoopbackUrl(connector) ||
      config.localAnonymousConnectorPort === undefined ||
      port !== config.localAnonymousConnectorPort
    )
      throw new UnauthorizedError(
        "a token-less activity must name the local Bot Connector (loopback, SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT)",
      );
    const sender = raw.from?.aadObjectId;
    if (
      config.localAnonymousUser === undefined ||
      typeof sender !== "string" ||
      !sameObjectId(sender, config.localAnonymousUser)
    )
      throw new UnauthorizedError(
        "a token-less activity may come only from the local user (SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER); any other sender needs a Bot Service token",
      );
    const identity: BotServiceIdentity = {
      serviceUrl: serviceUrl as string,
      issuer: "local-anonymous",
      audience: config.botAppId,
      claims: {},
    };
    return { ...verifyActivity(identity, body), anonymous: true };
  }

  return { verifyToken, verifyActivity, verifyLocalAnonymousActivity };
}
