import type { TokenCredential } from "@azure/core-auth";
import type { Env } from "../config/env.js";
import type { AuditLog } from "../ops/audit.js";
import type { SecretStore } from "../secrets/api-tokens.js";
import type { TableSource } from "../storage/table-source.js";
import { createEmailChannel } from "./channels/email.js";
import { createLocalInboxChannel } from "./channels/local-inbox.js";
import { createPagingChannel } from "./channels/paging.js";
import { createPlatformBChannel } from "./channels/platform-b.js";
import { createTeamsConversationStore, type TeamsConversationStore } from "./channels/teams-conversations.js";
import { createWebhookChannel } from "./channels/webhook.js";
import { createDeliveryStore, type DeliveryStore } from "./delivery-store.js";
import type { ChannelKind } from "./matrix.js";
import type { NotifyConfig } from "./notify-config.js";
import { createDigests, type DigestSource, withLowSeverityDigests } from "./digests/digests.js";
import { createDurableNotifier } from "./notify-queue.js";
import { createOutboxRecorder } from "./outbox-notifier.js";
import { type ChannelAdapter, createNotificationRouter } from "./router.js";

/** A secret reference could not be resolved: the channel's sends fail definitively until it can. */
export class SecretReferenceError extends Error {
  constructor(readonly ref: string) {
    super(`secret reference ${ref.split(":")[0]}:… could not be resolved`);
    this.name = "SecretReferenceError";
  }
}

/**
 * Resolves `kv:<name>` through the secret store (Key Vault in Azure, the local secret folder on the
 * local stack) and, in the local profile only, `env:<VARIABLE>`.
 */
export function createSecretResolver(options: { secrets: SecretStore | undefined; env: Env; local: boolean }) {
  return async (ref: string): Promise<string> => {
    const [scheme, name = ""] = [ref.slice(0, ref.indexOf(":")), ref.slice(ref.indexOf(":") + 1)];
    const value =
      scheme === "kv"
        ? await options.secrets?.get(name)
        : scheme === "env" && options.local
          ? options.env[name]
          : undefined;
    if (!value) throw new SecretReferenceError(ref);
    return value.trim();
  };
}

/** An adapter built on first use (its secrets resolved then); a failed build is retried on the next send. */
function lazyAdapter(kind: ChannelKind, operation: string, build: () => Promise<ChannelAdapter>): ChannelAdapter {
  let ready: Promise<ChannelAdapter> | undefined;
  return {
    kind,
    operation,
    async send(message, context) {
      ready ??= build();
      let adapter: ChannelAdapter;
      try {
        adapter = await ready;
      } catch {
        ready = undefined;
        return { outcome: "rejected", retryable: false, reason: "credential_unavailable" };
      }
      return adapter.send(message, context);
    },
  };
}

function smtpCredential(value: string): { user: string; pass: string } {
  if (value.startsWith("{")) {
    const parsed = JSON.parse(value) as { user?: unknown; pass?: unknown };
    if (typeof parsed.user === "string" && typeof parsed.pass === "string")
      return { user: parsed.user, pass: parsed.pass };
  }
  const at = value.indexOf(":");
  if (at > 0) return { user: value.slice(0, at), pass: value.slice(at + 1) };
  throw new Error('the SMTP credential must be user:password or {"user","pass"}');
}

/** The adapters of the configured channel kinds, by kind. */
export function buildChannelAdapters(
  config: NotifyConfig,
  resolve: (ref: string) => Promise<string>,
  options: {
    ca?: string | Buffer;
    credential?: TokenCredential;
    tables?: TableSource;
    teamsConversations?: TeamsConversationStore;
    /** Teams SSO is configured: A1 cards carry the decision form (docs/channels-teams.md). */
    teamsSsoDecisions?: boolean;
  } = {},
): Map<ChannelKind, ChannelAdapter> {
  const out = new Map<ChannelKind, ChannelAdapter>();
  const ca = options.ca ? { ca: options.ca } : {};
  const { email, webhook, paging, platformB, sms } = config;
  if (email)
    out.set(
      "email",
      lazyAdapter("email", "smtp.send", async () =>
        createEmailChannel({
          url: email.url,
          from: email.from,
          to: email.to,
          ...(email.credentialRef ? { credential: smtpCredential(await resolve(email.credentialRef)) } : {}),
          // The local stack's own mail server on loopback speaks no TLS.
          allowPlain: config.local && /^smtp:\/\/(127\.0\.0\.1|localhost)[:/]/.test(email.url),
          ...(config.consoleBaseUrl ? { consoleBaseUrl: config.consoleBaseUrl } : {}),
          ...ca,
        }),
      ),
    );
  const { emailAcs } = config;
  if (emailAcs) {
    const { credential } = options;
    out.set(
      "email",
      // The ACS SDK loads on the first send, not at the app's start.
      lazyAdapter("email", "emails.send", async () => {
        const key = emailAcs.keyRef ? await resolve(emailAcs.keyRef) : undefined;
        if (!key && !credential) throw new Error("cloud mail signs in with the app's identity, and there is none");
        const { createAcsEmailChannel } = await import("./channels/email-acs.js");
        return createAcsEmailChannel({
          endpoint: emailAcs.endpoint,
          from: emailAcs.from,
          to: emailAcs.to,
          credential: key ? { key } : (credential as TokenCredential),
          ...(config.consoleBaseUrl ? { consoleBaseUrl: config.consoleBaseUrl } : {}),
          ...ca,
        });
      }),
    );
  }
  if (webhook)
    out.set(
      "webhook",
      lazyAdapter("webhook", "webhook.post", async () =>
        createWebhookChannel({ url: webhook.url, secret: await resolve(webhook.secretRef), ...ca }),
      ),
    );
  if (paging) {
    const runbook = Object.values(config.matrix.channels).find((c) => c.kind === "paging")?.runbook_url;
    const absolute =
      runbook?.startsWith("/") && config.consoleBaseUrl
        ? `${config.consoleBaseUrl.replace(/\/+$/, "")}${runbook}`
        : runbook?.startsWith("https://")
          ? runbook
          : undefined;
    out.set(
      "paging",
      lazyAdapter("paging", "events.enqueue", async () =>
        createPagingChannel({
          eventsUrl: paging.eventsUrl,
          routingKey: await resolve(paging.routingKeyRef),
          defaultRunbookUrl: absolute,
          ...ca,
        }),
      ),
    );
  }
  if (platformB)
    out.set(
      "platform_b",
      lazyAdapter("platform_b", "chat.postMessage", async () =>
        createPlatformBChannel({
          apiUrl: platformB.apiUrl,
          token: await resolve(platformB.tokenRef),
          channel: platformB.channel,
        }),
      ),
    );
  const platformA = config.platformA;
  const conversations =
    options.teamsConversations ??
    (platformA && options.tables
      ? createTeamsConversationStore(options.tables, {
          ...(platformA.alertConversationId
            ? {
                operational: {
                  serviceUrl: platformA.serviceUrl,
                  conversationId: platformA.alertConversationId,
                  tenantId: platformA.tenantId,
                },
              }
            : {}),
        })
      : undefined);
  if (platformA && conversations) {
    // One adapter for both trust rows: same-tenant and guest recipients are reached the same way;
    // the matrix decides which categories each may carry.
    // The Agents SDK (and its telemetry) loads on the first Teams send, not at the app's start.
    const teams = lazyAdapter("platform_a", "continueConversation.sendActivity", async () =>
      (await import("./channels/platform-a.js")).createPlatformAChannel({
        botAppId: platformA.botAppId,
        tenantId: platformA.tenantId,
        clientSecret: await resolve(platformA.clientSecretRef),
        conversations,
        ...(config.consoleBaseUrl ? { consoleBaseUrl: config.consoleBaseUrl } : {}),
        ...(options.teamsSsoDecisions ? { ssoDecisions: true } : {}),
      }),
    );
    out.set("platform_a", teams);
    out.set("platform_a_guest", { ...teams, kind: "platform_a_guest" });
  }
  if (sms) {
    const { credential } = options;
    out.set(
      "sms",
      lazyAdapter("sms", "sms.send", async () => {
        if (!credential) throw new Error("the SMS channel signs in with the app's identity, and there is none");
        const { createSmsChannel } = await import("./channels/sms.js");
        return createSmsChannel({ ...sms, credential, ...ca });
      }),
    );
  }
  if (config.inboxDir) out.set("local_inbox", createLocalInboxChannel({ dir: config.inboxDir }));
  return out;
}

/**
 * The console's notifier: the router over the configured channels, with deliveries in Table
 * storage and each message's overall receipt recorded in the outbox (the audit of deliveries),
 * behind the durable notification queue (a message accepted survives a crash; `drain` delivers
 * what a crashed host left behind), with low-severity notices batched into their digest
 * (`digests.flush` sends each ended period's digest).
 */
export function buildNotifier(
  config: NotifyConfig,
  deps: {
    tables: TableSource;
    audit: AuditLog;
    secrets: SecretStore | undefined;
    env: Env;
    a1Held?: () => Promise<boolean>;
    log?: (message: string, fields: Record<string, unknown>) => void;
    /** Extra CA certificates the vendor endpoints are trusted with (tests with local HTTPS servers). */
    ca?: string | Buffer;
    /** The app's one credential (the SMS channel signs in with it). */
    credential?: TokenCredential;
    sleep?: (ms: number) => Promise<void>;
    /** The notification queue's lease (tests; default from the matrix). */
    queueLeaseMs?: number;
    /** The scheduled digests' sources by route (digests/digest-sources.ts). */
    digestSources?: Readonly<Record<string, DigestSource>>;
    /** Who a role-dm digest (the break-glass usage summary) is sent to: the break-glass Owners. */
    digestDirectRecipients?: readonly string[];
    /** Teams SSO is configured (`SVC_PLATFORM_A_SSO_CONNECTION_NAME`): A1 cards carry the decision form. */
    teamsSsoDecisions?: boolean;
  },
) {
  const resolve = createSecretResolver({ secrets: deps.secrets, env: deps.env, local: config.local });
  const byKind = buildChannelAdapters(config, resolve, {
    ...(deps.ca ? { ca: deps.ca } : {}),
    ...(deps.credential ? { credential: deps.credential } : {}),
    ...(deps.teamsSsoDecisions ? { teamsSsoDecisions: true } : {}),
    tables: deps.tables,
  });
  const channels = new Map<string, ChannelAdapter>();
  for (const [id, channel] of Object.entries(config.matrix.channels)) {
    const adapter = byKind.get(channel.kind);
    if (adapter) channels.set(id, adapter);
  }
  const deliveries: DeliveryStore = createDeliveryStore(deps.tables);
  const outbox = createOutboxRecorder(deps.tables);
  const router = createNotificationRouter({
    matrix: config.matrix,
    channels,
    deliveries,
    audit: deps.audit,
    record: (message, receipt) => outbox.record(message, receipt),
    ...(deps.a1Held ? { a1Held: deps.a1Held } : {}),
    ...(deps.log ? { log: deps.log } : {}),
    ...(deps.sleep ? { sleep: deps.sleep } : {}),
  });
  const durable = createDurableNotifier({
    router,
    tables: deps.tables,
    matrix: config.matrix,
    audit: deps.audit,
    ...(deps.queueLeaseMs !== undefined ? { leaseMs: deps.queueLeaseMs } : {}),
    ...(deps.log ? { log: deps.log } : {}),
  });
  const digests = createDigests({
    tables: deps.tables,
    matrix: config.matrix,
    notifier: durable,
    ...(deps.digestSources ? { sources: deps.digestSources } : {}),
    ...(deps.digestDirectRecipients ? { directRecipients: deps.digestDirectRecipients } : {}),
    ...(deps.log ? { log: deps.log } : {}),
  });
  return Object.assign(withLowSeverityDigests(durable, digests, config.matrix), {
    deliveries,
    outbox,
    channels,
    router,
    digests,
  });
}
