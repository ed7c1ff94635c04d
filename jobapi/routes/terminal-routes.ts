import { errorResult } from "../../shared/http/envelope.js";
import type { JobApiRoute } from "../http.js";
import { TERMINAL_PATH } from "../terminal/terminal-gateway.js";

/**
 * `GET /v1/terminal` without an upgrade: 426. The WebSocket itself is served by the terminal
 * gateway on the server's `upgrade` event (decision 0020). Not in the OpenAPI document: its success
 * is 101 (no 2xx, which the linters require); docs/terminal.md describes the protocol.
 */
export function createTerminalRoutes(): JobApiRoute[] {
  return [
    {
      method: "GET",
      path: TERMINAL_PATH,
      public: true,
      handler: async (_req, { requestId }) =>
        errorResult(426, "upgrade to a WebSocket (see the description)", requestId, { Upgrade: "websocket" }),
    },
  ];
}
