import type { AddressInfo } from "node:net";
import * as pty from "node-pty";
import { type RawData, WebSocket, WebSocketServer } from "ws";
import type { Logger } from "../../shared/logging/logger.js";
import { TERMINAL_DAEMON_HOST, terminalControlSchema } from "./terminal-protocol.js";

/**
 * The terminal daemon (decision 0020): one shell in a pseudo-terminal per WebSocket connection,
 * listening on loopback only. The job API's terminal gateway is its only client; it has already
 * validated the token, the role, the ticket and the origin.
 */

/**
 * Output the daemon queues towards the gateway before it pauses the shell's PTY. The PTY reads in
 * chunks of up to 64 KiB; 256 KiB keeps an interactive screen flowing and bounds a flood.
 */
const OUTPUT_HIGH_WATER_BYTES = 256 * 1024;

/** Options of {@link startPtyDaemon}. */
export interface PtyDaemonOptions {
  port: number;
  /** The shell and its arguments (e.g. `/bin/bash -l`). */
  shell: string;
  shellArgs?: string[];
  /** The shell's whole environment (never the daemon's own: see terminal-daemon.ts). */
  env: Record<string, string>;
  cwd: string;
  logger: Logger;
  /** The largest frame accepted from the gateway. */
  maxMessageBytes?: number;
}

/** A running daemon. */
export interface PtyDaemon {
  /** The bound address (always {@link TERMINAL_DAEMON_HOST}). */
  address: AddressInfo;
  /** Shells currently running. */
  sessions(): number;
  close(): Promise<void>;
}

/** Starts the daemon on `127.0.0.1:<port>`. */
export async function startPtyDaemon(options: PtyDaemonOptions): Promise<PtyDaemon> {
  const { logger } = options;
  const server = new WebSocketServer({
    host: TERMINAL_DAEMON_HOST,
    port: options.port,
    maxPayload: options.maxMessageBytes ?? 1024 * 1024,
    perMessageDeflate: false,
  });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const shells = new Set<pty.IPty>();

  server.on("connection", (socket: WebSocket) => {
    const shell = pty.spawn(options.shell, options.shellArgs ?? [], {
      name: "xterm-256color",
      cols: 80,
      rows: 24,
      cwd: options.cwd,
      env: options.env,
      // Bytes both ways: a multi-byte character split across reads stays intact.
      encoding: null,
    });
    shells.add(shell);
    logger.info("terminal shell started", { pid: shell.pid });
    let paused = false;
    const resumeWhenDrained = () => {
      if (paused && socket.bufferedAmount < OUTPUT_HIGH_WATER_BYTES / 2) {
        paused = false;
        shell.resume();
      }
    };
    shell.onData((data: string | Buffer) => {
      if (socket.readyState !== WebSocket.OPEN) return;
      socket.send(data, { binary: true }, resumeWhenDrained);
      // A gateway that stops reading (its client stopped) pauses the shell: the PTY fills and the
      // program writing to it blocks, instead of this process buffering without bound.
      if (!paused && socket.bufferedAmount >= OUTPUT_HIGH_WATER_BYTES) {
        paused = true;
        shell.pause();
      }
    });
    shell.onExit(({ exitCode, signal }) => {
      shells.delete(shell);
      logger.info("terminal shell exited", { pid: shell.pid, exit_code: exitCode, signal });
      if (socket.readyState === WebSocket.OPEN) socket.close(1000, "shell exited");
    });
    socket.on("message", (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        shell.write(Buffer.isBuffer(data) ? data : Buffer.concat(data as Buffer[]));
        return;
      }
      const parsed = terminalControlSchema.safeParse(safeJson(data.toString()));
      if (parsed.success) shell.resize(parsed.data.cols, parsed.data.rows);
    });
    socket.on("close", () => {
      if (shells.has(shell)) shell.kill("SIGHUP");
    });
    socket.on("error", () => socket.terminate());
  });

  return {
    address: server.address() as AddressInfo,
    sessions: () => shells.size,
    async close() {
      for (const shell of shells) shell.kill("SIGHUP");
      for (const client of server.clients) client.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
