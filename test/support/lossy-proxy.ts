import net from "node:net";

export interface LossyProxy {
  port: number;
  /**
   * Arms the proxy: the next request whose request line matches `requestLine` reaches the server,
   * but its answer never reaches the client (the connection is cut as the answer arrives), as when
   * a response is lost on the network. Resolves once that answer has been dropped.
   */
  loseNextResponse(requestLine: RegExp): Promise<void>;
  close(): Promise<void>;
}

/**
 * A TCP proxy in front of a real server (Azurite) that can lose one response: the request is
 * delivered and acted on, the client sees a reset connection and its SDK retries, as after a real
 * network failure. Everything else passes through unchanged.
 */
export async function startLossyProxy(target: { host: string; port: number }): Promise<LossyProxy> {
  let armed: { requestLine: RegExp; dropped: () => void } | undefined;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    let dropAnswer: (() => void) | undefined;
    client.on("data", (chunk: Buffer) => {
      if (armed?.requestLine.test(chunk.toString("latin1").split("\r\n", 1)[0] ?? "")) {
        dropAnswer = armed.dropped;
        armed = undefined;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (dropAnswer) {
        const dropped = dropAnswer;
        dropAnswer = undefined;
        client.destroy();
        upstream.destroy();
        dropped();
        return;
      }
      client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    loseNextResponse(requestLine) {
      return new Promise<void>((resolve) => {
        armed = { requestLine, dropped: resolve };
      });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
