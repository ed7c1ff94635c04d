import type { WebClient } from "@slack/web-api";
import { loadSlackWebApi } from "../../lazy-sdks.js";
import { escapeMrkdwn, sectionText, slackClientOptions } from "../../notify/channels/platform-b.js";
import type { ChannelProgressSender } from "../inbound/progress-stream.js";
import type { ChannelDeliveryReceipt, ChannelInboundTurn, ChannelOutboundResponse } from "../inbound/types.js";
import { APPROVAL_ACTION_ID } from "./slack-wire.js";

/** At most this many activity lines are listed under a reply (the rest are counted). */
const ACTIVITY_LINES = 10;

/** The Block Kit blocks of a reply: one section (≤ 2,900 characters after escaping), activities, one rich element. */
export function replyBlocks(response: ChannelOutboundResponse): { blocks: unknown[]; degraded: boolean } {
  const markers = response.upstream_truncated ? "\n[UPSTREAM OUTPUT TRUNCATED]" : "";
  const section = sectionText(`${response.text}${markers}`);
  const blocks: unknown[] = [{ type: "section", text: { type: "mrkdwn", text: section.text } }];
  const activities = response.activities ?? [];
  if (activities.length > 0) {
    const lines = activities
      .slice(0, ACTIVITY_LINES)
      .map((a) => `${a.input_kind} ${a.command}: ${a.status}`)
      .join("\n");
    const more = activities.length > ACTIVITY_LINES ? `\n${activities.length - ACTIVITY_LINES} more not shown` : "";
    blocks.push({ type: "context", elements: [{ type: "mrkdwn", text: sectionText(`${lines}${more}`).text }] });
  }
  const rich = response.rich;
  if (rich?.kind === "approval_bounce")
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: "Sign in to decide" },
          // Opens the console, which signs the approver in and asks again: never a decision link.
          url: rich.console_url,
          action_id: "approval_console",
        },
      ],
    });
  if (rich?.kind === "approval_request")
    blocks.push({
      type: "actions",
      elements: [
        {
          type: "button",
          text: { type: "plain_text", text: `Review ${rich.approval_id}` },
          action_id: APPROVAL_ACTION_ID,
          value: rich.approval_id,
        },
      ],
    });
  return { blocks, degraded: section.degraded };
}

/**
 * Posts replies with `chat.postMessage` through `@slack/web-api` (the outbound channel's client
 * settings: no client retries, no absolute URLs). Acknowledgement is `ok: true` with a `ts` (spec
 * §7 item 9); an HTTP or API rejection is definitive, anything else is ambiguous and not retried
 * (spec §3 reply delivery).
 */
export function createSlackReplier(options: { apiUrl: string; token: string }) {
  // The SDK loads on the first reply (shared/lazy-sdks.ts); the client is made once.
  let client: WebClient | undefined;

  /** One Web API call; `ok: true` with a `ts` is the acknowledgement. */
  async function call(
    operation: string,
    degraded: boolean,
    send: (client: WebClient) => Promise<{ ok?: boolean; ts?: string }>,
  ): Promise<ChannelDeliveryReceipt> {
    const slack = await loadSlackWebApi();
    client ??= new slack.WebClient(options.token, slackClientOptions(options.apiUrl));
    try {
      const result = await send(client);
      if (result.ok === true && typeof result.ts === "string" && result.ts.length > 0)
        return { outcome: "acknowledged", operation, vendor_message_id: result.ts, text_degraded: degraded };
      return { outcome: "ambiguous", operation, reason: "malformed_acknowledgement" };
    } catch (error) {
      if (error instanceof slack.WebAPIRateLimitedError)
        return { outcome: "rejected", operation, retryable: true, reason: "http_429" };
      if (error instanceof slack.WebAPIPlatformError) {
        const code = String(error.data.error);
        if (!/^[a-z][a-z0-9_]{0,80}$/.test(code))
          return { outcome: "ambiguous", operation, reason: "malformed_acknowledgement" };
        return { outcome: "rejected", operation, retryable: false, reason: `platform_error: ${code}` };
      }
      if (error instanceof slack.WebAPIHTTPError)
        return {
          outcome: "rejected",
          operation,
          retryable: error.statusCode >= 500 || error.statusCode === 408,
          reason: `http_${error.statusCode}`,
        };
      return { outcome: "ambiguous", operation, reason: "transport_or_malformed_response" };
    }
  }

  const thread = (turn: ChannelInboundTurn, intent: ChannelOutboundResponse["thread_intent"]) =>
    intent !== "in_conversation" && turn.conversation.thread_id ? { thread_ts: turn.conversation.thread_id } : {};

  const deliver = (turn: ChannelInboundTurn, response: ChannelOutboundResponse): Promise<ChannelDeliveryReceipt> => {
    const { blocks, degraded } = replyBlocks(response);
    return call("chat.postMessage", degraded, (c) =>
      c.chat.postMessage({
        channel: turn.conversation.id,
        ...thread(turn, response.thread_intent),
        text: escapeMrkdwn(response.text).slice(0, 3000),
        blocks: blocks as never,
        unfurl_links: false,
        unfurl_media: false,
      }),
    );
  };

  /**
   * Progress (spec §3 last row): revision 0 is a message in the sender's thread; later revisions
   * and the final reply edit it with `chat.update` on its `ts`.
   */
  const progress: ChannelProgressSender = {
    post: (turn, update) => {
      const section = sectionText(update.text);
      return call("chat.postMessage", section.degraded, (c) =>
        c.chat.postMessage({
          channel: turn.conversation.id,
          ...thread(turn, "in_thread"),
          text: escapeMrkdwn(update.text).slice(0, 3000),
          blocks: [{ type: "section", text: { type: "mrkdwn", text: section.text } }],
          unfurl_links: false,
          unfurl_media: false,
        }),
      );
    },
    update: (turn, ts, update) => {
      const section = sectionText(update.text);
      return call("chat.update", section.degraded, (c) =>
        c.chat.update({
          channel: turn.conversation.id,
          ts,
          text: escapeMrkdwn(update.text).slice(0, 3000),
          blocks: [{ type: "section", text: { type: "mrkdwn", text: section.text } }],
        }),
      );
    },
    replace: (turn, ts, response) => {
      const { blocks, degraded } = replyBlocks(response);
      return call("chat.update", degraded, (c) =>
        c.chat.update({
          channel: turn.conversation.id,
          ts,
          text: escapeMrkdwn(response.text).slice(0, 3000),
          blocks: blocks as never,
        }),
      );
    },
  };

  return Object.assign(deliver, { progress });
}
