import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { testCertificate } from "./test-certificate.js";

export { testCertificate };

/**
 * Local servers that speak the notification vendors' wire formats, so each channel's real client
 * library (nodemailer, @slack/web-api, standardwebhooks, the PagerDuty Events v2 HTTPS call) is
 * tested end to end: a real SMTP server with STARTTLS, Slack's Web API `chat.postMessage`,
 * PagerDuty's `/v2/enqueue` over HTTPS, a webhook receiver. Each answers from a script of
 * behaviours (default: the vendor's success), including the vendor's error bodies and 429s.
 */

export interface Recorded {
  method?: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** How the fake answers the next request. */
export type Behaviour =
  | "ok"
  | { status: number; body?: string; headers?: Record<string, string> }
  /** Reads the request, then destroys the socket without answering. */
  | "cut"
  /** Never answers. */
  | "hang";

export interface FakeServer {
  url: string;
  requests: Recorded[];
  /** Behaviours for the next requests, in order; then "ok". */
  script: Behaviour[];
  /** Runs on each request once it is read, before the fake answers (a kill test kills the sender here). */
  onRequest?: (r: Recorded) => void;
  close(): Promise<void>;
}

export async function serve(
  server: http.Server | https.Server,
  protocol: "http" | "https",
  answerOk: (r: Recorded, res: http.ServerResponse) => void,
): Promise<FakeServer> {
  const fake: FakeServer = { url: "", requests: [], script: [], close: async () => undefined };
  const hanging = new Set<http.ServerResponse>();
  server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r: Recorded = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
      };
      fake.requests.push(r);
      fake.onRequest?.(r);
      const b = fake.script.shift() ?? "ok";
      if (b === "ok") return answerOk(r, res);
      if (b === "cut") return req.socket.destroy();
      if (b === "hang") {
        hanging.add(res);
        return;
      }
      res.writeHead(b.status, { "content-type": "application/json", ...b.headers });
      res.end(b.body ?? "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.url = `${protocol}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.close = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.socket?.destroy();
      server.closeAllConnections?.();
      server.close(() => resolve());
    });
  return fake;
}

/**
 * PagerDuty Events API v2 (`POST /v2/enqueue`) over HTTPS: validates the event like the service
 * (routing_key, event_action, payload.summary/source/severity) and answers 202
 * `{status, message, dedup_key}`, or 400 `{status: "invalid event", errors}`.
 */
export function startPagingFake(tls: { key: string; cert: string }) {
  return serve(https.createServer(tls), "https", (r, res) => {
    let event: {
      routing_key?: unknown;
      event_action?: unknown;
      dedup_key?: unknown;
      payload?: { summary?: unknown; source?: unknown; severity?: unknown };
    };
    try {
      event = JSON.parse(r.body) as typeof event;
    } catch {
      event = {};
    }
    const errors: string[] = [];
    if (r.path !== "/v2/enqueue") errors.push("Unknown path");
    if (typeof event.routing_key !== "string" || event.routing_key.length !== 32)
      errors.push("'routing_key' is invalid");
    if (event.event_action !== "trigger") errors.push("'event_action' is invalid");
    if (typeof event.payload?.summary !== "string" || !event.payload.summary)
      errors.push("'payload.summary' is missing");
    if (typeof event.payload?.source !== "string") errors.push("'payload.source' is missing");
    if (!["critical", "error", "warning", "info"].includes(String(event.payload?.severity)))
      errors.push("'payload.severity' is invalid");
    if (errors.length > 0) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: "invalid event", message: "Event object is invalid", errors }));
      return;
    }
    res.writeHead(202, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "success", message: "Event processed", dedup_key: event.dedup_key }));
  });
}

/**
 * Slack's Web API `chat.postMessage` and `chat.update` (of a message it posted): the bot token as a
 * bearer, the form or JSON body the SDK sends, `{ok: true, channel, ts, message}` on success, `{ok: false, error}` on a platform error,
 * 429 with Retry-After when rate limited.
 */
export function startPlatformBFake(token: string) {
  let ts = 1_700_000_000;
  /** Posted message ts → its channel (what `chat.update` may edit). */
  const posted = new Map<string, string>();
  return serve(http.createServer(), "http", (r, res) => {
    const answer = (body: unknown) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (r.headers.authorization !== `Bearer ${token}`) return answer({ ok: false, error: "invalid_auth" });
    const args = postedArgs(r);
    if (r.path.endsWith("/chat.update")) {
      // Edits a message this fake posted, in the channel it was posted to.
      if (posted.get(String(args.ts)) !== args.channel) return answer({ ok: false, error: "message_not_found" });
      return answer({ ok: true, channel: args.channel, ts: args.ts, text: args.text, message: { text: args.text } });
    }
    if (!r.path.endsWith("/chat.postMessage")) return answer({ ok: false, error: "unknown_method" });
    if (!args.channel) return answer({ ok: false, error: "channel_not_found" });
    ts++;
    posted.set(`${ts}.000100`, String(args.channel));
    answer({ ok: true, channel: args.channel, ts: `${ts}.000100`, message: { text: args.text } });
  });
}

/** The arguments of a Web API call, from a form or a JSON body. */
export function postedArgs(r: Recorded): Record<string, unknown> {
  if (String(r.headers["content-type"]).startsWith("application/json"))
    return JSON.parse(r.body) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [k, v] of new URLSearchParams(r.body)) out[k] = k === "blocks" ? JSON.parse(v) : v;
  return out;
}

/** A webhook receiver: answers 204 and keeps each delivery. */
export function startWebhookReceiver() {
  return serve(http.createServer(), "http", (_r, res) => {
    res.writeHead(204);
    res.end();
  });
}

/** A real SMTP server (smtp-server) with STARTTLS, keeping each message's envelope and raw text. */
export async function startSmtpFake(
  tls: { key: string; cert: string },
  options: { auth?: { user: string; pass: string } } = {},
) {
  const messages: { from: string; to: string[]; raw: string; secure: boolean }[] = [];
  /** SMTP reply codes for the next messages (e.g. 451 or 550), then acceptance. */
  const script: number[] = [];
  const server = new SMTPServer({
    key: tls.key,
    cert: tls.cert,
    authOptional: !options.auth,
    ...(options.auth ? {} : { disabledCommands: ["AUTH"] }),
    logger: false,
    onAuth(auth, _session, callback) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass)
        return callback(null, { user: auth.username });
      return callback(new Error("Invalid username or password"));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const code = script.shift();
        if (code)
          return callback(
            Object.assign(new Error(code >= 500 ? "Mailbox unavailable" : "Try again later"), { responseCode: code }),
          );
        messages.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString("utf8"),
          secure: session.secure,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    script,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
