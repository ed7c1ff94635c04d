import * as df from "durable-functions";
import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import { CHANNEL_TURN_ACTIVITY, type ChannelTurnRef } from "../../shared/channels/inbound/channel-queue.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { runChannelTurns } from "../composition/channels-deps.js";
import { orchestrationClient } from "../composition/http-route.js";

/**
 * One chat turn a channel route admitted and answered (issue 26): the activity runs it from the
 * channel queue by its id (the turn's text stays in the queue, never in this history) inside an
 * invocation, with a durable client for the approvals it may file. A failure leaves the turn claimed
 * in the queue, whose timer runs it again once its lease runs out.
 */
df.app.activity(CHANNEL_TURN_ACTIVITY, {
  extraInputs: [df.input.durableClient()],
  handler: async (input: ChannelTurnRef, context) => ({
    closed: await runChannelTurns(orchestrationClient(context), input),
  }),
});

const channelTurn: OrchestrationHandler = function* (context: OrchestrationContext) {
  return yield context.df.callActivity(CHANNEL_TURN_ACTIVITY, context.df.getInput<ChannelTurnRef>());
};

df.app.orchestration(Orchestrations.channelTurn, channelTurn);
