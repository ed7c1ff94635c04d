import { z } from "zod";
import { isRole, type Role } from "../auth/roles.js";
import { ConfigError, type Env, envEnum, envFlag, envInt, envParsed, envUrl, parseEnv } from "../config/env.js";
import type { GitHostSettings } from "./inbound/git-drafts.js";
import { SENDER_ACCESS_MODES, type SenderAccessMode } from "./inbound/types.js";
import {
  loadTeamsInboundConfig,
  TEAMS_INBOUND_SETTING_NAMES,
  type TeamsInboundConfig,
} from "./platform-a/teams-config.js";
import { parseWebhookSettings, type WebhookSettings } from "./webhooks/webhook-inbound.js";

/**
 * The inbound conversation channels' settings (issue 26; spec operator-console.md §2.6, §7 item 8,
 * §8). Chat platform B (Slack) shares its bot token and Web API URL with the outbound channel
 * (`SVC_PLATFORM_B_BOT_TOKEN_REF`, `SVC_PLATFORM_B_API_URL`, issue 25). Secret values are never
 * settings, only references (`kv:<name>`, or `env:<VARIABLE>` locally). Start-up fails before any
 * traffic when an enabled channel's credentials or bindings are missing, malformed or unbounded.
 */

/** At most this many entries in a principal-binding map (spec §8). */
export const PRINCIPAL_BINDINGS_LIMIT = 1000;

const secretRef = z
  .string()
  .regex(
    /^(kv:[A-Za-z0-9-]{1,127}|env:[A-Z_][A-Z0-9_]{0,127})$/,
    "must be a secret reference: kv:<secret name> or (local only) env:<VARIABLE>",
  );

/**
 * A principal-binding map: a non-empty JSON object of vendor user id → directory object id, at most
 * {@link PRINCIPAL_BINDINGS_LIMIT} entries (the Teams channel uses the same parser).
 */
export function parsePrincipalBindings(text: string): ReadonlyMap<string, string> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error("must be a JSON object of vendor user id to object id");
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw new Error("must be a JSON object of vendor user id to object id");
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length === 0) throw new Error("must not be empty");
  if (entries.length > PRINCIPAL_BINDINGS_LIMIT)
    throw new Error(`has ${entries.length} entries; at most ${PRINCIPAL_BINDINGS_LIMIT} are allowed`);
  const map = new Map<string, string>();
  for (const [key, value] of entries) {
    if (!/^[A-Za-z0-9._:-]{1,128}$/.test(key)) throw new Error("has a key that is not a vendor user id");
    if (typeof value !== "string" || !/^\{?[0-9a-fA-F-]{36}\}?$/.test(value.trim()))
      throw new Error(`entry ${key}: the value must be a directory object id (GUID)`);
    map.set(key, value.trim());
  }
  return map;
}

/** The channel directory of application roles: object id → roles (≤ 1000 entries). */
export function parsePrincipalRoles(text: string): ReadonlyMap<string, { name: string; roles: Role[] }> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error('must be a JSON object of object id to {"name","roles"} or a role list');
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    throw new Error('must be a JSON object of object id to {"name","roles"} or a role list');
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length > PRINCIPAL_BINDINGS_LIMIT)
    throw new Error(`has ${entries.length} entries; at most ${PRINCIPAL_BINDINGS_LIMIT} are allowed`);
  const map = new Map<string, { name: string; roles: Role[] }>();
  for (const [oid, value] of entries) {
    if (!/^\{?[0-9a-fA-F-]{36}\}?$/.test(oid)) throw new Error("has a key that is not a directory object id (GUID)");
    const roles = Array.isArray(value) ? value : (value as { roles?: unknown } | null)?.roles;
    const name = Array.isArray(value) ? "" : String((value as { name?: unknown } | null)?.name ?? "");
    if (!Array.isArray(roles) || !roles.every(isRole))
      throw new Error(`entry ${oid}: roles must be a list of Reader, Contributor, Approver, Owner`);
    map.set(oid.toLowerCase().replace(/[{}]/g, ""), { name: name.slice(0, 200), roles });
  }
  return map;
}

/** The settings this module owns (docs/channels.md; `docs/configuration.md` lists them). */
export const channelOwnedSettingsSchema = z.object({
  /** Turns chat platform B's conversation channel on (its three routes answer 404 while off). */
  SVC_PLATFORM_B_CHANNEL_ENABLED: envFlag().default(false),
  /** Secret reference to Slack's signing secret. */
  SVC_PLATFORM_B_SIGNING_SECRET_REF: secretRef.optional(),
  /** Slack user id → directory object id (non-empty JSON object, at most 1000 entries). */
  SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON: envParsed(parsePrincipalBindings).optional(),
  SVC_PLATFORM_B_SENDER_ACCESS: envEnum(SENDER_ACCESS_MODES).default("allowlist"),
  SVC_CHANNEL_QUEUE_CAPACITY: envInt(1, 10_000).default(100),
  /** Pending pairing challenges per channel (spec §8: bounded, value set by configuration). */
  SVC_CHANNEL_PAIRING_PENDING_LIMIT: envInt(1, 100).default(10),
  /** Object id → application roles of channel principals (the channels' directory). */
  SVC_CHANNEL_PRINCIPAL_ROLES_JSON: envParsed(parsePrincipalRoles).optional(),
  /**
   * Inbound generic webhooks (`POST /api/channels/webhooks/{source}`): the allow-listed event types
   * and agents, and each opted-in source's secret reference and TypedWebhookMapping (JSON).
   */
  SVC_CHANNEL_WEBHOOKS_JSON: envParsed(parseWebhookSettings).optional(),
  /**
   * The `/svc` write commands' Git host (docs/channels.md "Draft pull requests"): its REST API base
   * URL (`https://api.github.com`, or `https://<host>/api/v3`), the repository (`owner/name`), a
   * secret reference to its token, and the base branch. All three of URL, repository and token
   * set: each draft becomes a draft pull request; none: drafts stay records.
   */
  SVC_GIT_HOST_API_URL: envUrl().optional(),
  SVC_GIT_REPOSITORY: z
    .string()
    .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/, "must be owner/name")
    .optional(),
  SVC_GIT_TOKEN_REF: secretRef.optional(),
  SVC_GIT_BASE_BRANCH: z
    .string()
    .regex(/^(?!.*\.\.)(?!\/)[A-Za-z0-9._/-]{1,200}(?<![/.])$/, "must be a branch name")
    .default("main"),
});

/** Everything the inbound channels read: their own settings and the two shared with the outbound channel (issue 25). */
export const channelSettingsSchema = channelOwnedSettingsSchema.extend({
  SVC_PLATFORM_B_BOT_TOKEN_REF: secretRef.optional(),
  SVC_PLATFORM_B_API_URL: z
    .string()
    .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), "must be an absolute http(s) URL")
    .default("https://slack.com/api/"),
});

/** The inbound-channel settings this module owns (the shared ones are listed with the notification settings). */
export const CHANNEL_SETTING_NAMES: readonly string[] = Object.freeze([
  ...Object.keys(channelOwnedSettingsSchema.shape),
  ...TEAMS_INBOUND_SETTING_NAMES,
]);

export interface ChannelConfig {
  readonly queueCapacity: number;
  readonly pairingPendingLimit: number;
  readonly roles: ReadonlyMap<string, { name: string; roles: Role[] }>;
  /** Chat platform A (Teams): the inbound settings and the bot's client secret reference (shared with the outbound channel). */
  readonly platformA?: { readonly inbound: TeamsInboundConfig; readonly clientSecretRef: string };
  /** Inbound generic webhooks: the allow-list and the opted-in sources. */
  readonly webhooks?: WebhookSettings;
  /** The Git host the `/svc` drafts become draft pull requests on (unset: drafts stay records). */
  readonly gitHost?: GitHostSettings;
  readonly platformB?: {
    readonly signingSecretRef: string;
    readonly botTokenRef: string;
    readonly apiUrl: string;
    readonly access: SenderAccessMode;
    readonly bindings: ReadonlyMap<string, string>;
  };
}

/** Reads and checks the inbound-channel settings; a bad one refuses to start (spec §7 item 8). */
export function loadChannelConfig(env: Env, options: { local: boolean }): ChannelConfig {
  const c = parseEnv(channelSettingsSchema, env, (v) => v);
  const problems: string[] = [];
  if (c.SVC_PLATFORM_B_CHANNEL_ENABLED) {
    if (!c.SVC_PLATFORM_B_SIGNING_SECRET_REF)
      problems.push("SVC_PLATFORM_B_SIGNING_SECRET_REF: is required when SVC_PLATFORM_B_CHANNEL_ENABLED is on");
    if (!c.SVC_PLATFORM_B_BOT_TOKEN_REF)
      problems.push("SVC_PLATFORM_B_BOT_TOKEN_REF: is required when SVC_PLATFORM_B_CHANNEL_ENABLED is on");
    if (c.SVC_PLATFORM_B_SENDER_ACCESS === "allowlist" && !c.SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON)
      problems.push(
        "SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON: is required when SVC_PLATFORM_B_SENDER_ACCESS is allowlist",
      );
    if (!options.local) {
      for (const name of ["SVC_PLATFORM_B_SIGNING_SECRET_REF", "SVC_PLATFORM_B_BOT_TOKEN_REF"] as const)
        if (c[name]?.startsWith("env:"))
          problems.push(`${name}: env: references are for the local profile only (use kv:<secret name>)`);
      if (c.SVC_PLATFORM_B_API_URL.startsWith("http://"))
        problems.push("SVC_PLATFORM_B_API_URL: must be https:// outside the local profile");
    }
  }
  let teams: TeamsInboundConfig | undefined;
  try {
    teams = loadTeamsInboundConfig(env, { local: options.local });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  const clientSecretRef = env.SVC_PLATFORM_A_CLIENT_SECRET_REF;
  if (teams) {
    // Replies go out as the bot: its app token needs the client secret (the outbound channel's setting).
    if (!clientSecretRef || !secretRef.safeParse(clientSecretRef).success)
      problems.push(
        "SVC_PLATFORM_A_CLIENT_SECRET_REF: a secret reference (kv:<name> or, locally, env:<VARIABLE>) is required when SVC_PLATFORM_A_CHANNEL_ENABLED is on",
      );
    else if (!options.local && clientSecretRef.startsWith("env:"))
      problems.push(
        "SVC_PLATFORM_A_CLIENT_SECRET_REF: env: references are for the local profile only (use kv:<secret name>)",
      );
  }
  if (!options.local)
    for (const [name, source] of Object.entries(c.SVC_CHANNEL_WEBHOOKS_JSON?.sources ?? {}))
      if (source.secret_ref.startsWith("env:"))
        problems.push(
          `SVC_CHANNEL_WEBHOOKS_JSON: sources.${name}.secret_ref: env: references are for the local profile only (use kv:<secret name>)`,
        );
  const gitNames = ["SVC_GIT_HOST_API_URL", "SVC_GIT_REPOSITORY", "SVC_GIT_TOKEN_REF"] as const;
  const gitSet = gitNames.filter((name) => c[name] !== undefined && c[name] !== "");
  if (gitSet.length > 0 && gitSet.length < gitNames.length)
    problems.push(
      `${gitNames.filter((n) => !gitSet.includes(n)).join(", ")}: required when ${gitSet.join(", ")} ${gitSet.length === 1 ? "is" : "are"} set (a Git host needs its API URL, repository and token reference)`,
    );
  if (!options.local) {
    if (c.SVC_GIT_TOKEN_REF?.startsWith("env:"))
      problems.push("SVC_GIT_TOKEN_REF: env: references are for the local profile only (use kv:<secret name>)");
    if (c.SVC_GIT_HOST_API_URL?.startsWith("http://"))
      problems.push("SVC_GIT_HOST_API_URL: must be https:// outside the local profile");
  }
  const [owner, repo] = (c.SVC_GIT_REPOSITORY ?? "").split("/");
  const gitHost: GitHostSettings | undefined =
    c.SVC_GIT_HOST_API_URL && c.SVC_GIT_TOKEN_REF && owner && repo
      ? {
          apiUrl: c.SVC_GIT_HOST_API_URL,
          owner,
          repo,
          tokenRef: c.SVC_GIT_TOKEN_REF,
          baseBranch: c.SVC_GIT_BASE_BRANCH,
        }
      : undefined;
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    ...(gitHost ? { gitHost } : {}),
    queueCapacity: c.SVC_CHANNEL_QUEUE_CAPACITY,
    pairingPendingLimit: c.SVC_CHANNEL_PAIRING_PENDING_LIMIT,
    roles: c.SVC_CHANNEL_PRINCIPAL_ROLES_JSON ?? new Map(),
    ...(teams && clientSecretRef ? { platformA: { inbound: teams, clientSecretRef } } : {}),
    ...(c.SVC_CHANNEL_WEBHOOKS_JSON ? { webhooks: c.SVC_CHANNEL_WEBHOOKS_JSON } : {}),
    ...(c.SVC_PLATFORM_B_CHANNEL_ENABLED && c.SVC_PLATFORM_B_SIGNING_SECRET_REF && c.SVC_PLATFORM_B_BOT_TOKEN_REF
      ? {
          platformB: {
            signingSecretRef: c.SVC_PLATFORM_B_SIGNING_SECRET_REF,
            botTokenRef: c.SVC_PLATFORM_B_BOT_TOKEN_REF,
            apiUrl: c.SVC_PLATFORM_B_API_URL,
            access: c.SVC_PLATFORM_B_SENDER_ACCESS,
            bindings: c.SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON ?? new Map(),
          },
        }
      : {}),
  });
}
