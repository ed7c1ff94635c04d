/**
 * What a streamed response needs to know about its client connection, which `@azure/functions`
 * does not tell a handler: whether the client went away, and how much written output the client
 * has not read yet. The library writes a streamed body to its HTTP proxy response without honouring
 * `write()`'s return value and without stopping when the connection closes
 * (Azure/azure-functions-nodejs-library#294), so a server-sent-event stream would run on for a
 * vanished client and buffer without bound for a slow one.
 *
 * Node's public `http.server.request.start` diagnostics channel hands every incoming request on
 * any server in the process to a subscriber, the library's proxy server included; the Functions
 * host (Azure's and the local one) stamps each proxied request with the invocation id. So the
 * invocation's own proxy response is found by that id, and its `close` event and `writableLength`
 * give the abort signal and the unread backlog.
 */
import diagnosticsChannel from "node:diagnostics_channel";
import type { IncomingMessage, ServerResponse } from "node:http";

/** The client connection of one invocation. */
export interface ClientConnection {
  /** Aborted when the client connection closes before the response ended. */
  readonly abortSignal: AbortSignal;
  /** Bytes written to the response and not yet taken by the client's socket. */
  backlogBytes(): number;
}

const INVOCATION_HEADER = "x-ms-invocation-id";

interface Watched {
  controller: AbortController;
  response: ServerResponse;
}

// Entries live only while their proxied request is open: each is removed on its response's close.
const open = new Map<string, Watched>();

diagnosticsChannel.subscribe("http.server.request.start", (message) => {
  const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
  const invocationId = request.headers[INVOCATION_HEADER];
  if (typeof invocationId !== "string") return;
  const watched: Watched = { controller: new AbortController(), response };
  open.set(invocationId, watched);
  response.once("close", () => {
    if (!response.writableFinished) watched.controller.abort(new Error("the client closed the connection"));
    if (open.get(invocationId) === watched) open.delete(invocationId);
  });
});

/**
 * The client connection of the invocation `invocationId`; a connection that cannot be found (a test
 * host that does not proxy) never aborts and reports no backlog.
 */
export function clientConnection(invocationId: string): ClientConnection {
  const watched = open.get(invocationId);
  if (!watched) return { abortSignal: new AbortController().signal, backlogBytes: () => 0 };
  return {
    abortSignal: watched.controller.signal,
    backlogBytes: () => (watched.response.destroyed ? 0 : watched.response.writableLength),
  };
}
