import type { IncomingHttpHeaders } from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { selfSignedLoopbackCertificate } from "./tls.js";

/**
 * A public status page as `capture_browser_evidence` meets one, on loopback TLS, logging every
 * request's headers so a test can see what the browser side sent:
 * - `/start` sets a session cookie and redirects to `/status`; `/away` redirects to `foreignOrigin`;
 * - `/status` is a small page whose script sets a cookie of its own, then asks for `/api` with
 *   an `Authorization` header and `credentials: "include"` and shows the answer's note, and loads
 *   `/pixel.svg` and an image from `foreignOrigin` (another server, which must see nothing);
 * - `/huge` sends the status element, then filler as fast as the client reads, without end;
 * - `/slow` sends the status element, then one byte every 50 ms, without end.
 */
export interface EvidenceTarget {
  origin: string;
  ca: string;
  /** Every request: its path, headers, and whether the client presented a certificate (the server asks for one). */
  log: { path: string; headers: IncomingHttpHeaders; clientCertificate: boolean }[];
  /** Open responses of `/huge` and `/slow`; zero once the client went away. */
  openStreams(): number;
  close(): Promise<void>;
}

const STATUS_ELEMENT = '<div id="status" style="width:300px;height:60px;background:#cfc">All regions operational</div>';

export async function startEvidenceTarget(options: { foreignOrigin?: string } = {}): Promise<EvidenceTarget> {
  const { key, cert } = selfSignedLoopbackCertificate();
  const log: EvidenceTarget["log"] = [];
  let open = 0;
  const server = https.createServer({ key, cert, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    log.push({
      path: url.pathname,
      headers: req.headers,
      clientCertificate: Object.keys((req.socket as TLSSocket).getPeerCertificate() ?? {}).length > 0,
    });
    const stream = (chunk: string, intervalMs: number) => {
      open++;
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Set-Cookie": "stream=1; Path=/; Secure" });
      res.write(`<!doctype html><html><body>${STATUS_ELEMENT}<pre>`);
      let stopped = false;
      res.on("close", () => {
        stopped = true;
        open--;
      });
      const pump = () => {
        if (stopped) return;
        // Write while the socket takes it; go on when it drains (or after the interval).
        while (!stopped && res.write(chunk)) if (intervalMs > 0) return void setTimeout(pump, intervalMs);
        if (!stopped) res.once("drain", pump);
      };
      pump();
    };
    switch (url.pathname) {
      case "/away":
        res.writeHead(302, { Location: `${options.foreignOrigin ?? "https://127.0.0.1:1"}/landing` });
        return res.end();
      case "/start":
        res.writeHead(302, { Location: "/status", "Set-Cookie": "session=s3cr3t-session; Path=/; Secure; HttpOnly" });
        return res.end();
      case "/status":
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Set-Cookie": "again=1; Path=/; Secure" });
        return res.end(
          `<!doctype html><html><body>${STATUS_ELEMENT}` +
            // The note appears only once the page's own credentialed request has been answered.
            `<script>document.cookie = "js=1; path=/"; fetch("/api", { credentials: "include", headers: { Authorization: "Bearer page-token" } }).then((r) => r.json()).then((j) => { const p = document.createElement("p"); p.className = "note"; p.textContent = j.note; document.body.append(p); });</script>` +
            `<img src="/pixel.svg">${options.foreignOrigin ? `<img src="${options.foreignOrigin}/leak.svg">` : ""}</body></html>`,
        );
      case "/api":
        res.writeHead(200, { "Content-Type": "application/json", "Set-Cookie": "api=1; Path=/; Secure" });
        return res.end(JSON.stringify({ note: "Last updated a minute ago" }));
      case "/pixel.svg":
        res.writeHead(200, { "Content-Type": "image/svg+xml" });
        return res.end('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>');
      case "/huge":
        return stream("x".repeat(64 * 1024), 0);
      case "/slow":
        return stream(".", 50);
      default:
        res.writeHead(404, { "Content-Type": "text/plain" });
        return res.end("not found");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ca: cert,
    log,
    openStreams: () => open,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
