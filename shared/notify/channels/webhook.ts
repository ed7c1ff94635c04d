import type { Webhook } from "standardwebhooks";
import { loadStandardWebhooks } from "../../lazy-sdks.js";
import type { ChannelAdapter } from "../router.js";
import { postJson, rejectionOutcome, thrownOutcome } from "./http-post.js";

/**
 * The generic webhook (A2; spec §5 item 4): a Standard Webhooks delivery — JSON body, a unique
 * `webhook-id` per message (the same on a retry, so a receiver deduplicates), `webhook-timestamp`
 * and the HMAC-SHA256 `webhook-signature` made with `standardwebhooks` from the `whsec_…` secret.
 * Acknowledgement: a 2xx answer.
 */
export function createWebhookChannel(options: { url: string; secret: string; ca?: string | Buffer }): ChannelAdapter {
  // The signer's library loads on the first send (shared/lazy-sdks.ts); the signer is made once.
  let signer: Webhook | undefined;
  return {
    kind: "webhook",
    operation: "webhook.post",
    async send(message, { signal, messageId }) {
      signer ??= new (await loadStandardWebhooks()).Webhook(options.secret);
      const id = `msg_${messageId.slice(0, 32)}`;
      const timestamp = new Date();
      const body = JSON.stringify({
        type: `blastplane.${message.template_key}`,
        timestamp: timestamp.toISOString(),
        data: {
          category: message.category,
          template_key: message.template_key,
          title: message.title,
          body_markdown: message.body_markdown,
          correlation_id: message.correlation_id,
          ...(message.audit_id ? { audit_id: message.audit_id } : {}),
          ...(message.severity ? { severity: message.severity } : {}),
          ...(message.runbook_url ? { runbook_url: message.runbook_url } : {}),
          ...(message.console_url ? { console_url: message.console_url } : {}),
          ...(message.params ? { params: message.params } : {}),
        },
      });
      const sign = signer.sign.bind(signer);
      try {
        const response = await postJson(options.url, body, {
          signal,
          ...(options.ca ? { ca: options.ca } : {}),
          headers: {
            "webhook-id": id,
            "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
            "webhook-signature": sign(id, timestamp, body),
          },
        });
        if (response.status >= 200 && response.status < 300) return { outcome: "acknowledged", vendor_message_id: id };
        return rejectionOutcome(response);
      } catch (error) {
        return thrownOutcome(error, signal);
      }
    },
  };
}
