import { z } from "zod";

/**
 * The terminal's wire protocol (decision 0020), between the browser and the job API and between
 * the job API and the daemon: binary frames carry terminal bytes (keystrokes in, output out);
 * text frames carry JSON control messages.
 */

/**
 * The daemon's address: loopback, in code. No setting can widen it (B-174); on the cluster the
 * daemon shares the job-API pod's network namespace, so only that pod reaches it.
 */
export const TERMINAL_DAEMON_HOST = "127.0.0.1";

/** The daemon's port (spec §4.1 row WS). Tests and parallel local stacks pass another. */
export const TERMINAL_DAEMON_DEFAULT_PORT = 7681;

/** The subprotocol the browser offers first and the job API selects. */
export const TERMINAL_SUBPROTOCOL = "blastplane-terminal.v1";
/** The browser offers its access token as `bearer.<token>` (a browser's WebSocket sets no headers). */
export const BEARER_SUBPROTOCOL_PREFIX = "bearer.";
/** … and its ticket as `ticket.<ticket>`. */
export const TICKET_SUBPROTOCOL_PREFIX = "ticket.";

/** Browser → job API → daemon: the terminal's size changed. */
export const terminalControlSchema = z.strictObject({
  type: z.literal("resize"),
  cols: z.number().int().min(1).max(1000),
  rows: z.number().int().min(1).max(1000),
});

export type TerminalControl = z.infer<typeof terminalControlSchema>;

/** Job API → browser, once at the start: what the page shows (the remaining time). */
export interface TerminalSessionMessage {
  type: "session";
  session_id: string;
  expires_at: string;
  idle_timeout_seconds: number;
}

/** Close codes the job API uses besides the standard ones (1000, 1008, 1009, 1011). */
export const TERMINAL_CLOSE = {
  idle: { code: 4000, reason: "idle timeout" },
  maxDuration: { code: 4001, reason: "maximum session duration reached" },
  daemonGone: { code: 4002, reason: "the terminal daemon went away" },
  shutdown: { code: 4003, reason: "the job API is stopping" },
} as const;
