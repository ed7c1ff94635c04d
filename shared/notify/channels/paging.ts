import type { ChannelAdapter } from "../router.js";
import { postJson, rejectionOutcome, thrownOutcome } from "./http-post.js";

/** PagerDuty's Events API v2 endpoint (`SVC_PAGING_EVENTS_URL` default). */
export const PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue";

const SEVERITY = { critical: "critical", high: "error", medium: "warning", low: "info", info: "info" } as const;

/**
 * The paging service (A2): a PagerDuty Events API v2 `trigger` over HTTPS. `dedup_key` is the
 * observability correlation id, so repeated alerts of one correlation open one incident; a runbook
 * URL is mandatory (the message's, else the channel's); the acknowledgement is the event's
 * `dedup_key` in a 202 `{"status":"success"}` — anything else is not a delivered page.
 */
export function createPagingChannel(options: {
  eventsUrl: string;
  routingKey: string;
  defaultRunbookUrl: string | undefined;
  source?: string;
  ca?: string | Buffer;
}): ChannelAdapter {
  return {
    kind: "paging",
    operation: "events.enqueue",
    async send(message, { signal }) {
      const runbook = message.runbook_url ?? options.defaultRunbookUrl;
      if (!runbook?.startsWith("https://"))
        return { outcome: "rejected", retryable: false, reason: "runbook_url_missing" };
      const dedupKey = message.correlation_id.slice(0, 255);
      const body = JSON.stringify({
        routing_key: options.routingKey,
        event_action: "trigger",
        dedup_key: dedupKey,
        payload: {
          summary: `${message.title}: ${message.body_markdown}`.slice(0, 1024),
          source: options.source ?? "blastplane",
          severity: SEVERITY[message.severity ?? "high"],
          custom_details: {
            template_key: message.template_key,
            ...(message.audit_id ? { audit_id: message.audit_id } : {}),
            runbook_url: runbook,
          },
        },
        links: [
          { href: runbook, text: "Runbook" },
          ...(message.console_url ? [{ href: message.console_url, text: "Console" }] : []),
        ],
      });
      try {
        const response = await postJson(options.eventsUrl, body, { signal, ...(options.ca ? { ca: options.ca } : {}) });
        if (response.status !== 202) {
          if (response.status >= 200 && response.status < 300)
            return { outcome: "ambiguous", reason: `unexpected_status_${response.status}` };
          return rejectionOutcome(response);
        }
        let ack: { status?: unknown; dedup_key?: unknown };
        try {
          ack = JSON.parse(response.text) as typeof ack;
        } catch {
          return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
        }
        if (ack.status !== "success" || ack.dedup_key !== dedupKey)
          return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
        return { outcome: "acknowledged", vendor_message_id: dedupKey };
      } catch (error) {
        return thrownOutcome(error, signal);
      }
    },
  };
}
