import { SmsClient } from "@azure/communication-sms";
import type { KeyCredential, TokenCredential } from "@azure/core-auth";
import type { AttemptOutcome, ChannelAdapter, OutboundMessage } from "../router.js";
import { acsRequestRefusal } from "./acs-refusal.js";

/** One SMS segment of GSM-7 text: the message is kept to it, so a page is never split or reordered. */
export const SMS_LIMIT = 160;

/**
 * The SMS text (spec: severity, audit id and a short runbook URL only): nothing of the title or
 * body, which may carry names or resource ids, ever goes to a phone.
 */
export function smsText(message: OutboundMessage, runbookUrl: string | undefined): string {
  const parts = [
    `blastplane ${(message.severity ?? "high").toUpperCase()}`,
    message.audit_id ? `audit ${message.audit_id}` : undefined,
  ].filter(Boolean);
  const text = parts.join(" · ");
  const withRunbook = runbookUrl ? `${text} · ${runbookUrl}` : text;
  return withRunbook.length <= SMS_LIMIT ? withRunbook : text.slice(0, SMS_LIMIT);
}

/**
 * SMS (A2) through Azure Communication Services with `@azure/communication-sms`: one send to every
 * operational number. In Azure the client authenticates with the process's managed identity; the
 * SDK's own retries are off, so the budget is the matrix's. Acknowledgement: every recipient's
 * result `successful` with a `messageId`. A recipient ACS refused while others were accepted is a
 * definitive failure of the message (a retry would page the others twice).
 */
export function createSmsChannel(options: {
  endpoint: string;
  from: string;
  to: readonly string[];
  credential: TokenCredential | KeyCredential;
  defaultRunbookUrl?: string;
  ca?: string | Buffer;
}): ChannelAdapter {
  const client = new SmsClient(
    options.endpoint,
    options.credential as TokenCredential,
    {
      retryOptions: { maxRetries: 0 },
      ...(options.ca ? { tlsOptions: { ca: options.ca.toString() } } : {}),
    } as ConstructorParameters<typeof SmsClient>[2],
  );
  return {
    kind: "sms",
    operation: "sms.send",
    async send(message, { signal }): Promise<AttemptOutcome> {
      const runbook = message.runbook_url ?? options.defaultRunbookUrl;
      const text = smsText(message, runbook?.startsWith("https://") ? runbook : undefined);
      try {
        const results = await client.send(
          { from: options.from, to: [...options.to], message: text },
          { enableDeliveryReport: false, abortSignal: signal },
        );
        const accepted = results.filter((r) => r.successful && typeof r.messageId === "string" && r.messageId);
        if (results.length === options.to.length && accepted.length === results.length)
          return { outcome: "acknowledged", vendor_message_id: accepted.map((r) => r.messageId).join(",") };
        const refused = results.find((r) => !r.successful);
        if (refused && accepted.length === 0 && refused.httpStatusCode >= 400)
          return {
            outcome: "rejected",
            retryable: refused.httpStatusCode === 429 || refused.httpStatusCode >= 500,
            reason: `recipient_http_${refused.httpStatusCode}`,
          };
        if (refused) return { outcome: "rejected", retryable: false, reason: "partially_delivered" };
        return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
      } catch (error) {
        if (signal.aborted) return { outcome: "ambiguous", reason: "timeout" };
        const refused = acsRequestRefusal(error);
        if (refused) return refused;
        return { outcome: "ambiguous", reason: "transport_interrupted" };
      }
    },
  };
}
