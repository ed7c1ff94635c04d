import http from "node:http";
import type { AddressInfo } from "node:net";

/** One request that passed the proxy, with the bytes of its answer's body. */
export interface ProxiedRequest {
  method: string;
  path: string;
  /** `x-ms-range` or `Range`, as the client sent it. */
  range: string | undefined;
  status: number;
  responseBytes: number;
}

export interface CountingProxy {
  /** The proxy's origin (`http://127.0.0.1:port`). */
  origin: string;
  /** Every request so far, in the order their answers ended. */
  requests: ProxiedRequest[];
  close(): Promise<void>;
}

/**
 * An HTTP proxy in front of a real server (Azurite's Blob endpoint) that passes everything through
 * unchanged and records each request with the size of its answer: a test then asserts on the
 * bytes a reader fetched from storage, not on timing.
 */
export async function startCountingProxy(target: string): Promise<CountingProxy> {
  const upstream = new URL(target);
  const requests: ProxiedRequest[] = [];
  const server = http.createServer((req, res) => {
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        let bytes = 0;
        answer.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
        });
        answer.on("end", () => {
          const range = req.headers["x-ms-range"] ?? req.headers.range;
          requests.push({
            method: req.method ?? "",
            path: decodeURIComponent((req.url ?? "").split("?")[0] ?? ""),
            range: Array.isArray(range) ? range[0] : range,
            status: answer.statusCode ?? 0,
            responseBytes: bytes,
          });
        });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
