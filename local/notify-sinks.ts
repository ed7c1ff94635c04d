import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { SMTPServer } from "smtp-server";
import { Webhook } from "standardwebhooks";
import type { Logger } from "../shared/logging/logger.js";
import { createFileSecretStore } from "../shared/secrets/api-tokens.js";
import { writeFileDurablySync } from "../shared/storage/durable-file.js";

/** The local stack's webhook secret, in its secret folder (the Key Vault stand-in). */
export const LOCAL_WEBHOOK_SECRET = "notify-webhook-secret";

/**
 * What a person trying the product sees of its notifications without a vendor account: a local
 * mail server that keeps each message as an `.eml` file under `<data>/mail/`, and a local webhook
 * receiver that verifies each delivery's Standard Webhooks signature and keeps it as JSON under
 * `<data>/notifications/webhook/`. Both listen on loopback only. Returns the settings that route
 * the local matrix to them (each only where the operator has not configured that channel).
 */
export async function startLocalNotifySinks(options: {
  dataDir: string;
  secretsDir: string;
  env: NodeJS.ProcessEnv;
  logger: Logger;
}): Promise<{
  env: Record<string, string>;
  mailDir: string;
  webhookDir: string;
  inboxDir: string;
  stop(): Promise<void>;
}> {
  const mailDir = path.join(options.dataDir, "mail");
  const webhookDir = path.join(options.dataDir, "notifications", "webhook");
  const inboxDir = path.join(options.dataDir, "notifications", "inbox");
  for (const dir of [mailDir, webhookDir, inboxDir]) mkdirSync(dir, { recursive: true });
  const stamp = () => `${new Date().toISOString().replace(/[:.]/g, "-")}-${randomBytes(3).toString("hex")}`;

  const smtp = new SMTPServer({
    // Loopback only: no TLS, no login (the email channel allows plain SMTP only to 127.0.0.1 in the local profile).
    disabledCommands: ["STARTTLS", "AUTH"],
    authOptional: true,
    logger: false,
    size: 1024 * 1024,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        try {
          writeFileDurablySync(path.join(mailDir, `${stamp()}.eml`), Buffer.concat(chunks));
          callback();
        } catch (error) {
          callback(error instanceof Error ? error : new Error(String(error)));
        }
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  const smtpPort = (smtp.server.address() as AddressInfo).port;

  const secrets = createFileSecretStore(options.secretsDir);
  let secret = await secrets.get(LOCAL_WEBHOOK_SECRET);
  if (!secret) {
    secret = `whsec_${randomBytes(32).toString("base64")}`;
    await secrets.set(LOCAL_WEBHOOK_SECRET, secret);
  }
  const verifier = new Webhook(secret);
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= 256 * 1024) chunks.push(c);
    });
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      try {
        const payload = verifier.verify(body, req.headers as Record<string, string>);
        writeFileDurablySync(
          path.join(webhookDir, `${stamp()}.json`),
          `${JSON.stringify({ webhook_id: req.headers["webhook-id"], verified: true, payload }, null, 2)}\n`,
        );
        res.writeHead(204).end();
      } catch {
        res.writeHead(400, { "content-type": "application/json" }).end('{"detail":"signature did not verify"}');
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const webhookPort = (receiver.address() as AddressInfo).port;

  const env: Record<string, string> = { SVC_NOTIFY_INBOX_DIR: inboxDir };
  if (!options.env.SVC_SMTP_URL) {
    env.SVC_SMTP_URL = `smtp://127.0.0.1:${smtpPort}`;
    env.SVC_EMAIL_FROM = options.env.SVC_EMAIL_FROM ?? "blastplane@localhost.localdomain";
    env.SVC_EMAIL_TO = options.env.SVC_EMAIL_TO ?? "operators@localhost.localdomain";
  }
  if (!options.env.SVC_WEBHOOK_URL) {
    env.SVC_WEBHOOK_URL = `http://127.0.0.1:${webhookPort}/notifications`;
    env.SVC_WEBHOOK_SECRET_REF = `kv:${LOCAL_WEBHOOK_SECRET}`;
  }
  options.logger.info("local notification sinks ready", {
    mail_dir: mailDir,
    webhook_dir: webhookDir,
    inbox_dir: inboxDir,
  });
  return {
    env,
    mailDir,
    webhookDir,
    inboxDir,
    stop: async () => {
      await Promise.all([
        new Promise<void>((resolve) => smtp.close(() => resolve())),
        new Promise<void>((resolve) => {
          receiver.close(() => resolve());
          receiver.closeAllConnections();
        }),
      ]);
    },
  };
}
