import { z } from "zod";
import { ConfigError, type Env, parseEnv } from "../config/env.js";
import { catalogPath } from "../ops/actions/action-types.js";
import { type ChannelKind, checkOperationalRoute, loadNotificationMatrix, type NotificationMatrix } from "./matrix.js";

/**
 * The notification channels' settings (issue 25; spec operator-console.md §2.6). Secret values are
 * never settings, only references: `kv:<secret name>` (Key Vault through the managed identity; the
 * local stack's secret folder stands in for it) or, in the local profile only, `env:<VARIABLE>`.
 * A channel kind is registered when its settings are present; a half-configured channel refuses
 * to start (spec §7 item 8).
 */

const secretRef = z
  .string()
  .regex(
    /^(kv:[A-Za-z0-9-]{1,127}|env:[A-Z_][A-Z0-9_]{0,127})$/,
    "must be a secret reference: kv:<secret name> or (local only) env:<VARIABLE>",
  );
const emailAddress = z.string().regex(/^[^\s@<>,;]+@[^\s@<>,;]+\.[^\s@<>,;]+$/, "must be an e-mail address");
const emailList = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  )
  .pipe(z.array(emailAddress).min(1).max(50));
const httpUrl = z
  .string()
  .refine((v) => URL.canParse(v) && /^https?:$/.test(new URL(v).protocol), "must be an absolute http(s) URL")
  .refine((v) => !URL.canParse(v) || (!new URL(v).username && !new URL(v).password), "must not carry credentials");

export const notifySettingsSchema = z.object({
  /** The console's origin, for links in messages (the incident-open email's HTTPS link). */
  SVC_CONSOLE_BASE_URL: httpUrl.optional(),
  /** The routing matrix (default `config/notifications-matrix.yaml` of the catalog directory). */
  SVC_NOTIFICATIONS_MATRIX: z.string().min(1).optional(),
  /** `smtp://host:port` (STARTTLS required) or `smtps://host:port`; no credentials in the URL. */
  SVC_SMTP_URL: z
    .string()
    .refine(
      (v) => URL.canParse(v) && /^smtps?:$/.test(new URL(v).protocol),
      "must be smtp://host:port or smtps://host:port",
    )
    .refine((v) => !URL.canParse(v) || (!new URL(v).username && !new URL(v).password), "must not carry credentials")
    .optional(),
  /** The SMTP login: a secret whose value is `user:password` (or JSON `{"user","pass"}`). */
  SVC_SMTP_CREDENTIAL_REF: secretRef.optional(),
  /**
   * Cloud mail instead of SMTP: the Azure Communication Services resource endpoint
   * (`https://<resource>.communication.azure.com`); sends through `@azure/communication-email`.
   */
  SVC_EMAIL_ACS_ENDPOINT: httpUrl.optional(),
  /** An ACS access key (HMAC-signed requests); unset, cloud mail signs in with the app's identity. */
  SVC_EMAIL_ACS_KEY_REF: secretRef.optional(),
  SVC_EMAIL_FROM: emailAddress.optional(),
  /** Operational recipients, comma-separated. */
  SVC_EMAIL_TO: emailList.optional(),
  SVC_WEBHOOK_URL: httpUrl.optional(),
  /** A Standard Webhooks secret (`whsec_…`). */
  SVC_WEBHOOK_SECRET_REF: secretRef.optional(),
  /** PagerDuty Events API v2 endpoint. */
  SVC_PAGING_EVENTS_URL: httpUrl.default("https://events.pagerduty.com/v2/enqueue"),
  SVC_PAGING_ROUTING_KEY_REF: secretRef.optional(),
  /** Slack Web API base. */
  SVC_PLATFORM_B_API_URL: httpUrl.default("https://slack.com/api/"),
  SVC_PLATFORM_B_BOT_TOKEN_REF: secretRef.optional(),
  /** The channel id operational alerts post to. */
  SVC_PLATFORM_B_ALERT_CHANNEL: z
    .string()
    .regex(/^[A-Za-z0-9_#-]{1,80}$/, "must be a channel id")
    .optional(),
  /** Chat platform A (Teams): the bot's Entra app (client) id, the audience of Bot Service tokens. */
  SVC_PLATFORM_A_BOT_APP_ID: z
    .string()
    .regex(
      /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
      "must be an app (client) id GUID",
    )
    .optional(),
  /** The operators' Entra tenant (same tenant: A1–A4; guests A2–A4). */
  SVC_PLATFORM_A_TENANT_ID: z
    .string()
    .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, "must be a tenant id GUID")
    .optional(),
  /** The bot app's client secret (a secret reference); the Agents SDK exchanges it for Bot Connector tokens. */
  SVC_PLATFORM_A_CLIENT_SECRET_REF: secretRef.optional(),
  /** Bot Connector's service URL for proactive messages to the alert conversation (Teams' global one by default). */
  SVC_PLATFORM_A_SERVICE_URL: httpUrl.default("https://smba.trafficmanager.net/teams/"),
  /** The Teams conversation (a channel's `19:…@thread.tacv2` id) operational messages post to. */
  SVC_PLATFORM_A_ALERT_CONVERSATION_ID: z
    .string()
    .regex(/^[A-Za-z0-9:@._;=-]{1,300}$/, "must be a Teams conversation id")
    .optional(),
  /** Azure Communication Services endpoint (`https://<resource>.communication.azure.com`); the managed identity signs in. */
  SVC_SMS_ENDPOINT: httpUrl.optional(),
  /** The ACS phone number or short code messages come from (E.164 or 5–6 digits). */
  SVC_SMS_FROM: z
    .string()
    .regex(/^(\+[1-9]\d{6,14}|\d{5,6})$/, "must be an E.164 number (+15551234567) or a short code")
    .optional(),
  /** Operational phone numbers (E.164), comma-separated. */
  SVC_SMS_TO: z
    .string()
    .transform((s) =>
      s
        .split(",")
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(
      z
        .array(z.string().regex(/^\+[1-9]\d{6,14}$/, "must be E.164 numbers (+15551234567)"))
        .min(1)
        .max(50),
    )
    .optional(),
  /** The local stack's inbox folder (local profile only; `npm start` sets it). */
  SVC_NOTIFY_INBOX_DIR: z.string().min(1).optional(),
});

/** Every notification setting (the Functions app's `local.settings.sample.json` lists them). */
export const NOTIFY_SETTING_NAMES: readonly string[] = Object.freeze(Object.keys(notifySettingsSchema.shape));

/**
 * The local profile: the app's storage is the embedded Azurite by connection string. In Azure the
 * storage is reached with the managed identity and a connection string refuses to start
 * (`shared/config/load-config.ts`), so this never holds there.
 */
export function isLocalProfile(env: Env): boolean {
  return Boolean(env.AzureWebJobsStorage?.trim());
}

export interface NotifyConfig {
  readonly matrix: NotificationMatrix;
  readonly local: boolean;
  readonly consoleBaseUrl: string | undefined;
  readonly email?: {
    readonly url: string;
    readonly credentialRef: string | undefined;
    readonly from: string;
    readonly to: readonly string[];
  };
  /** Cloud mail (the email kind through Azure Communication Services) instead of `email` over SMTP. */
  readonly emailAcs?: {
    readonly endpoint: string;
    /** An access key reference (HMAC); unset, the app's identity. */
    readonly keyRef: string | undefined;
    readonly from: string;
    readonly to: readonly string[];
  };
  readonly webhook?: { readonly url: string; readonly secretRef: string };
  readonly paging?: { readonly eventsUrl: string; readonly routingKeyRef: string };
  readonly platformB?: { readonly apiUrl: string; readonly tokenRef: string; readonly channel: string };
  readonly platformA?: {
    readonly botAppId: string;
    readonly tenantId: string;
    readonly clientSecretRef: string;
    readonly serviceUrl: string;
    readonly alertConversationId: string | undefined;
  };
  readonly sms?: { readonly endpoint: string; readonly from: string; readonly to: readonly string[] };
  readonly inboxDir?: string;
  /** Channel ids of the matrix whose kind is configured. */
  readonly registered: ReadonlySet<string>;
}

/**
 * Reads the notification settings and the matrix, and checks the start-up rules: a half-configured
 * channel, an `env:` reference or a plain-HTTP vendor URL outside the local profile, a matrix
 * problem (`file:line: field: problem`), or — outside the local profile — no registered A2 channel
 * on `operational_alert`, each refuse to start. Locally the last one is logged as
 * `notification_route_unavailable` at INFO.
 */
export function loadNotifyConfig(
  env: Env,
  options: {
    local: boolean;
    catalogDir?: string;
    log?: (message: string, fields: Record<string, unknown>) => void;
  },
): NotifyConfig {
  const c = parseEnv(notifySettingsSchema, env, (v) => v);
  const problems: string[] = [];
  const need = (kind: string, names: [string, unknown][]) => {
    const missing = names.filter(([, v]) => v === undefined).map(([n]) => n);
    if (missing.length > 0 && missing.length < names.length)
      problems.push(`${missing.join(", ")}: ${missing.length === 1 ? "is" : "are"} required for the ${kind} channel`);
    return missing.length === 0;
  };
  if (c.SVC_SMTP_URL && c.SVC_EMAIL_ACS_ENDPOINT)
    problems.push(
      "SVC_SMTP_URL, SVC_EMAIL_ACS_ENDPOINT: set one of them (mail goes over SMTP or through ACS, not both)",
    );
  if (c.SVC_EMAIL_ACS_KEY_REF && !c.SVC_EMAIL_ACS_ENDPOINT)
    problems.push("SVC_EMAIL_ACS_KEY_REF: is only used with SVC_EMAIL_ACS_ENDPOINT");
  const hasEmail = need("email", [
    [c.SVC_EMAIL_ACS_ENDPOINT ? "SVC_EMAIL_ACS_ENDPOINT" : "SVC_SMTP_URL", c.SVC_EMAIL_ACS_ENDPOINT ?? c.SVC_SMTP_URL],
    ["SVC_EMAIL_FROM", c.SVC_EMAIL_FROM],
    ["SVC_EMAIL_TO", c.SVC_EMAIL_TO],
  ]);
  // ACS gets the identity's bearer token (or HMAC-signed requests): only over TLS, locally too.
  if (c.SVC_EMAIL_ACS_ENDPOINT?.startsWith("http://"))
    problems.push("SVC_EMAIL_ACS_ENDPOINT: must be https:// (the identity's token is sent to it)");
  const hasWebhook = need("webhook", [
    ["SVC_WEBHOOK_URL", c.SVC_WEBHOOK_URL],
    ["SVC_WEBHOOK_SECRET_REF", c.SVC_WEBHOOK_SECRET_REF],
  ]);
  const hasPaging = c.SVC_PAGING_ROUTING_KEY_REF !== undefined;
  const hasPlatformB = need("chat platform B", [
    ["SVC_PLATFORM_B_BOT_TOKEN_REF", c.SVC_PLATFORM_B_BOT_TOKEN_REF],
    ["SVC_PLATFORM_B_ALERT_CHANNEL", c.SVC_PLATFORM_B_ALERT_CHANNEL],
  ]);
  const hasPlatformA = need("chat platform A", [
    ["SVC_PLATFORM_A_BOT_APP_ID", c.SVC_PLATFORM_A_BOT_APP_ID],
    ["SVC_PLATFORM_A_TENANT_ID", c.SVC_PLATFORM_A_TENANT_ID],
    ["SVC_PLATFORM_A_CLIENT_SECRET_REF", c.SVC_PLATFORM_A_CLIENT_SECRET_REF],
  ]);
  const hasSms = need("SMS", [
    ["SVC_SMS_ENDPOINT", c.SVC_SMS_ENDPOINT],
    ["SVC_SMS_FROM", c.SVC_SMS_FROM],
    ["SVC_SMS_TO", c.SVC_SMS_TO],
  ]);
  // The managed identity's bearer token is only ever sent over TLS.
  if (hasSms && c.SVC_SMS_ENDPOINT?.startsWith("http://"))
    problems.push("SVC_SMS_ENDPOINT: must be https:// (the identity's token is sent to it)");
  if (!options.local) {
    for (const [name, value] of Object.entries(c))
      if (typeof value === "string" && value.startsWith("env:"))
        problems.push(`${name}: env: references are for the local profile only (use kv:<secret name>)`);
    const plain = (name: string, value: string | undefined, used: boolean) => {
      if (used && value?.startsWith("http://")) problems.push(`${name}: must be https:// outside the local profile`);
    };
    plain("SVC_WEBHOOK_URL", c.SVC_WEBHOOK_URL, hasWebhook);
    plain("SVC_PAGING_EVENTS_URL", c.SVC_PAGING_EVENTS_URL, hasPaging);
    plain("SVC_PLATFORM_B_API_URL", c.SVC_PLATFORM_B_API_URL, hasPlatformB);
    plain("SVC_PLATFORM_A_SERVICE_URL", c.SVC_PLATFORM_A_SERVICE_URL, hasPlatformA);
    plain("SVC_CONSOLE_BASE_URL", c.SVC_CONSOLE_BASE_URL, true);
    if (c.SVC_NOTIFY_INBOX_DIR) problems.push("SVC_NOTIFY_INBOX_DIR: the local inbox is for the local profile only");
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const matrix = loadNotificationMatrix(
    c.SVC_NOTIFICATIONS_MATRIX ?? catalogPath("notifications-matrix.yaml", options.catalogDir),
  );
  const kinds = new Set<ChannelKind>([
    ...(hasEmail ? (["email"] as const) : []),
    ...(hasWebhook ? (["webhook"] as const) : []),
    ...(hasPaging ? (["paging"] as const) : []),
    ...(hasPlatformB ? (["platform_b"] as const) : []),
    ...(hasPlatformA ? (["platform_a", "platform_a_guest"] as const) : []),
    ...(hasSms ? (["sms"] as const) : []),
    ...(options.local && c.SVC_NOTIFY_INBOX_DIR ? (["local_inbox"] as const) : []),
  ]);
  const pagingRunbook = Object.values(matrix.channels).find((ch) => ch.kind === "paging")?.runbook_url;
  if (hasPaging && pagingRunbook?.startsWith("/") && !c.SVC_CONSOLE_BASE_URL)
    throw new ConfigError([
      `SVC_CONSOLE_BASE_URL: is required for the paging channel's runbook link (${pagingRunbook} in the matrix)`,
    ]);
  const registered = new Set(
    Object.entries(matrix.channels)
      .filter(([, ch]) => kinds.has(ch.kind))
      .map(([id]) => id),
  );
  checkOperationalRoute(matrix, registered, { local: options.local, log: options.log ?? (() => undefined) });
  return {
    matrix,
    local: options.local,
    consoleBaseUrl: c.SVC_CONSOLE_BASE_URL,
    ...(hasEmail && c.SVC_SMTP_URL && c.SVC_EMAIL_FROM && c.SVC_EMAIL_TO
      ? {
          email: {
            url: c.SVC_SMTP_URL,
            credentialRef: c.SVC_SMTP_CREDENTIAL_REF,
            from: c.SVC_EMAIL_FROM,
            to: c.SVC_EMAIL_TO,
          },
        }
      : {}),
    ...(hasEmail && c.SVC_EMAIL_ACS_ENDPOINT && c.SVC_EMAIL_FROM && c.SVC_EMAIL_TO
      ? {
          emailAcs: {
            endpoint: c.SVC_EMAIL_ACS_ENDPOINT,
            keyRef: c.SVC_EMAIL_ACS_KEY_REF,
            from: c.SVC_EMAIL_FROM,
            to: c.SVC_EMAIL_TO,
          },
        }
      : {}),
    ...(hasWebhook && c.SVC_WEBHOOK_URL && c.SVC_WEBHOOK_SECRET_REF
      ? { webhook: { url: c.SVC_WEBHOOK_URL, secretRef: c.SVC_WEBHOOK_SECRET_REF } }
      : {}),
    ...(hasPaging && c.SVC_PAGING_ROUTING_KEY_REF
      ? { paging: { eventsUrl: c.SVC_PAGING_EVENTS_URL, routingKeyRef: c.SVC_PAGING_ROUTING_KEY_REF } }
      : {}),
    ...(hasPlatformB && c.SVC_PLATFORM_B_BOT_TOKEN_REF && c.SVC_PLATFORM_B_ALERT_CHANNEL
      ? {
          platformB: {
            apiUrl: c.SVC_PLATFORM_B_API_URL,
            tokenRef: c.SVC_PLATFORM_B_BOT_TOKEN_REF,
            channel: c.SVC_PLATFORM_B_ALERT_CHANNEL,
          },
        }
      : {}),
    ...(hasPlatformA && c.SVC_PLATFORM_A_BOT_APP_ID && c.SVC_PLATFORM_A_TENANT_ID && c.SVC_PLATFORM_A_CLIENT_SECRET_REF
      ? {
          platformA: {
            botAppId: c.SVC_PLATFORM_A_BOT_APP_ID,
            tenantId: c.SVC_PLATFORM_A_TENANT_ID,
            clientSecretRef: c.SVC_PLATFORM_A_CLIENT_SECRET_REF,
            serviceUrl: c.SVC_PLATFORM_A_SERVICE_URL,
            alertConversationId: c.SVC_PLATFORM_A_ALERT_CONVERSATION_ID,
          },
        }
      : {}),
    ...(hasSms && c.SVC_SMS_ENDPOINT && c.SVC_SMS_FROM && c.SVC_SMS_TO
      ? { sms: { endpoint: c.SVC_SMS_ENDPOINT, from: c.SVC_SMS_FROM, to: c.SVC_SMS_TO } }
      : {}),
    ...(options.local && c.SVC_NOTIFY_INBOX_DIR ? { inboxDir: c.SVC_NOTIFY_INBOX_DIR } : {}),
    registered,
  };
}
