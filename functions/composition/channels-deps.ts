/**
 * The composition of the inbound conversation channels (issue 26, docs/channels.md). The settings
 * are checked at app start (`channel-settings.ts`); the channels themselves are built on first use
 * over the console's parts, from their own chunks.
 */

import { readFileSync } from "node:fs";
import { apiAudience } from "../../shared/auth/jwt-validator.js";
import type { InboundChannels } from "../../shared/channels/build-channels.js";
import {
  type ChannelTurnRef,
  channelTurnInstanceId,
  type TurnStarter,
} from "../../shared/channels/inbound/channel-queue.js";
import type { OrchestrationClient } from "../../shared/orchestrations/orchestration-client.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { isLocalProfile } from "../../shared/notify/notify-config.js";
import { appContext } from "./app-context.js";
import { approvalHooks } from "./approval-hooks.js";
import type { RouteScope } from "./http-route.js";
import { withInvocationDurable } from "./invocation-durable.js";
import { actionModeOf, actionTypes, consoleParts, notifyConfig, ruleCatalog } from "./console-deps.js";

import { channelConfig } from "./channel-settings.js";

export { channelConfig };
const local = isLocalProfile(process.env);

let channels: Promise<InboundChannels> | undefined;

/** The inbound channels, built once on first use. */
export function inboundChannels(): Promise<InboundChannels> {
  channels ??= Promise.all([
    consoleParts(),
    // The channels' adapters (and their SDKs) load with them, not with the app (decision 0016).
    import("../../shared/channels/build-channels.js"),
    import("../../shared/channels/inbound/svc-commands.js"),
    import("../../shared/notify/build-notifier.js"),
    import("../../shared/channels/inbound/git-drafts.js"),
  ]).then(
    ([
      parts,
      { buildInboundChannels },
      { createSvcCommands },
      { createSecretResolver },
      { createGitDraftPublisher },
    ]) => {
      const source = appContext.config.storage;
      const resolve = createSecretResolver({ secrets: appContext.secrets, env: process.env, local });
      const gitHost = channelConfig.gitHost;
      const svc = createSvcCommands({
        tables: source,
        audit: appContext.audit,
        killSwitch: parts.killSwitch,
        approvals: parts.approvals,
        pendingApprovals: async () => (await parts.approvalStore.listPending()).length,
        actionTypes,
        rules: ruleCatalog,
        modeOf: actionModeOf,
        // A configured Git host: each /svc draft also becomes a draft pull request (docs/channels.md).
        ...(gitHost
          ? { git: createGitDraftPublisher({ settings: gitHost, token: () => resolve(gitHost.tokenRef) }) }
          : {}),
      });
      return buildInboundChannels(channelConfig, {
        tables: source,
        audit: appContext.audit,
        events: appContext.events,
        coordinator: parts.coordinator,
        svc,
        resolve,
        local,
        // The local stack's own Bot Service–shaped issuer serves its key set with its own certificate.
        ...(channelConfig.platformA?.inbound.openIdCaFile
          ? { botServiceCa: readFileSync(channelConfig.platformA.inbound.openIdCaFile, "utf8") }
          : {}),
        // ...and its Entra stand-in the bot's app token (SVC_PLATFORM_A_AUTHORITY_HOST).
        ...(channelConfig.platformA?.inbound.authorityCaFile
          ? { teamsAuthorityCa: readFileSync(channelConfig.platformA.inbound.authorityCaFile, "utf8") }
          : {}),
        teamsSso: {
          validator: appContext.validator,
          approvals: parts.approvals,
          apiResource: apiAudience(appContext.config.auth.clientId),
        },
        ...(notifyConfig.consoleBaseUrl ? { consoleBaseUrl: notifyConfig.consoleBaseUrl } : {}),
        // Turns run after their request was answered: their failures are reported here.
        logger: appContext.logger,
      });
    },
    (error: unknown) => {
      channels = undefined;
      throw error;
    },
  );
  return channels;
}

/**
 * How a channel route starts the turn it admitted (issue 26): as its own `channelTurn` orchestration,
 * so the turn runs inside an activity invocation the host keeps alive after the route's answer. If
 * the orchestration cannot be started, the turn runs in this process after the answer (it is in the
 * queue either way; the queue's timer is the last resort).
 */
export function channelTurnStarter(scope: Pick<RouteScope, "durable" | "logger">): TurnStarter {
  return async (turn) => {
    try {
      await scope.durable().startNew(Orchestrations.channelTurn, {
        instanceId: channelTurnInstanceId(turn),
        input: { channel: turn.channel, turn_id: turn.turn_id },
      });
    } catch (error) {
      scope.logger.warn("channel turn orchestration not started; the turn runs in this process", { error });
      await (await inboundChannels()).runHere(approvalHooks(scope))(turn);
    }
  };
}

/**
 * Runs queued turns with `durable` as the invocation's client (a turn that files an approval starts
 * its orchestration): the one `only` names (the `channelTurn` activity), or every claimable one (the
 * queue's timer). Returns how many turns were closed.
 */
export async function runChannelTurns(durable: OrchestrationClient, only?: ChannelTurnRef): Promise<number> {
  const channels = await inboundChannels();
  const processor = channels.processorWith(approvalHooks({ durable: () => durable, logger: appContext.logger }));
  return withInvocationDurable(durable, () => channels.queue.drain(processor, () => new Date(), only));
}
