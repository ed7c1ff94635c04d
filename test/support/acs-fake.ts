import { createHash, createHmac, randomUUID, timingSafeEqual } from "node:crypto";
import https from "node:https";
import { type FakeServer, type Recorded, serve } from "./notify-vendors.js";

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

/**
 * Azure Communication Services Email over HTTPS, as the service answers
 * `@azure/communication-email`: `POST /emails:send?api-version=…` checks the caller — a bearer
 * token, or an HMAC-SHA256 signature it recomputes from the access key over the method, path and
 * query, `x-ms-date`, host and `x-ms-content-sha256` (itself checked against the body), the date
 * within 15 minutes — then the message (sender, subject, a body, at least one recipient, the
 * `Operation-Id` a GUID) and answers 202 `{id, status: "Running"}` with `Operation-Location`;
 * `GET /emails/operations/{id}?api-version=…` (checked the same way) answers `Running` for
 * `runningPolls` polls, then `Succeeded`, or `Failed` with ACS's `{error: {code, message}}` when a
 * recipient is in `refuse`. Errors: 400 / 401 / 404 / 429 with `{error: {code, message}}`.
 * `sent` keeps each accepted message by operation id.
 */
export async function startAcsEmailFake(options: {
  tls: { key: string; cert: string };
  token?: string;
  /** The resource's access key (base64), for HMAC-signed requests. */
  accessKey?: string;
  refuse?: Set<string>;
  runningPolls?: number;
  retryAfterSeconds?: number;
}) {
  const operations = new Map<string, { polls: number; failed: boolean }>();
  const sent = new Map<string, Record<string, unknown>>();
  const auth = { bearer: 0, hmac: 0 };
  const error = (res: import("node:http").ServerResponse, status: number, code: string, message: string) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code, message } }));
  };
  const authorized = (r: Recorded, method: string): boolean => {
    const header = String(r.headers.authorization ?? "");
    if (options.token && header === `Bearer ${options.token}`) {
      auth.bearer++;
      return true;
    }
    const hmac = /^HMAC-SHA256 SignedHeaders=x-ms-date;host;x-ms-content-sha256&Signature=(.+)$/.exec(header);
    if (!options.accessKey || !hmac) return false;
    const date = String(r.headers["x-ms-date"] ?? "");
    const hash = createHash("sha256").update(r.body).digest("base64");
    if (r.headers["x-ms-content-sha256"] !== hash) return false;
    if (!(Math.abs(Date.now() - Date.parse(date)) < 15 * 60_000)) return false;
    const toSign = `${method}\n${r.path}\n${date};${r.headers.host};${hash}`;
    const expected = createHmac("sha256", Buffer.from(options.accessKey, "base64")).update(toSign).digest();
    const given = Buffer.from(hmac[1] ?? "", "base64");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    auth.hmac++;
    return true;
  };
  const fake = await serve(https.createServer(options.tls), "https", (r, res) => {
    const url = new URL(r.path, "https://acs.local");
    if (!/^\d{4}-\d{2}-\d{2}(-preview)?$/.test(url.searchParams.get("api-version") ?? ""))
      return error(res, 404, "NotFound", "The api-version is missing or unknown.");
    const poll = /^\/emails\/operations\/([0-9a-f-]{36})$/.exec(url.pathname);
    if (r.method !== (poll ? "GET" : "POST")) return error(res, 405, "MethodNotAllowed", "Method not allowed.");
    if (!authorized(r, r.method)) return error(res, 401, "Unauthorized", "Denied by the authentication policy.");
    if (poll) {
      const id = poll[1] as string;
      const op = operations.get(id);
      if (!op) return error(res, 404, "NotFound", "No such operation.");
      op.polls++;
      const status = op.polls <= (options.runningPolls ?? 1) ? "Running" : op.failed ? "Failed" : "Succeeded";
      res.writeHead(200, {
        "content-type": "application/json",
        ...(status === "Running" && options.retryAfterSeconds !== undefined
          ? { "retry-after": String(options.retryAfterSeconds) }
          : {}),
      });
      return res.end(
        JSON.stringify({
          id,
          status,
          ...(status === "Failed"
            ? { error: { code: "EmailDroppedAllRecipientsSuppressed", message: "Message was dropped." } }
            : {}),
        }),
      );
    }
    if (url.pathname !== "/emails:send") return error(res, 404, "NotFound", "Unknown path.");
    const id = String(r.headers["operation-id"] ?? randomUUID());
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id))
      return error(res, 400, "InvalidOperationId", "Operation-Id must be a GUID.");
    let body: {
      senderAddress?: unknown;
      content?: { subject?: unknown; plainText?: unknown; html?: unknown };
      recipients?: { to?: { address?: unknown }[] };
    };
    try {
      body = JSON.parse(r.body) as typeof body;
    } catch {
      return error(res, 400, "BadRequest", "The request body is not valid JSON.");
    }
    const to = body.recipients?.to ?? [];
    if (
      typeof body.senderAddress !== "string" ||
      typeof body.content?.subject !== "string" ||
      (typeof body.content.plainText !== "string" && typeof body.content.html !== "string") ||
      !Array.isArray(to) ||
      to.length === 0 ||
      to.some((t) => typeof t.address !== "string" || !/^[^@\s]+@[^@\s]+$/.test(t.address))
    )
      return error(res, 400, "BadRequest", "senderAddress, content.subject, a body and recipients.to are required.");
    if (r.body.length > 10 * 1024 * 1024) return error(res, 413, "PayloadTooLarge", "The request exceeds 10 MB.");
    if (!operations.has(id)) {
      operations.set(id, { polls: 0, failed: to.some((t) => options.refuse?.has(String(t.address))) });
      sent.set(id, JSON.parse(r.body) as Record<string, unknown>);
    }
    const host = String(r.headers.host);
    res.writeHead(202, {
      "content-type": "application/json",
      "operation-location": `https://${host}/emails/operations/${id}?api-version=${url.searchParams.get("api-version")}`,
      "operation-id": id,
      ...(options.retryAfterSeconds !== undefined ? { "retry-after": String(options.retryAfterSeconds) } : {}),
    });
    res.end(JSON.stringify({ id, status: "Running" }));
  });
  return Object.assign(fake, { sent, auth });
}
