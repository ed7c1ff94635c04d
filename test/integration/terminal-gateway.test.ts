import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { type DevIdentityProvider, startDevIdentityProvider } from "../../local/dev-idp.js";
import {
  createTerminalGateway,
  type TerminalGateway,
  type TerminalLimits,
} from "../../jobapi/terminal/terminal-gateway.js";
import { TERMINAL_SUBPROTOCOL } from "../../jobapi/terminal/terminal-protocol.js";
import { createJwtValidator } from "../../shared/auth/jwt-validator.js";
import { createLogger } from "../../shared/logging/logger.js";
import { type AuditEntry, createAuditLog } from "../../shared/ops/audit.js";
import { createTerminalTicketStore, type TerminalTicketStore } from "../../shared/terminal/terminal-tickets.js";
import { eventually, ROOT } from "../support/local-stack.js";
import { testAzuriteStartMs } from "../support/service-fakes.js";

// One Azurite, one identity provider and one daemon process for the file; each test starts the
// gateways (cheap, in-process) with the limits it needs. The daemon is the built entry point, as
// it runs beside the job API.
const ORIGIN = "http://127.0.0.1:4280";
const OTHER_ALLOWED_ORIGIN = "http://localhost:4280";
const CLIENT_ID = "11111111-2222-4333-8444-555555555555";
const TENANT_ID = "99999999-8888-4777-8666-555555555555";
const ALICE = { oid: "aaaaaaaa-0000-4000-8000-000000000001", name: "Alice" };
const BOB = { oid: "bbbbbbbb-0000-4000-8000-000000000002", name: "Bob" };

const logger = createLogger({ level: "error" });
let azurite: RunningAzurite;
let idp: DevIdentityProvider;
let tickets: TerminalTicketStore;
let daemon: { child: ChildProcess; port: number };
const servers: http.Server[] = [];
const gateways: TerminalGateway[] = [];

const LIMITS: TerminalLimits = {
  idleTimeoutMs: 60_000,
  maxSessionMs: 120_000,
  maxSessionsPerUser: 2,
  maxMessageBytes: 256 * 1024,
  bufferBytes: 64 * 1024,
};

/** Starts the built daemon on a free port and waits for its ready line. */
async function startDaemon(env: Record<string, string> = {}): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [path.join(ROOT, "dist/jobapi/terminal-daemon.js")], {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: os.tmpdir(),
      JOBAPI_TERMINAL_DAEMON_PORT: "0",
      JOBAPI_TERMINAL_SHELL: "/bin/sh",
      // Not in the daemon's settings: it cannot be told to listen elsewhere (B-174).
      JOBAPI_TERMINAL_DAEMON_HOST: "0.0.0.0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const port = await new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /"address":"127\.0\.0\.1:(\d+)"/.exec(output);
      if (match) resolve(Number(match[1]));
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => reject(new Error(`daemon exited with ${String(code)}: ${output}`)));
  });
  return { child, port };
}

function stopProcess(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

beforeAll(async () => {
  azurite = await startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    startTimeoutMs: testAzuriteStartMs(),
    logger,
    watchdogPath: path.join(ROOT, "local/parent-watchdog.cjs"),
  });
  idp = await startDevIdentityProvider({ port: 0, clientId: CLIENT_ID, tenantId: TENANT_ID });
  tickets = createTerminalTicketStore(azurite.connectionString);
  daemon = await startDaemon();
});

afterAll(async () => {
  for (const gateway of gateways) await gateway.close();
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
  if (daemon) await stopProcess(daemon.child);
  await idp?.close();
  await azurite?.stop();
});

/** A gateway on its own HTTP server (as the job API serves it), with `limits` over the defaults. */
async function startGateway(
  limits: Partial<TerminalLimits> = {},
  daemonPort = daemon.port,
): Promise<{ url: string; gateway: TerminalGateway }> {
  const gateway = createTerminalGateway({
    validator: createJwtValidator({ discoveryUrl: idp.discoveryUrl, audience: idp.audience }),
    tickets,
    audit: createAuditLog(azurite.connectionString),
    logger,
    allowedOrigins: [ORIGIN, OTHER_ALLOWED_ORIGIN],
    daemonUrl: `ws://127.0.0.1:${daemonPort}`,
    limits: { ...LIMITS, ...limits },
  });
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  server.on("upgrade", (req, socket, head) => gateway.handleUpgrade(req, socket, head));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  gateways.push(gateway);
  return { url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/terminal`, gateway };
}

async function tokenOf(who: { oid: string; name: string }, role: "Reader" | "Contributor" | "Owner" = "Contributor") {
  return idp.mint({ role, oid: who.oid, name: who.name });
}

async function ticketFor(who: { oid: string }, origin = ORIGIN): Promise<string> {
  return (await tickets.issue({ oid: who.oid, origin })).ticket;
}

interface Opened {
  ws: WebSocket;
  /** Everything the shell printed so far (binary frames). */
  output(): string;
  /** Text frames (the session message). */
  control: Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string }>;
  type(text: string): void;
}

interface Refused {
  status: number;
  body: Record<string, unknown>;
}

async function open(
  url: string,
  options: { bearer?: string; ticket?: string; origin?: string; protocols?: string[] } = {},
): Promise<Opened | Refused> {
  const protocols = options.protocols ?? [
    TERMINAL_SUBPROTOCOL,
    ...(options.bearer ? [`bearer.${options.bearer}`] : []),
    ...(options.ticket ? [`ticket.${options.ticket}`] : []),
  ];
  const ws = new WebSocket(url, protocols, {
    headers: options.origin === undefined ? { Origin: ORIGIN } : options.origin ? { Origin: options.origin } : {},
    perMessageDeflate: false,
  });
  let output = "";
  const control: Record<string, unknown>[] = [];
  ws.on("message", (data, isBinary) => {
    if (isBinary) output += data.toString();
    else control.push(JSON.parse(data.toString()) as Record<string, unknown>);
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  return new Promise((resolve, reject) => {
    ws.once("open", () =>
      resolve({
        ws,
        output: () => output,
        control,
        closed,
        type: (text) => ws.send(Buffer.from(text), { binary: true }),
      }),
    );
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) as Record<string, unknown> }));
    });
    ws.once("error", (error) => reject(error));
  });
}

function refused(result: Opened | Refused): Refused {
  if ("ws" in result) {
    result.ws.terminate();
    throw new Error("the terminal opened");
  }
  return result;
}

function opened(result: Opened | Refused): Opened {
  if (!("ws" in result)) throw new Error(`refused: ${result.status} ${JSON.stringify(result.body)}`);
  return result;
}

async function sessionAudit(sessionId: string, action: "terminal.session_open" | "terminal.session_close") {
  return eventually(async () => {
    const entries = await createAuditLog(azurite.connectionString).list({ action, limit: 1000 });
    return entries.find((e: AuditEntry) => e.details.session_id === sessionId);
  });
}

describe("GET /v1/terminal refusals before the upgrade", () => {
  it("B-171 refuses a connection without a token, or with a forged one (401, envelope)", async () => {
    const { url } = await startGateway();
    const none = refused(await open(url, { ticket: await ticketFor(ALICE) }));
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ detail: expect.any(String), request_id: expect.any(String) });
    const forged = refused(await open(url, { bearer: "eyJhbGciOiJub25lIn0.e30.", ticket: await ticketFor(ALICE) }));
    expect(forged.status).toBe(401);
  });

  it("B-171 refuses a valid token without a ticket, with a reused ticket and with an expired one (401)", async () => {
    const { url } = await startGateway();
    const bearer = await tokenOf(ALICE);
    expect(refused(await open(url, { bearer })).status).toBe(401);

    const ticket = await ticketFor(ALICE);
    const first = opened(await open(url, { bearer, ticket }));
    first.ws.close();
    await first.closed;
    const reused = refused(await open(url, { bearer, ticket }));
    expect(reused.status).toBe(401);
    expect(String(reused.body.detail)).toContain("used");

    const issuedLongAgo = createTerminalTicketStore(azurite.connectionString, {
      now: () => new Date(Date.now() - 31_000),
    });
    const expired = (await issuedLongAgo.issue({ oid: ALICE.oid, origin: ORIGIN })).ticket;
    const late = refused(await open(url, { bearer, ticket: expired }));
    expect(late.status).toBe(401);
    expect(String(late.body.detail)).toContain("expired");
  });

  it("B-172 refuses a Reader (403) before the ticket is spent, and audits it as denied", async () => {
    const { url } = await startGateway();
    const ticket = await ticketFor(ALICE);
    const reader = refused(await open(url, { bearer: await tokenOf(ALICE, "Reader"), ticket }));
    expect(reader.status).toBe(403);
    const entries = await createAuditLog(azurite.connectionString).list({ action: "terminal.session_open" });
    expect(entries.find((e) => e.request_id === reader.body.request_id)).toMatchObject({
      outcome: "denied",
      actor: ALICE,
      details: { reason: "role" },
    });
    // The same ticket still opens the terminal for a Contributor.
    const contributor = opened(await open(url, { bearer: await tokenOf(ALICE), ticket }));
    contributor.ws.close();
    await contributor.closed;
  });

  it("refuses another user's ticket (403)", async () => {
    const { url } = await startGateway();
    const result = refused(await open(url, { bearer: await tokenOf(BOB), ticket: await ticketFor(ALICE) }));
    expect(result.status).toBe(403);
    expect(String(result.body.detail)).toContain("another user");
  });

  it("refuses a wrong Origin (403), a missing one, and a ticket issued to another allowed origin (401)", async () => {
    const { url } = await startGateway();
    const bearer = await tokenOf(ALICE);
    const evil = refused(await open(url, { bearer, ticket: await ticketFor(ALICE), origin: "https://evil.example" }));
    expect(evil.status).toBe(403);
    expect(refused(await open(url, { bearer, ticket: await ticketFor(ALICE), origin: "" })).status).toBe(403);
    const elsewhere = refused(
      await open(url, { bearer, ticket: await ticketFor(ALICE, OTHER_ALLOWED_ORIGIN), origin: ORIGIN }),
    );
    expect(elsewhere.status).toBe(401);
    expect(String(elsewhere.body.detail)).toContain("origin");
  });

  it("refuses a connection that does not offer the terminal subprotocol (400)", async () => {
    const { url } = await startGateway();
    const bearer = await tokenOf(ALICE);
    const result = refused(await open(url, { protocols: [`bearer.${bearer}`, `ticket.${await ticketFor(ALICE)}`] }));
    expect(result.status).toBe(400);
  });

  it("limits concurrent sessions per user (429 past the limit), counting the same object id in any case", async () => {
    const { url } = await startGateway({ maxSessionsPerUser: 2 });
    const bearer = await tokenOf(ALICE);
    const a = opened(await open(url, { bearer, ticket: await ticketFor(ALICE) }));
    const b = opened(await open(url, { bearer, ticket: await ticketFor({ oid: ALICE.oid.toUpperCase() }) }));
    const third = refused(await open(url, { bearer, ticket: await ticketFor(ALICE) }));
    expect(third.status).toBe(429);
    a.ws.close();
    await a.closed;
    const c = opened(await open(url, { bearer, ticket: await ticketFor(ALICE) }));
    for (const s of [b, c]) {
      s.ws.close();
      await s.closed;
    }
  });

  it("answers 503 when the daemon is not running", async () => {
    const free = net.createServer();
    await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
    const port = (free.address() as AddressInfo).port;
    await new Promise((r) => free.close(r));
    const { url } = await startGateway({}, port);
    const result = refused(await open(url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    expect(result.status).toBe(503);
  });
});

describe("a terminal session", () => {
  it("B-173 relays a shell: the session message, output of a command, resize, and audits open and close without keystrokes", async () => {
    const { url } = await startGateway();
    const session = opened(await open(url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    await eventually(async () => (session.control.length > 0 ? true : undefined));
    const info = session.control[0] as { type: string; session_id: string; expires_at: string };
    expect(info).toMatchObject({ type: "session", session_id: expect.any(String), idle_timeout_seconds: 60 });
    expect(new Date(info.expires_at).getTime()).toBeGreaterThan(Date.now());

    session.type("echo secret-word-$((6*7))\r");
    await eventually(async () => (session.output().includes("secret-word-42") ? true : undefined));
    session.ws.send(JSON.stringify({ type: "resize", cols: 123, rows: 45 }));
    session.type("stty size\r");
    await eventually(async () => (session.output().includes("45 123") ? true : undefined));
    session.ws.close(1000);
    expect((await session.closed).code).toBe(1000);

    const openEntry = await sessionAudit(info.session_id, "terminal.session_open");
    expect(openEntry).toMatchObject({ outcome: "succeeded", actor: ALICE, details: { origin: ORIGIN } });
    const closeEntry = await sessionAudit(info.session_id, "terminal.session_close");
    expect(closeEntry.actor).toEqual(ALICE);
    expect(closeEntry.details).toMatchObject({ reason: "client closed", close_code: 1000 });
    expect(closeEntry.details.bytes_in).toBeGreaterThanOrEqual("echo secret-word-$((6*7))\rstty size\r".length);
    expect(closeEntry.details.bytes_out).toBeGreaterThan(0);
    // Never the keystrokes or the output.
    expect(JSON.stringify([openEntry, closeEntry])).not.toContain("secret-word");
  });

  it("rejects an invalid control message by closing with 1008", async () => {
    const { url } = await startGateway();
    const session = opened(await open(url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    session.ws.send(JSON.stringify({ type: "resize", cols: 0, rows: 1e9 }));
    expect((await session.closed).code).toBe(1008);
  });

  it("closes a 10 MB paste sent at once with 1009, audits the close, and keeps serving", async () => {
    const { url } = await startGateway();
    const bearer = await tokenOf(ALICE);
    const session = opened(await open(url, { bearer, ticket: await ticketFor(ALICE) }));
    await eventually(async () => (session.control.length > 0 ? true : undefined));
    const sessionId = String(session.control[0]?.session_id);
    session.ws.send(Buffer.alloc(10 * 1024 * 1024, 0x61), { binary: true });
    expect((await session.closed).code).toBe(1009);
    const entry = await sessionAudit(sessionId, "terminal.session_close");
    expect(entry.details).toMatchObject({ reason: "message too big", bytes_in: 0 });
    const next = opened(await open(url, { bearer, ticket: await ticketFor(ALICE) }));
    next.type("echo still-$((1+1))\r");
    await eventually(async () => (next.output().includes("still-2") ? true : undefined));
    next.ws.close();
    await next.closed;
  });

  it("bounds what waits for a client that never reads: the daemon is paused, the buffer stays near its limit", async () => {
    const bufferBytes = 64 * 1024;
    const { url, gateway } = await startGateway({ bufferBytes });
    const target = new URL(url);
    const ticket = await ticketFor(ALICE);
    const bearer = await tokenOf(ALICE);
    // A raw client: the handshake, one command frame, then it never reads another byte.
    const socket = net.connect(Number(target.port), target.hostname);
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(
      [
        "GET /v1/terminal HTTP/1.1",
        `Host: ${target.host}`,
        "Upgrade: websocket",
        "Connection: Upgrade",
        `Sec-WebSocket-Key: ${Buffer.from(randomUUID().slice(0, 16)).toString("base64")}`,
        "Sec-WebSocket-Version: 13",
        `Sec-WebSocket-Protocol: ${TERMINAL_SUBPROTOCOL}, bearer.${bearer}, ticket.${ticket}`,
        `Origin: ${ORIGIN}`,
        "",
        "",
      ].join("\r\n"),
    );
    const session = await eventually(async () => gateway.sessions()[0]);
    const command = Buffer.from("yes flood-line-of-some-length\r");
    // A masked binary frame (mask key 0: the payload is sent as is).
    socket.write(Buffer.concat([Buffer.from([0x82, 0x80 | command.length, 0, 0, 0, 0]), command]));
    socket.pause();
    const paused = await eventually(
      async () => gateway.sessions().find((s) => s.session_id === session.session_id && s.daemon_paused),
      60_000,
    );
    // Meanwhile the gateway serves another session to the end of a round trip, and the flood
    // session's queue has still not grown: bounded by the buffer limit plus the frames already
    // read from the daemon when it paused.
    const other = opened(await open(url, { bearer: await tokenOf(BOB), ticket: await ticketFor(BOB) }));
    other.type("echo other-$((3+3))\r");
    await eventually(async () => (other.output().includes("other-6") ? true : undefined));
    other.ws.close(1000);
    await other.closed;
    const after = gateway.sessions().find((s) => s.session_id === paused.session_id);
    expect(after?.max_pending_to_client).toBeLessThan(bufferBytes + 512 * 1024);
    expect(after?.daemon_paused).toBe(true);
    socket.destroy();
    await eventually(async () => (gateway.sessions().length === 0 ? true : undefined));
  });

  it("closes an idle session with 4000 and a session past its maximum duration with 4001", async () => {
    const idle = await startGateway({ idleTimeoutMs: 300 });
    const a = opened(await open(idle.url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    expect(await a.closed).toEqual({ code: 4000, reason: "idle timeout" });
    const short = await startGateway({ maxSessionMs: 300 });
    const b = opened(await open(short.url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    expect(await b.closed).toEqual({ code: 4001, reason: "maximum session duration reached" });
  });

  it("closes the socket with 4002 and a reason when the daemon dies mid-session, and audits the close", async () => {
    const doomed = await startDaemon();
    const { url } = await startGateway({}, doomed.port);
    const session = opened(await open(url, { bearer: await tokenOf(ALICE), ticket: await ticketFor(ALICE) }));
    session.type("echo alive-$((2+2))\r");
    await eventually(async () => (session.output().includes("alive-4") ? true : undefined));
    const sessionId = String(session.control[0]?.session_id);
    await stopProcess(doomed.child, "SIGKILL");
    expect(await session.closed).toEqual({ code: 4002, reason: "the terminal daemon went away" });
    const entry = await sessionAudit(sessionId, "terminal.session_close");
    expect(entry.details).toMatchObject({ close_code: 4002 });
  });
});

describe("the terminal daemon", () => {
  it("B-174 listens on 127.0.0.1 only, whatever the environment says, and is unreachable on other addresses", async () => {
    // The kernel's own table of listening sockets: the daemon's port is bound to 127.0.0.1 (0100007F).
    const hexPort = daemon.port.toString(16).toUpperCase().padStart(4, "0");
    const listening = readFileSync("/proc/net/tcp", "utf8")
      .split("\n")
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((cols) => cols[1]?.endsWith(`:${hexPort}`) && cols[3] === "0A");
    expect(listening.map((cols) => cols[1])).toEqual([`0100007F:${hexPort}`]);
    const tcp6 = readFileSync("/proc/net/tcp6", "utf8");
    expect(tcp6).not.toMatch(new RegExp(`:${hexPort} [0-9A-F:]+ 0A `));
    // And a connection to any non-loopback address of this machine is refused.
    const external = Object.values(os.networkInterfaces())
      .flat()
      .filter((a) => a && !a.internal)
      .map((a) => a?.address as string);
    for (const address of external) {
      const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
        const s = net.connect({ host: address, port: daemon.port });
        s.once("connect", () => {
          s.destroy();
          resolve(undefined);
        });
        s.once("error", (e: NodeJS.ErrnoException) => resolve(e));
      });
      expect(error?.code, address).toMatch(/ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL/);
    }
  });
});
