import { normalizeObjectId } from "../auth/object-id.js";
import type { Role } from "../auth/roles.js";
import type { TurnHooks } from "../console/coordinator/coordinator.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import type { EventLog } from "../ops/events.js";
import type { TableSource } from "../storage/table-source.js";
import type { ChannelConfig } from "./channel-config.js";
import { createBackgroundTurns } from "./inbound/background-turns.js";
import { createChannelQueue, type TurnProcessor, type TurnStarter } from "./inbound/channel-queue.js";
import {
  handleInboundTurn,
  type InboundPipelineDependencies,
  type PrincipalDirectory,
  type SvcHandler,
  type TurnCoordinator,
} from "./inbound/pipeline.js";
import type { ChannelProgressSender } from "./inbound/progress-stream.js";
import { holdWithoutScanner } from "./inbound/attachment-gate.js";
import { createSenderAccess } from "./inbound/sender-access.js";
import type { ChannelKind } from "./inbound/types.js";
import { createTeamsConversationStore } from "../notify/channels/teams-conversations.js";
import { createBotServiceKeySet } from "./platform-a/bot-service-keys.js";
import { type ConversationReferenceSink, createTeamsInbound } from "./platform-a/teams-inbound.js";
import { createTeamsReplier } from "./platform-a/teams-reply.js";
import { createTeamsSsoDecider, type TeamsSsoDependencies } from "./platform-a/teams-sso.js";
import { createSlackInbound } from "./platform-b/slack-inbound.js";
import { createWebhookInbound } from "./webhooks/webhook-inbound.js";
import { createSlackReplier } from "./platform-b/slack-reply.js";

/** The directory of channel principals' roles from `SVC_CHANNEL_PRINCIPAL_ROLES_JSON` (ids normalized). */
export function configDirectory(roles: ReadonlyMap<string, { name: string; roles: Role[] }>): PrincipalDirectory {
  const byOid = new Map([...roles].map(([oid, v]) => [normalizeObjectId(oid), v]));
  return { lookup: async (oid) => byOid.get(normalizeObjectId(oid)) };
}

/**
 * Wires the inbound channels over the app's parts: sender access, the channel queue, the pipeline
 * and chat platform B's endpoint. Each channel's reply sender is registered by kind (chat platform
 * A registers its own with {@link registerDeliver}). Secrets are resolved on first use.
 */
export function buildInboundChannels(
  config: ChannelConfig,
  deps: {
    tables: TableSource;
    audit: AuditLog;
    coordinator: TurnCoordinator;
    svc?: SvcHandler;
    resolve(ref: string): Promise<string>;
    consoleBaseUrl?: string;
    directory?: PrincipalDirectory;
    now?: () => Date;
    /** The local profile: a Bot Connector on `http://127.0.0.1` may be a Teams service URL. */
    local?: boolean;
    /** A certificate authority the Bot Service key set is fetched with (tests' own issuer). */
    botServiceCa?: string;
    /** A certificate authority the replies' app token is requested with (the local Entra stand-in). */
    teamsAuthorityCa?: string;
    /** How long a turn runs before its progress is shown (default 5 s; 0: at its first activity). */
    progressStartAfterMs?: number;
    /** The operations core's event log (inbound generic webhooks publish into it). */
    events?: EventLog;
    /** Where Teams conversation references go (default: table `teamsconversations`). */
    teamsConversations?: ConversationReferenceSink;
    /**
     * Teams SSO for A1 (used when `SVC_PLATFORM_A_SSO_CONNECTION_NAME` is set): the dashboard's
     * bearer validator, the approvals domain and the API's Application ID URI.
     */
    teamsSso?: Pick<TeamsSsoDependencies, "validator" | "approvals"> & { apiResource: string };
    /**
     * The attachment gate (`attachment-gate.ts`). Default: no malware scanner is part of this
     * product, so every attachment is held, named in the reply and audited, never downloaded.
     */
    attachments?: InboundPipelineDependencies["attachments"];
    /** Where failed and abandoned turns are reported (their vendor identity, never their text). */
    logger?: Logger;
  },
) {
  const directory = deps.directory ?? configDirectory(config.roles);
  const b = config.platformB;
  const a = config.platformA;
  const senders = createSenderAccess({
    tables: deps.tables,
    policies: {
      // Teams: with allowlist (or disabled) access an unbound sender is refused (403) before the queue;
      // with pairing it reaches sender access, which challenges it (SVC_PLATFORM_A_SENDER_ACCESS).
      ...(a
        ? {
            platform_a: {
              mode: a.inbound.senderAccess,
              bindings: a.inbound.bindings,
              pendingLimit: config.pairingPendingLimit,
            },
          }
        : {}),
      ...(b ? { platform_b: { mode: b.access, bindings: b.bindings, pendingLimit: config.pairingPendingLimit } } : {}),
    },
    directory,
    audit: deps.audit,
  });
  const queue = createChannelQueue({
    tables: deps.tables,
    capacity: config.queueCapacity,
    ...(deps.logger ? { logger: deps.logger } : {}),
  });
  /** The turns started in this process (`runHere`), still running. */
  const logger = deps.logger;
  const background = createBackgroundTurns(
    logger ? { onError: (error) => logger.error("channel turn failed after its request was answered", { error }) } : {},
  );
  const delivers = new Map<ChannelKind, InboundPipelineDependencies["deliver"]>();
  /** Each channel's progress transport (spec §3 progress stream). */
  const progresses = new Map<ChannelKind, ChannelProgressSender>();
  if (b) {
    let replier: Promise<ReturnType<typeof createSlackReplier>> | undefined;
    const slackReplier = () => {
      replier ??= deps.resolve(b.botTokenRef).then(
        (token) => createSlackReplier({ apiUrl: b.apiUrl, token }),
        (error: unknown) => {
          replier = undefined;
          throw error;
        },
      );
      return replier;
    };
    delivers.set("platform_b", async (turn, response) => (await slackReplier())(turn, response));
    progresses.set("platform_b", {
      post: async (turn, update) => (await slackReplier()).progress.post(turn, update),
      update: async (turn, ts, update) => (await slackReplier()).progress.update(turn, ts, update),
      replace: async (turn, ts, response) => (await slackReplier()).progress.replace(turn, ts, response),
    });
  }

  if (a) {
    const teamsReplier = createTeamsReplier({
      botAppId: a.inbound.botAppId,
      tenantId: a.inbound.tenantId,
      clientSecret: () => deps.resolve(a.clientSecretRef),
      ...(a.inbound.authorityHost ? { authorityHost: a.inbound.authorityHost } : {}),
      ...(deps.teamsAuthorityCa ? { authorityCa: deps.teamsAuthorityCa } : {}),
      ...(a.inbound.localAnonymous && deps.local
        ? { localAnonymous: true, localAnonymousConnectorPort: a.inbound.localAnonymousConnectorPort }
        : {}),
    });
    delivers.set("platform_a", teamsReplier);
    progresses.set("platform_a", teamsReplier.progress);
  }

  /** The queue's processor: the pipeline, with the reply marked `delivering` before it is posted. */
  const processorWith =
    (hooks?: TurnHooks): TurnProcessor =>
    async (turn, guard) => {
      const deliver = delivers.get(turn.channel);
      if (!deliver) throw new Error(`no reply sender for ${turn.channel}`);
      const progress = progresses.get(turn.channel);
      await handleInboundTurn({
        access: senders.access,
        directory,
        coordinator: deps.coordinator,
        ...(deps.svc ? { svc: deps.svc } : {}),
        audit: deps.audit,
        attachments: deps.attachments ?? holdWithoutScanner,
        deliver: async (t, r) => {
          await guard.beforeDeliver();
          return deliver(t, r);
        },
        // Progress is not the reply: only the final replacement marks the turn `delivering`.
        ...(progress
          ? {
              progress: {
                post: progress.post,
                update: progress.update,
                replace: async (t, id, r) => {
                  await guard.beforeDeliver();
                  return progress.replace(t, id, r);
                },
              },
            }
          : {}),
        ...(deps.progressStartAfterMs !== undefined ? { progressStartAfterMs: deps.progressStartAfterMs } : {}),
        ...(hooks ? { hooks } : {}),
        ...(deps.consoleBaseUrl ? { consoleBaseUrl: deps.consoleBaseUrl } : {}),
        ...(deps.now ? { now: deps.now } : {}),
      })(turn);
    };

  /**
   * Runs an admitted turn in this process after the answer: the tests' way, and the routes' fallback
   * when their orchestration cannot start (the turn is queued either way; the timer is the last resort).
   */
  const runHere =
    (hooks?: TurnHooks): TurnStarter =>
    async (turn) =>
      background.run(() => queue.drain(processorWith(hooks), deps.now ?? (() => new Date()), turn));

  const slack = b
    ? createSlackInbound({
        signingSecret: () => deps.resolve(b.signingSecretRef),
        queue,
        start: runHere(),
        tables: deps.tables,
        ...(deps.now ? { now: deps.now } : {}),
      })
    : undefined;

  const teams = a
    ? createTeamsInbound({
        config: a.inbound,
        keys: createBotServiceKeySet({
          metadataUrl: a.inbound.metadataUrl,
          ...(deps.botServiceCa ? { ca: deps.botServiceCa } : {}),
        }),
        queue,
        start: runHere(),
        conversations: deps.teamsConversations ?? createTeamsConversationStore(deps.tables),
        pairedPrincipal: (vendorUserId) => senders.principalOf("platform_a", vendorUserId),
        ...(a.inbound.ssoConnectionName && deps.teamsSso
          ? {
              sso: createTeamsSsoDecider({
                settings: {
                  tenantId: a.inbound.tenantId,
                  botAppId: a.inbound.botAppId,
                  apiResource: deps.teamsSso.apiResource,
                  connectionName: a.inbound.ssoConnectionName,
                },
                validator: deps.teamsSso.validator,
                approvals: deps.teamsSso.approvals,
                audit: deps.audit,
                ...(deps.now ? { now: deps.now } : {}),
              }),
            }
          : {}),
        ...(deps.local ? { allowLoopbackHttp: true } : {}),
        ...(deps.now ? { now: deps.now } : {}),
      })
    : undefined;

  const webhooks =
    config.webhooks && deps.events
      ? createWebhookInbound({
          settings: config.webhooks,
          tables: deps.tables,
          events: deps.events,
          audit: deps.audit,
          resolve: deps.resolve,
          ...(deps.now ? { now: deps.now } : {}),
        })
      : undefined;

  return {
    directory,
    senders,
    queue,
    slack,
    teams,
    webhooks,
    processorWith,
    runHere,
    /** The turns started with {@link runHere}, still running. */
    background,
    /** Registers a channel's reply sender (chat platform A's adapter), and its progress transport (none: no progress). */
    registerDeliver(
      kind: ChannelKind,
      deliver: InboundPipelineDependencies["deliver"],
      progress?: ChannelProgressSender,
    ) {
      delivers.set(kind, deliver);
      if (progress) progresses.set(kind, progress);
      else progresses.delete(kind);
    },
  };
}

export type InboundChannels = ReturnType<typeof buildInboundChannels>;
