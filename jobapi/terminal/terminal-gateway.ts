import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { BearerValidator } from "../../shared/auth/authorize.js";
import { normalizeObjectId, sameObjectId } from "../../shared/auth/object-id.js";
import { type Caller, hasRoleAtLeast } from "../../shared/auth/roles.js";
import { DependencyUnavailableError, UnauthorizedError } from "../../shared/errors.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "../../shared/http/request-id.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { AuditInput, AuditLog } from "../../shared/ops/audit.js";
import { TERMINAL_ROLE_FLOOR } from "../../shared/terminal/terminal-ticket-service.js";
import { type TerminalTicketStore, TerminalTicketRefusedError } from "../../shared/terminal/terminal-tickets.js";
import {
  BEARER_SUBPROTOCOL_PREFIX,
  TERMINAL_CLOSE,
  TERMINAL_SUBPROTOCOL,
  type TerminalSessionMessage,
  terminalControlSchema,
  TICKET_SUBPROTOCOL_PREFIX,
} from "./terminal-protocol.js";

/** The path of the terminal's WebSocket on the job API. */
export const TERMINAL_PATH = "/v1/terminal";

/** Limits of the terminal's sessions (the `JOBAPI_TERMINAL_*` settings). */
export interface TerminalLimits {
  idleTimeoutMs: number;
  maxSessionMs: number;
  maxSessionsPerUser: number;
  /** The largest frame a browser may send (a larger one closes the session with 1009). */
  maxMessageBytes: number;
  /** Unsent bytes either way before the sending side is paused. */
  bufferBytes: number;
}

/** What the gateway is built from. */
export interface TerminalGatewayDependencies {
  /** Validates the browser's access token; undefined when the job API has no auth settings (503). */
  validator: BearerValidator | undefined;
  tickets: Pick<TerminalTicketStore, "redeem">;
  audit: Pick<AuditLog, "record">;
  logger: Logger;
  /** Origins a page may open the terminal from (exact `scheme://host[:port]`). */
  allowedOrigins: readonly string[];
  /** The daemon, `ws://127.0.0.1:<port>`. */
  daemonUrl: string;
  limits: TerminalLimits;
}

/** What a test or an operator can see of a live session (never its bytes). */
export interface TerminalSessionStats {
  session_id: string;
  oid: string;
  bytes_in: number;
  bytes_out: number;
  /** Output sent to the browser and not yet taken by its socket. */
  pending_to_client: number;
  /** The most that was ever pending to the browser. */
  max_pending_to_client: number;
  pending_to_daemon: number;
  max_pending_to_daemon: number;
  /** Reading from the daemon is paused (the browser is not keeping up). */
  daemon_paused: boolean;
  client_paused: boolean;
}

/** The job API's terminal: refuses or upgrades `GET /v1/terminal`, then relays to the daemon. */
export interface TerminalGateway {
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  sessions(): TerminalSessionStats[];
  /** Closes every session (audited) and stops accepting new ones. */
  close(): Promise<void>;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly auditReason?: string,
  ) {
    super(message);
  }
}

function refuse(socket: Duplex, status: number, detail: string, requestId: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify({ detail, request_id: requestId });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
      "Content-Type: application/json\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `${REQUEST_ID_HEADER}: ${requestId}\r\n` +
      "X-Content-Type-Options: nosniff\r\n" +
      "Connection: close\r\n\r\n" +
      body,
  );
}

/** The offered subprotocols: the terminal's own, the bearer token and the ticket. */
function offered(request: IncomingMessage): { protocol: boolean; bearer?: string; ticket?: string } {
  const list = (request.headers["sec-websocket-protocol"] ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  const offeredValue = (prefix: string) => list.find((p) => p.startsWith(prefix))?.slice(prefix.length);
  return {
    protocol: list.includes(TERMINAL_SUBPROTOCOL),
    bearer: offeredValue(BEARER_SUBPROTOCOL_PREFIX),
    ticket: offeredValue(TICKET_SUBPROTOCOL_PREFIX),
  };
}

function connectDaemon(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const daemon = new WebSocket(url, { perMessageDeflate: false });
    daemon.once("open", () => {
      daemon.removeListener("error", reject);
      resolve(daemon);
    });
    daemon.once("error", reject);
  });
}

function dataOf(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * Creates the terminal gateway (decision 0020). Before the upgrade, in order: the terminal is
 * configured (503), the `Origin` is allowed (403), the terminal subprotocol is offered (400), the
 * bearer token is valid (401, B-171), the caller's role is Contributor or higher (403, B-172), the
 * ticket is valid, unused and from this origin (401), it was issued to this caller (403), the
 * caller has a free session (429), the daemon answers (503). Then the socket is relayed to the
 * daemon (B-173) with the session limits and bounded buffers.
 */
export function createTerminalGateway(deps: TerminalGatewayDependencies): TerminalGateway {
  const { logger, limits } = deps;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: limits.maxMessageBytes,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(TERMINAL_SUBPROTOCOL) ? TERMINAL_SUBPROTOCOL : false),
  });
  const perUser = new Map<string, number>();
  const live = new Map<string, { stats: TerminalSessionStats; end: (code: number, reason: string) => void }>();
  const closing = new Set<Promise<unknown>>();
  let stopped = false;

  const record = (entry: AuditInput) => {
    const pending = deps.audit.record(entry).catch((error: unknown) => {
      logger.error("terminal audit failed", { error, action: entry.action });
    });
    closing.add(pending);
    void pending.finally(() => closing.delete(pending));
    return pending;
  };

  async function admit(request: IncomingMessage, requestId: string): Promise<{ caller: Caller; origin: string }> {
    if (stopped) throw new Refusal(503, "the job API is stopping");
    if (!deps.validator) {
      throw new Refusal(503, "the terminal is not configured on this job API (JOBAPI_AUTH_CLIENT_ID)");
    }
    const origin = request.headers.origin;
    if (!origin || !deps.allowedOrigins.includes(origin)) {
      throw new Refusal(403, "this origin may not open the terminal");
    }
    const { protocol, bearer, ticket } = offered(request);
    if (!protocol) throw new Refusal(400, `offer the WebSocket subprotocol ${TERMINAL_SUBPROTOCOL}`);
    if (!bearer) throw new Refusal(401, "an access token is required (subprotocol bearer.<token>)");
    let caller: Caller;
    try {
      caller = await deps.validator.validate(`Bearer ${bearer}`);
    } catch (error) {
      if (error instanceof UnauthorizedError) throw new Refusal(401, error.message);
      if (error instanceof DependencyUnavailableError) throw new Refusal(503, "the identity provider is unavailable");
      throw error;
    }
    const base = {
      actor: { oid: caller.oid, name: caller.name },
      action: "terminal.session_open",
      target: "terminal",
      request_id: requestId,
    };
    const denied = async (status: number, detail: string, reason: string) => {
      await record({ ...base, outcome: "denied", details: { reason, origin } });
      return new Refusal(status, detail);
    };
    if (!hasRoleAtLeast(caller.roles, TERMINAL_ROLE_FLOOR)) {
      throw await denied(403, `the terminal needs the ${TERMINAL_ROLE_FLOOR} role or higher`, "role");
    }
    let binding: Awaited<ReturnType<TerminalTicketStore["redeem"]>>;
    try {
      binding = await deps.tickets.redeem(ticket, origin);
    } catch (error) {
      if (error instanceof TerminalTicketRefusedError) {
        throw await denied(401, error.message, `ticket_${error.reason}`);
      }
      throw error;
    }
    if (!sameObjectId(binding.oid, caller.oid)) {
      throw await denied(403, "the ticket was issued to another user", "ticket_other_user");
    }
    const key = normalizeObjectId(caller.oid);
    if ((perUser.get(key) ?? 0) >= limits.maxSessionsPerUser) {
      throw await denied(429, `at most ${limits.maxSessionsPerUser} terminal sessions per user`, "session_limit");
    }
    return { caller, origin };
  }

  function relay(client: WebSocket, daemon: WebSocket, caller: Caller, origin: string, requestId: string): void {
    const key = normalizeObjectId(caller.oid);
    perUser.set(key, (perUser.get(key) ?? 0) + 1);
    const sessionId = randomUUID();
    const started = Date.now();
    const expiresAt = new Date(started + limits.maxSessionMs);
    const stats: TerminalSessionStats = {
      session_id: sessionId,
      oid: key,
      bytes_in: 0,
      bytes_out: 0,
      pending_to_client: 0,
      max_pending_to_client: 0,
      pending_to_daemon: 0,
      max_pending_to_daemon: 0,
      daemon_paused: false,
      client_paused: false,
    };
    const actor = { oid: caller.oid, name: caller.name };
    void record({
      actor,
      action: "terminal.session_open",
      target: "terminal",
      outcome: "succeeded",
      request_id: requestId,
      details: { session_id: sessionId, origin, expires_at: expiresAt.toISOString() },
    });
    logger.info("terminal session opened", { session_id: sessionId, request_id: requestId });

    let ended = false;
    let idle: NodeJS.Timeout | undefined;
    const maxTimer = setTimeout(
      () => end(TERMINAL_CLOSE.maxDuration.code, TERMINAL_CLOSE.maxDuration.reason),
      limits.maxSessionMs,
    );
    const touch = () => {
      clearTimeout(idle);
      idle = setTimeout(() => end(TERMINAL_CLOSE.idle.code, TERMINAL_CLOSE.idle.reason), limits.idleTimeoutMs);
    };
    touch();

    function end(code: number, reason: string): void {
      if (ended) return;
      ended = true;
      clearTimeout(idle);
      clearTimeout(maxTimer);
      live.delete(sessionId);
      const left = (perUser.get(key) ?? 1) - 1;
      if (left > 0) perUser.set(key, left);
      else perUser.delete(key);
      if (client.readyState === WebSocket.OPEN) client.close(code, reason);
      else client.terminate();
      if (daemon.readyState === WebSocket.OPEN) daemon.close(1000, reason);
      else daemon.terminate();
      // Anything still queued either way is dropped with the sockets.
      setImmediate(() => {
        client.terminate();
        daemon.terminate();
      });
      logger.info("terminal session closed", { session_id: sessionId, code, reason });
      void record({
        actor,
        action: "terminal.session_close",
        target: "terminal",
        outcome: "succeeded",
        request_id: requestId,
        details: {
          session_id: sessionId,
          origin,
          bytes_in: stats.bytes_in,
          bytes_out: stats.bytes_out,
          duration_ms: Date.now() - started,
          close_code: code,
          reason,
        },
      });
    }
    live.set(sessionId, { stats, end });

    const session: TerminalSessionMessage = {
      type: "session",
      session_id: sessionId,
      expires_at: expiresAt.toISOString(),
      idle_timeout_seconds: Math.round(limits.idleTimeoutMs / 1000),
    };
    client.send(JSON.stringify(session));

    // Output: daemon → browser. A browser that does not read pauses the daemon socket (and the
    // daemon then pauses the shell), so at most bufferBytes plus one frame waits here.
    daemon.on("message", (data: RawData, isBinary: boolean) => {
      if (!isBinary || ended) return;
      const bytes = dataOf(data);
      stats.bytes_out += bytes.length;
      stats.pending_to_client += bytes.length;
      stats.max_pending_to_client = Math.max(stats.max_pending_to_client, stats.pending_to_client);
      client.send(bytes, { binary: true }, () => {
        stats.pending_to_client -= bytes.length;
        if (stats.daemon_paused && stats.pending_to_client <= limits.bufferBytes / 2) {
          stats.daemon_paused = false;
          daemon.resume();
        }
      });
      if (!stats.daemon_paused && stats.pending_to_client >= limits.bufferBytes) {
        stats.daemon_paused = true;
        daemon.pause();
      }
    });

    // Input: browser → daemon, the same way round.
    client.on("message", (data: RawData, isBinary: boolean) => {
      if (ended) return;
      touch();
      if (!isBinary) {
        let control: unknown;
        try {
          control = JSON.parse(data.toString());
        } catch {
          control = undefined;
        }
        const parsed = terminalControlSchema.safeParse(control);
        if (!parsed.success) {
          end(1008, "invalid control message");
          return;
        }
        daemon.send(JSON.stringify(parsed.data));
        return;
      }
      const bytes = dataOf(data);
      stats.bytes_in += bytes.length;
      stats.pending_to_daemon += bytes.length;
      stats.max_pending_to_daemon = Math.max(stats.max_pending_to_daemon, stats.pending_to_daemon);
      daemon.send(bytes, { binary: true }, () => {
        stats.pending_to_daemon -= bytes.length;
        if (stats.client_paused && stats.pending_to_daemon <= limits.bufferBytes / 2) {
          stats.client_paused = false;
          client.resume();
        }
      });
      if (!stats.client_paused && stats.pending_to_daemon >= limits.bufferBytes) {
        stats.client_paused = true;
        client.pause();
      }
    });

    client.on("close", (code: number) =>
      end(code === 1009 ? 1009 : 1000, code === 1009 ? "message too big" : "client closed"),
    );
    client.on("error", (error: Error & { code?: string }) => {
      // ws reports an oversized frame as an error and closes with 1009.
      const tooBig = error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH";
      end(tooBig ? 1009 : 1011, tooBig ? "message too big" : "client socket error");
    });
    daemon.on("close", (code: number, reason: Buffer) => {
      if (code === 1000 && reason.toString() === "shell exited") end(1000, "shell exited");
      else end(TERMINAL_CLOSE.daemonGone.code, TERMINAL_CLOSE.daemonGone.reason);
    });
    daemon.on("error", () => end(TERMINAL_CLOSE.daemonGone.code, TERMINAL_CLOSE.daemonGone.reason));
  }

  return {
    handleUpgrade(request, socket, head) {
      const requestId = resolveRequestId(
        typeof request.headers[REQUEST_ID_HEADER.toLowerCase()] === "string"
          ? (request.headers[REQUEST_ID_HEADER.toLowerCase()] as string)
          : undefined,
      );
      socket.on("error", () => socket.destroy());
      void (async () => {
        let admitted: { caller: Caller; origin: string };
        try {
          admitted = await admit(request, requestId);
        } catch (error) {
          if (error instanceof Refusal) {
            logger.info("terminal refused", { status: error.status, detail: error.message, request_id: requestId });
            refuse(socket, error.status, error.message, requestId);
          } else {
            logger.error("terminal admission failed", { error, request_id: requestId });
            refuse(socket, 500, "internal server error", requestId);
          }
          return;
        }
        let daemon: WebSocket;
        try {
          daemon = await connectDaemon(deps.daemonUrl);
        } catch (error) {
          logger.error("terminal daemon unreachable", { error, request_id: requestId });
          await record({
            actor: { oid: admitted.caller.oid, name: admitted.caller.name },
            action: "terminal.session_open",
            target: "terminal",
            outcome: "failed",
            request_id: requestId,
            details: { reason: "daemon_unreachable", origin: admitted.origin },
          });
          refuse(socket, 503, "the terminal daemon is not running", requestId);
          return;
        }
        if (socket.destroyed) {
          daemon.terminate();
          return;
        }
        // ws answers a malformed handshake itself (400) without calling back: the daemon goes too.
        let upgraded = false;
        socket.once("close", () => {
          if (!upgraded) daemon.terminate();
        });
        wss.handleUpgrade(request, socket, head, (client) => {
          upgraded = true;
          relay(client, daemon, admitted.caller, admitted.origin, requestId);
        });
      })();
    },

    sessions: () => [...live.values()].map((s) => ({ ...s.stats })),

    async close() {
      stopped = true;
      for (const session of [...live.values()])
        session.end(TERMINAL_CLOSE.shutdown.code, TERMINAL_CLOSE.shutdown.reason);
      await Promise.all([...closing]);
      wss.close();
    },
  };
}
