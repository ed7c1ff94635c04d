import https from "node:https";
import { type FakeServer, serve } from "./notify-vendors.js";

/**
 * Azure Communication Services SMS (`POST /sms?api-version=…`) over HTTPS, as the service answers
 * `@azure/communication-sms`: the bearer token checked, each recipient validated (E.164), 202 with
 * one result per recipient (`to`, `messageId`, `httpStatusCode`, `repeatabilityResult`,
 * `successful`, `errorMessage`); 401 / 400 / 429 with ACS's error body `{error: {code, message}}`.
 * `refuse` lists numbers ACS answers per recipient with 400 (e.g. not reachable).
 */
export function startAcsSmsFake(options: { tls: { key: string; cert: string }; token: string; refuse?: Set<string> }) {
  let next = 1;
  const error = (res: import("node:http").ServerResponse, status: number, code: string, message: string) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  return serve(https.createServer(options.tls), "https", (r, res) => {
    if (!/^\/sms\?api-version=\d{4}-\d{2}-\d{2}/.test(r.path)) return error(res, 404, "NotFound", "Unknown path");
    if (r.headers.authorization !== `Bearer ${options.token}`)
      return error(res, 401, "Unauthorized", "The access token is missing or invalid.");
    let body: {
      from?: unknown;
      message?: unknown;
      smsRecipients?: { to?: unknown; repeatabilityRequestId?: unknown }[];
    };
    try {
      body = JSON.parse(r.body) as typeof body;
    } catch {
      return error(res, 400, "BadRequest", "The request body is not valid JSON.");
    }
    if (typeof body.from !== "string" || typeof body.message !== "string" || !Array.isArray(body.smsRecipients))
      return error(res, 400, "BadRequest", "from, message and smsRecipients are required.");
    if (body.message.length > 2048) return error(res, 400, "BadRequest", "The message is too long.");
    const value = body.smsRecipients.map((recipient) => {
      const to = String(recipient.to);
      if (!/^\+[1-9]\d{6,14}$/.test(to) || options.refuse?.has(to))
        return {
          to,
          httpStatusCode: 400,
          repeatabilityResult: "accepted",
          successful: false,
          errorMessage: "Invalid To phone number format.",
        };
      return {
        to,
        messageId: `Outgoing_${String(next++).padStart(8, "0")}_noam`,
        httpStatusCode: 202,
        repeatabilityResult: "accepted",
        successful: true,
      };
    });
    res.writeHead(202, { "content-type": "application/json" });
    res.end(JSON.stringify({ value }));
  });
}

export type { FakeServer };
