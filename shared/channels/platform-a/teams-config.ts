import { z } from "zod";
import { normalizeObjectId } from "../../auth/object-id.js";
import { ConfigError, type Env, envEnum, envFlag, envInt, parseEnv } from "../../config/env.js";
import { SENDER_ACCESS_MODES, type SenderAccessMode } from "../inbound/types.js";
import { BOT_SERVICE_ISSUER, BOT_SERVICE_OPENID_METADATA_URL } from "./bot-service-keys.js";

/**
 * The inbound settings of chat platform A (Teams; issue 26, spec operator-console.md §2.6, §5 item
 * 7, §7 item 8, §8). Start-up fails before any traffic when the channel is enabled and the bot
 * identity, the tenant or the principal bindings are missing, malformed or unbounded, or when an
 * issuer or key-set override is not HTTPS.
 */

/** At most this many principal bindings (spec §8). */
export const MAX_PRINCIPAL_BINDINGS = 1000;

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const https = z
  .string()
  .refine((v) => URL.canParse(v) && new URL(v).protocol === "https:", "must be an https:// URL")
  .refine((v) => !URL.canParse(v) || (!new URL(v).username && !new URL(v).password), "must not carry credentials");
const guidList = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((x) => normalizeObjectId(x))
      .filter(Boolean),
  )
  .pipe(z.array(z.string().regex(GUID, "must be tenant id GUIDs, comma-separated")).max(50));

export const teamsInboundSettingsSchema = z.object({
  /** Turns the Teams conversation channel (`POST /api/messages`) on. */
  SVC_PLATFORM_A_CHANNEL_ENABLED: envFlag().default(false),
  /** Teams user object id (`from.aadObjectId`) → canonical principal object id; JSON, 1–1000 entries. */
  SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: z.string().optional(),
  /**
   * Who may talk to the bot (spec §5 item 8): `allowlist` (default) only bound senders; `pairing`
   * also unbound senders of an accepted tenant, who get a pairing challenge and nothing else until
   * an approver pairs them; `disabled` nobody.
   */
  SVC_PLATFORM_A_SENDER_ACCESS: envEnum(SENDER_ACCESS_MODES).default("allowlist"),
  /** Bot Service's OpenID metadata, whose `jwks_uri` is the key set (HTTPS; overridable for tests). */
  SVC_PLATFORM_A_OPENID_METADATA_URL: https.default(BOT_SERVICE_OPENID_METADATA_URL),
  /** The issuer Bot Service tokens must carry (HTTPS). */
  SVC_PLATFORM_A_TOKEN_ISSUER: https.default(BOT_SERVICE_ISSUER),
  /** Guest tenants whose users may use A2–A4 (never A1); comma-separated tenant ids. */
  SVC_PLATFORM_A_GUEST_TENANT_IDS: guidList.optional(),
  /**
   * The Entra authority host the bot's app token for replies comes from (HTTPS origin, the tenant is
   * appended); unset, the Agents SDK's default (`https://login.microsoftonline.com`).
   */
  SVC_PLATFORM_A_AUTHORITY_HOST: https
    .refine((u) => !URL.canParse(u) || (new URL(u).pathname === "/" && !new URL(u).search && !new URL(u).hash), {
      message: "must be an origin (https://host[:port]) without a path: the tenant is appended",
    })
    .transform((u) => new URL(u).origin)
    .optional(),
  /**
   * The local profile only: a PEM file of the certificate authority the Bot Service key set is
   * fetched with (`npm start` sets it for its own Bot Service–shaped issuer's certificate).
   */
  SVC_PLATFORM_A_OPENID_CA_FILE: z.string().trim().min(1).max(1024).optional(),
  /**
   * The local profile only: a PEM file of the certificate authority the replies' app token is
   * requested with from `SVC_PLATFORM_A_AUTHORITY_HOST` (`npm start` sets both for its own Entra
   * stand-in).
   */
  SVC_PLATFORM_A_AUTHORITY_CA_FILE: z.string().trim().min(1).max(1024).optional(),
  /**
   * The local profile only: `POST /api/messages` also accepts an activity without a Bot Service
   * token when the caller is this machine (loopback address and Host), the activity's
   * `serviceUrl` is the loopback Bot Connector on `SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT`
   * and its sender is `SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER` — the Microsoft 365 Agents Playground,
   * which cannot send a Bot Service token. The tenant and sender checks stay; replies to that
   * connector carry no app token. Start-up refuses it outside the local profile.
   */
  SVC_PLATFORM_A_LOCAL_ANONYMOUS: envFlag().default(false),
  /**
   * The local profile only, required with `SVC_PLATFORM_A_LOCAL_ANONYMOUS`: the one Teams user
   * object id (`from.aadObjectId`) a token-less activity may come from — the Playground's current
   * user. Its principal is what its binding (or, with pairing, its own pairing) gives; a token-less
   * activity naming any other sender is refused (401).
   */
  SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: z.string().trim().max(64).optional(),
  /**
   * The local profile only: the loopback port of the Bot Connector a token-less activity's reply
   * may go to (the Agents Playground's, default 56150); any other port is refused (401).
   */
  SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: envInt(1, 65_535).optional(),
  /**
   * The Azure Bot resource's OAuth connection for Teams single sign-on (its scope the API's
   * `user_impersonation`). Set, same-tenant approvers decide A1 from the Teams card through SSO
   * (`teams-sso.ts`); unset, an A1 decision from Teams bounces to the console.
   */
  SVC_PLATFORM_A_SSO_CONNECTION_NAME: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}$/, "letters, digits, space, dot, underscore or hyphen; at most 128")
    .optional(),
});

/** Every inbound Teams setting (the Functions app's `local.settings.sample.json` lists them). */
export const TEAMS_INBOUND_SETTING_NAMES: readonly string[] = Object.freeze(
  Object.keys(teamsInboundSettingsSchema.shape),
);

export interface TeamsInboundConfig {
  readonly botAppId: string;
  readonly tenantId: string;
  readonly guestTenantIds: readonly string[];
  readonly metadataUrl: string;
  readonly issuer: string;
  /** The Entra authority host of the reply token (an origin); undefined: the Agents SDK's default. */
  readonly authorityHost?: string | undefined;
  /** Normalized Teams object id → normalized canonical principal. */
  readonly bindings: ReadonlyMap<string, string>;
  /** `allowlist`: bound senders only; `pairing`: unbound senders reach the pairing challenge; `disabled`: nobody. */
  readonly senderAccess: SenderAccessMode;
  /** The OAuth connection of Teams SSO; undefined: A1 from Teams bounces to the console. */
  readonly ssoConnectionName?: string | undefined;
  /** The local profile: the CA file the Bot Service key set is fetched with. */
  readonly openIdCaFile?: string | undefined;
  /** The local profile: the CA file the replies' app token is requested with. */
  readonly authorityCaFile?: string | undefined;
  /** The local profile: token-less activities from this machine to a loopback Bot Connector (the Agents Playground). */
  readonly localAnonymous?: boolean;
  /** With {@link localAnonymous}: the only Teams user object id (normalized) a token-less activity may come from. */
  readonly localAnonymousUser?: string | undefined;
  /** With {@link localAnonymous}: the only loopback port a token-less activity's Bot Connector may listen on. */
  readonly localAnonymousConnectorPort?: number | undefined;
}

/** The Agents Playground's default port (`-p`, its Bot Connector `http://localhost:56150/_connector`). */
export const PLAYGROUND_DEFAULT_PORT = 56_150;

/**
 * Parses `SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON`: a non-empty JSON object of at most 1000 entries,
 * each a Teams user object id mapped to a canonical principal's object id (both GUIDs). Keys are
 * normalized like every object id comparison (`sameObjectId`), so two spellings of one id are a
 * duplicate, refused.
 */
export function parsePrincipalBindings(text: string | undefined): {
  bindings: Map<string, string>;
  problems: string[];
} {
  const name = "SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON";
  const bindings = new Map<string, string>();
  if (text === undefined || text.trim() === "")
    return { bindings, problems: [`${name}: is required when the chat platform A channel is enabled`] };
  if (text.length > 200_000) return { bindings, problems: [`${name}: is too long (at most 200,000 characters)`] };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { bindings, problems: [`${name}: is not valid JSON`] };
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return {
      bindings,
      problems: [`${name}: must be a JSON object mapping Teams user object ids to principal object ids`],
    };
  const entries = Object.entries(raw);
  if (entries.length === 0) return { bindings, problems: [`${name}: must not be empty`] };
  if (entries.length > MAX_PRINCIPAL_BINDINGS)
    return {
      bindings,
      problems: [`${name}: holds ${entries.length} entries; at most ${MAX_PRINCIPAL_BINDINGS} are allowed`],
    };
  const problems: string[] = [];
  for (const [key, value] of entries) {
    const k = normalizeObjectId(key);
    if (!GUID.test(k)) {
      problems.push(`${name}: key ${JSON.stringify(key.slice(0, 60))} is not an object id GUID`);
      continue;
    }
    if (typeof value !== "string" || !GUID.test(normalizeObjectId(value))) {
      problems.push(`${name}: the value of ${k} must be a principal object id GUID (a string)`);
      continue;
    }
    if (bindings.has(k)) {
      problems.push(`${name}: ${k} is bound twice`);
      continue;
    }
    bindings.set(k, normalizeObjectId(value));
  }
  return { bindings, problems };
}

/**
 * Reads the inbound Teams settings. Disabled (the default): undefined, and `POST /api/messages`
 * answers 404. Enabled: the bot app id and tenant (the outbound issue's `SVC_PLATFORM_A_BOT_APP_ID`,
 * `SVC_PLATFORM_A_TENANT_ID`) and valid bindings are required, or a {@link ConfigError} lists every
 * problem.
 */
export function loadTeamsInboundConfig(env: Env, options: { local?: boolean } = {}): TeamsInboundConfig | undefined {
  const c = parseEnv(teamsInboundSettingsSchema, env, (v) => v);
  const problems: string[] = [];
  // Local conveniences that would weaken a deployment: refused outside the local profile, enabled or not.
  if (!options.local) {
    if (c.SVC_PLATFORM_A_LOCAL_ANONYMOUS)
      problems.push(
        "SVC_PLATFORM_A_LOCAL_ANONYMOUS: token-less activities are for the local profile only (npm start); every deployed activity carries a Bot Service token",
      );
    if (c.SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER)
      problems.push(
        "SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: the token-less Playground user is for the local profile only",
      );
    if (c.SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT !== undefined)
      problems.push(
        "SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: the token-less Playground's connector is for the local profile only",
      );
    if (c.SVC_PLATFORM_A_OPENID_CA_FILE)
      problems.push(
        "SVC_PLATFORM_A_OPENID_CA_FILE: a private certificate authority for the Bot Service key set is for the local profile only",
      );
    if (c.SVC_PLATFORM_A_AUTHORITY_CA_FILE)
      problems.push(
        "SVC_PLATFORM_A_AUTHORITY_CA_FILE: a private certificate authority for the bot's app token is for the local profile only",
      );
    if (problems.length > 0) throw new ConfigError(problems);
  }
  if (!c.SVC_PLATFORM_A_CHANNEL_ENABLED) return undefined;
  const botAppId = normalizeObjectId(env.SVC_PLATFORM_A_BOT_APP_ID ?? "");
  const tenantId = normalizeObjectId(env.SVC_PLATFORM_A_TENANT_ID ?? "");
  if (!GUID.test(botAppId))
    problems.push(
      "SVC_PLATFORM_A_BOT_APP_ID: the bot's app id GUID is required when the chat platform A channel is enabled",
    );
  if (!GUID.test(tenantId))
    problems.push(
      "SVC_PLATFORM_A_TENANT_ID: the tenant id GUID is required when the chat platform A channel is enabled",
    );
  // Bindings are what an allowlist is; with pairing or disabled access they are optional.
  const bindingsRequired = c.SVC_PLATFORM_A_SENDER_ACCESS === "allowlist";
  const { bindings, problems: bindingProblems } =
    bindingsRequired || c.SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON !== undefined
      ? parsePrincipalBindings(c.SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON)
      : { bindings: new Map<string, string>(), problems: [] };
  problems.push(...bindingProblems);
  // Token-less activities act as exactly one configured Teams user, never as whoever the body names.
  const anonymousUser = normalizeObjectId(c.SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER ?? "");
  if (c.SVC_PLATFORM_A_LOCAL_ANONYMOUS && !GUID.test(anonymousUser))
    problems.push(
      "SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: with SVC_PLATFORM_A_LOCAL_ANONYMOUS, the one Teams user object id GUID token-less activities may come from (the Playground's currentUser.aadObjectId) is required",
    );
  const guests = c.SVC_PLATFORM_A_GUEST_TENANT_IDS ?? [];
  if (guests.includes(tenantId))
    problems.push(
      "SVC_PLATFORM_A_GUEST_TENANT_IDS: must not list SVC_PLATFORM_A_TENANT_ID (the home tenant is not a guest)",
    );
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    botAppId,
    tenantId,
    guestTenantIds: guests,
    metadataUrl: c.SVC_PLATFORM_A_OPENID_METADATA_URL,
    issuer: c.SVC_PLATFORM_A_TOKEN_ISSUER,
    authorityHost: c.SVC_PLATFORM_A_AUTHORITY_HOST,
    bindings,
    senderAccess: c.SVC_PLATFORM_A_SENDER_ACCESS,
    ssoConnectionName: c.SVC_PLATFORM_A_SSO_CONNECTION_NAME,
    openIdCaFile: c.SVC_PLATFORM_A_OPENID_CA_FILE,
    authorityCaFile: c.SVC_PLATFORM_A_AUTHORITY_CA_FILE,
    localAnonymous: c.SVC_PLATFORM_A_LOCAL_ANONYMOUS,
    ...(c.SVC_PLATFORM_A_LOCAL_ANONYMOUS
      ? {
          localAnonymousUser: anonymousUser,
          localAnonymousConnectorPort: c.SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT ?? PLAYGROUND_DEFAULT_PORT,
        }
      : {}),
  };
}
