import { createHash } from "node:crypto";
import { EmailClient, type EmailSendResponse } from "@azure/communication-email";
import type { KeyCredential, TokenCredential } from "@azure/core-auth";
import type { AttemptOutcome, ChannelAdapter, OutboundMessage } from "../router.js";
import { renderEmail } from "../templates.js";
import { acsRequestRefusal } from "./acs-refusal.js";

/** A GUID derived from the router's message id: the same on every attempt of one message. */
export function acsOperationId(messageId: string): string {
  const h = createHash("sha256").update(`acs-email\n${messageId}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((Number.parseInt(h[16] ?? "0", 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/**
 * Cloud mail (A2, A4; spec §5 item 4 "Email (SMTP or cloud mail)") through Azure Communication
 * Services with `@azure/communication-email`: the same rendered email as the SMTP channel (the
 * incident-open email's fields and HTTPS console link) sent as `POST /emails:send`, then the
 * long-running operation polled at its `Operation-Location` until ACS reports it. The client signs
 * in with the app's managed identity (a bearer token for the ACS scope) or, given an access key,
 * signs each request with HMAC-SHA256 as ACS expects. The SDK's own retries are off, so the
 * budget is the matrix's; every attempt of one message carries the same `Operation-Id`.
 *
 * Acknowledgement: the operation's final status `Succeeded` with its id. `Failed` or `Canceled`
 * (ACS refused the message, e.g. a recipient it will not send to) is a definitive failure. An
 * accepted send whose outcome is never learned — the poll cut off, the time limit reached while
 * ACS still says `Running`, an answer that is not ACS's — is ambiguous: the mail may be on its way.
 */
export function createAcsEmailChannel(options: {
  endpoint: string;
  from: string;
  to: readonly string[];
  credential: TokenCredential | KeyCredential;
  consoleBaseUrl?: string;
  ca?: string | Buffer;
  /** Between two polls of the operation when ACS names no Retry-After (default 2 s). */
  pollIntervalMs?: number;
}): ChannelAdapter {
  const client = new EmailClient(
    options.endpoint,
    options.credential as TokenCredential,
    {
      retryOptions: { maxRetries: 0 },
      ...(options.ca ? { tlsOptions: { ca: options.ca.toString() } } : {}),
    } as ConstructorParameters<typeof EmailClient>[2],
  );
  return {
    kind: "email",
    operation: "emails.send",
    async send(message: OutboundMessage, { signal, messageId }): Promise<AttemptOutcome> {
      const mail = renderEmail(message, options.consoleBaseUrl);
      let accepted = false;
      try {
        const poller = await client.beginSend(
          {
            senderAddress: options.from,
            content: { subject: mail.subject, plainText: mail.text, html: mail.html },
            recipients: { to: options.to.map((address) => ({ address })) },
            headers: { "X-Blastplane-Category": message.category, "X-Blastplane-Template": message.template_key },
            // Operational mail: no tracking pixels or rewritten links.
            disableUserEngagementTracking: true,
          },
          {
            operationId: acsOperationId(messageId),
            updateIntervalInMs: options.pollIntervalMs ?? 2000,
            abortSignal: signal,
            // The send and each poll pass here: once ACS accepted the send, nothing is "not sent" any more.
            onResponse: (raw) => {
              if (raw.request.method === "POST" && raw.status >= 200 && raw.status < 300) accepted = true;
            },
          },
        );
        const result: EmailSendResponse | undefined = await poller.pollUntilDone({ abortSignal: signal });
        if (result?.status === "Succeeded" && typeof result.id === "string" && result.id)
          return { outcome: "acknowledged", vendor_message_id: result.id };
        if (result?.status === "Failed" || result?.status === "Canceled")
          return { outcome: "rejected", retryable: false, reason: `acs_${result.status.toLowerCase()}` };
        return { outcome: "ambiguous", reason: "malformed_acknowledgement" };
      } catch (error) {
        if (signal.aborted) return { outcome: "ambiguous", reason: "timeout" };
        // The poller fails the operation ACS reported failed or canceled: ACS refused the message.
        const text = error instanceof Error ? error.message : "";
        if (accepted && /operation (has )?(failed|was canceled|cancelled)/i.test(text))
          return {
            outcome: "rejected",
            retryable: false,
            reason: /cancel/i.test(text) ? "acs_canceled" : "acs_failed",
          };
        const refused = accepted ? undefined : acsRequestRefusal(error);
        if (refused) return refused;
        // Cut while sending, or after ACS accepted it while polling: the mail may go out.
        return { outcome: "ambiguous", reason: accepted ? "operation_unknown" : "transport_interrupted" };
      }
    },
  };
}
