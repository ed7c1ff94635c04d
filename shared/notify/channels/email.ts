import { loadNodemailer } from "../../lazy-sdks.js";
import type { AttemptOutcome, ChannelAdapter, OutboundMessage } from "../router.js";
import { renderEmail } from "../templates.js";

/**
 * Email over SMTP (A2, A4: send-only, spec §5 item 4) through nodemailer. `smtp://` upgrades with
 * STARTTLS and refuses to send in the clear (`requireTLS`) unless `allowPlain` (the local stack's
 * loopback mail server); `smtps://` is TLS from the first byte. Acknowledgement: the server
 * accepted at least one recipient (its 250 after DATA) and nodemailer returned the message id.
 */
export function createEmailChannel(options: {
  url: string;
  from: string;
  to: readonly string[];
  credential?: { user: string; pass: string };
  allowPlain?: boolean;
  consoleBaseUrl?: string;
  ca?: string | Buffer;
}): ChannelAdapter {
  const url = new URL(options.url);
  const secure = url.protocol === "smtps:";
  const settings = {
    host: url.hostname,
    port: Number(url.port || (secure ? 465 : 587)),
    secure,
    requireTLS: !secure && !options.allowPlain,
    ...(options.credential ? { auth: { user: options.credential.user, pass: options.credential.pass } } : {}),
    ...(options.ca ? { tls: { ca: options.ca } } : {}),
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  };
  // nodemailer loads on the first send (shared/lazy-sdks.ts); the transport is made once.
  const transport = async () => (await loadNodemailer()).createTransport(settings);
  let made: ReturnType<typeof transport> | undefined;
  return {
    kind: "email",
    operation: "smtp.send",
    async send(message: OutboundMessage, { signal, messageId }): Promise<AttemptOutcome> {
      const mail = renderEmail(message, options.consoleBaseUrl);
      made ??= transport();
      made.catch(() => {
        made = undefined;
      });
      const sending = made.then((t) =>
        t.sendMail({
          from: options.from,
          to: [...options.to],
          subject: mail.subject,
          text: mail.text,
          html: mail.html,
          // The same Message-ID on a retry, so a mailbox that got the first can thread or drop the second.
          messageId: `<${messageId.slice(0, 40)}@blastplane.notify>`,
          headers: { "X-Blastplane-Category": message.category, "X-Blastplane-Template": message.template_key },
        }),
      );
      const aborted = new Promise<never>((_, reject) =>
        signal.addEventListener("abort", () => reject(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" })), {
          once: true,
        }),
      );
      try {
        const info = await Promise.race([sending, aborted]);
        if (Array.isArray(info.accepted) && info.accepted.length > 0 && typeof info.messageId === "string")
          return { outcome: "acknowledged", vendor_message_id: info.messageId };
        return { outcome: "rejected", retryable: false, reason: "no_recipient_accepted" };
      } catch (error) {
        sending.catch(() => undefined);
        const e = error as { code?: string; responseCode?: number; command?: string };
        if (typeof e.responseCode === "number")
          return {
            outcome: "rejected",
            retryable: e.responseCode >= 400 && e.responseCode < 500,
            reason: `smtp_${e.responseCode}`,
          };
        // Nothing was sent: no connection, no TLS, no login.
        if (e.code === "ECONNECTION" || e.code === "EDNS" || e.code === "ETLS" || e.code === "EAUTH")
          return {
            outcome: "rejected",
            retryable: e.code === "ECONNECTION" || e.code === "EDNS",
            reason: `smtp_${e.code}`,
          };
        // Failed while connecting, upgrading to TLS or logging in: the message was not handed over yet.
        if (e.command === "CONN" || e.command === "STARTTLS" || e.command?.startsWith("AUTH"))
          return {
            outcome: "rejected",
            retryable: false,
            reason: `smtp_${e.code ?? "ESOCKET"}_${e.command.split(" ")[0]}`,
          };
        return {
          outcome: "ambiguous",
          reason: signal.aborted ? "timeout" : `smtp_${e.code ?? "transport_interrupted"}`,
        };
      }
    },
  };
}
