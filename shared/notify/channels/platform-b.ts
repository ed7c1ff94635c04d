import type { WebClient } from "@slack/web-api";
import { loadSlackWebApi } from "../../lazy-sdks.js";
import { CHANNEL_TRUNCATED } from "../output-markers.js";
import type { AttemptOutcome, ChannelAdapter } from "../router.js";

export { CHANNEL_TRUNCATED };

/** Slack's Web API base (`SVC_PLATFORM_B_API_URL` default). */
export const SLACK_API_URL = "https://slack.com/api/";
/** A section's text limit after markup escaping (spec §8). */
export const SECTION_LIMIT = 2900;

/** Escapes Slack's three control characters (mrkdwn). */
export const escapeMrkdwn = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Escapes, then clips to `limit` characters without cutting an entity, with the truncation marker. */
export function sectionText(text: string, limit = SECTION_LIMIT): { text: string; degraded: boolean } {
  const escaped = escapeMrkdwn(text);
  if (escaped.length <= limit) return { text: escaped, degraded: false };
  let cut = escaped.slice(0, limit - CHANNEL_TRUNCATED.length - 1);
  const amp = cut.lastIndexOf("&");
  if (amp >= 0 && !cut.slice(amp).includes(";")) cut = cut.slice(0, amp);
  return { text: `${cut}\n${CHANNEL_TRUNCATED}`, degraded: true };
}

/** The Slack Web API client's per-request time limit. */
export const SLACK_CALL_TIMEOUT_MS = 10_000;

/** The SDK client's settings for chat platform B, outbound and replies alike: no client retries (the budget is the matrix's), a per-request time limit, no absolute URLs. */
export function slackClientOptions(apiUrl: string) {
  return {
    slackApiUrl: apiUrl.endsWith("/") ? apiUrl : `${apiUrl}/`,
    retryConfig: { retries: 0 },
    // A hung call ends (ambiguous) rather than holding the reply, the progress stream or the queue's lease.
    timeout: SLACK_CALL_TIMEOUT_MS,
    rejectRateLimitedCalls: true,
    allowAbsoluteUrls: false,
  };
}

/**
 * Chat platform B (Slack; A2–A4: A1 is refused while no user mapping exists, spec §5 item 4):
 * `chat.postMessage` to the alert channel with a header and a section block through
 * `@slack/web-api`. Acknowledgement: `ok: true` and a `ts`; a 429 is retried after its
 * Retry-After by the router (the client's own retries are off, so the budget is the matrix's).
 */
export function createPlatformBChannel(options: { apiUrl: string; token: string; channel: string }): ChannelAdapter {
  // The SDK loads on the first send (shared/lazy-sdks.ts); the client is made once.
  let client: WebClient | undefined;
  return {
    kind: "platform_b",
    operation: "chat.postMessage",
    async send(message, { signal }): Promise<AttemptOutcome> {
      const slack = await loadSlackWebApi();
      client ??= new slack.WebClient(options.token, slackClientOptions(options.apiUrl));
      const section = sectionText(message.body_markdown);
      const call = client.chat.postMessage({
        channel: options.channel,
        text: escapeMrkdwn(message.title).slice(0, 150),
        unfurl_links: false,
        blocks: [
          { type: "header", text: { type: "plain_text", text: message.title.slice(0, 150) } },
          { type: "section", text: { type: "mrkdwn", text: section.text } },
          {
            type: "context",
            elements: [
              {
                type: "mrkdwn",
                text: escapeMrkdwn(
                  `${message.category} · ${message.template_key}${message.audit_id ? ` · audit ${message.audit_id}` : ""}`,
                ),
              },
            ],
          },
        ],
      });
      const aborted = new Promise<never>((_, reject) =>
        signal.addEventListener("abort", () => reject(new Error("timeout")), { once: true }),
      );
      try {
        const result = await Promise.race([call, aborted]);
        if (result.ok === true && typeof result.ts === "string" && result.ts.length > 0)
          return { outcome: "acknowledged", vendor_message_id: result.ts, text_degraded: section.degraded };
        return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
      } catch (error) {
        call.catch(() => undefined);
        if (error instanceof slack.WebAPIRateLimitedError)
          return { outcome: "rejected", retryable: true, retry_after_ms: error.retryAfter * 1000, reason: "http_429" };
        if (error instanceof slack.WebAPIPlatformError) {
          // The SDK reports a body that is not the API's JSON as a "platform error" carrying that
          // body; only a real error code (snake_case) is the API's rejection.
          const code = String(error.data.error);
          if (!/^[a-z][a-z0-9_]{0,80}$/.test(code))
            return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
          return { outcome: "rejected", retryable: false, reason: `platform_error: ${code}` };
        }
        if (error instanceof slack.WebAPIHTTPError)
          return {
            outcome: "rejected",
            retryable: error.statusCode >= 500 || error.statusCode === 408,
            reason: `http_${error.statusCode}`,
          };
        if (error instanceof slack.WebAPIRequestError) {
          const code = (error.original as NodeJS.ErrnoException & { cause?: { code?: string } }).cause?.code;
          if (code === "ECONNREFUSED")
            return { outcome: "rejected", retryable: true, reason: "not sent: ECONNREFUSED" };
          // A body that is not JSON on a 200 (or a cut transport): the post may exist.
          return { outcome: "ambiguous", reason: "transport_or_malformed_response" };
        }
        return { outcome: "ambiguous", reason: signal.aborted ? "timeout" : "transport_interrupted" };
      }
    },
  };
}
