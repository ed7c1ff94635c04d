import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClientConnection, clientConnection } from "../../functions/composition/http-connection.js";

// The Functions library's proxy server stands in: any http server in the process is watched, and a
// request carries the invocation id the host stamps on it.
let server: http.Server;
let port: number;
const seen = new Map<string, { connection: ClientConnection; res: http.ServerResponse }>();
const waiters = new Map<string, () => void>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const id = String(req.headers["x-ms-invocation-id"]);
    seen.set(id, { connection: clientConnection(id), res });
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write(": open\n\n");
    waiters.get(id)?.();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

function request(id: string): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
  return new Promise((resolve) => {
    const req = http.get({ port, host: "127.0.0.1", path: "/", headers: { "x-ms-invocation-id": id } }, (res) =>
      resolve({ req, res }),
    );
  });
}

const arrived = (id: string) => new Promise<void>((resolve) => waiters.set(id, resolve));

describe("the client connection of an invocation (functions/composition/http-connection.ts)", () => {
  it("C-315: the invocation's abort signal fires when the client closes the connection", async () => {
    const here = arrived("inv-close");
    const { req } = await request("inv-close");
    await here;
    const { connection } = seen.get("inv-close") as { connection: ClientConnection };
    expect(connection.abortSignal.aborted).toBe(false);
    const aborted = new Promise<void>((resolve) => connection.abortSignal.addEventListener("abort", () => resolve()));
    req.destroy();
    await aborted;
    expect(connection.abortSignal.aborted).toBe(true);
  });

  it("a response that ends normally never aborts", async () => {
    const here = arrived("inv-end");
    const { res: clientRes } = await request("inv-end");
    await here;
    const { connection, res } = seen.get("inv-end") as { connection: ClientConnection; res: http.ServerResponse };
    const closed = new Promise<void>((resolve) => res.on("close", () => resolve()));
    res.end();
    clientRes.resume();
    await closed;
    expect(connection.abortSignal.aborted).toBe(false);
  });

  it("the backlog grows while a client reads nothing (what the stream's slow-reader bound watches)", async () => {
    const here = arrived("inv-slow");
    const { res: clientRes, req } = await request("inv-slow");
    clientRes.pause();
    await here;
    const { connection, res } = seen.get("inv-slow") as { connection: ClientConnection; res: http.ServerResponse };
    const chunk = `data: ${"x".repeat(64 * 1024)}\n\n`;
    // Write until Node reports the socket full; the backlog is then what the peer has not taken.
    while (res.write(chunk));
    expect(connection.backlogBytes()).toBeGreaterThan(0);
    req.destroy();
  });

  it("an invocation that is not proxied gets a connection that never aborts", () => {
    const connection = clientConnection("no-such-invocation");
    expect(connection.abortSignal.aborted).toBe(false);
    expect(connection.backlogBytes()).toBe(0);
  });
});
