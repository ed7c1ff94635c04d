/**
 * Serves the dashboard web app (the Vite build in `dist/web`) beside the Functions routes, on the
 * Functions host's own origin as Static Web Apps does in Azure: `/api/...` goes to the host, the
 * app's files are served as they are, any other path without a file extension gets `index.html`
 * (the app routes in the browser, e.g. `/blast/jobs/<uuid>`), and `/web-config.json` tells the
 * app where to sign in.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { isLoopbackHostHeader } from "../shared/http/loopback-host.js";
import { NOSNIFF_HEADERS } from "../shared/http/security-headers.js";

/** Options for {@link createWebHandler}. */
export interface WebHandlerOptions {
  /** The built app (`dist/web`). */
  root: string;
  /** Handles everything under `/api` (the Functions host). */
  api: (req: IncomingMessage, res: ServerResponse) => void;
  /** The app's runtime configuration, served as `/web-config.json`. */
  webConfig: () => unknown;
  /** Origins the app talks to besides its own (the identity provider): allowed by the CSP. */
  connectOrigins: () => string[];
  /**
   * Answer only requests whose `Host` names loopback (421 otherwise), for the app and `/api`
   * alike: set when the port listens on loopback, so a DNS-rebinding page cannot reach the
   * unauthenticated routes (health, diagnostics, the no-op round trip) from a browser.
   */
  loopbackHostOnly?: boolean;
}

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json; charset=utf-8",
  ".json": "application/json; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".txt": "text/plain; charset=utf-8",
};

/** The request handler of the Functions host's port: API routes, the app, its configuration. */
export function createWebHandler(options: WebHandlerOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const root = path.resolve(options.root);
  return (req, res) => {
    if (options.loopbackHostOnly && !isLoopbackHostHeader(req.headers.host)) {
      const body = JSON.stringify({ detail: "host header must name a loopback address" });
      res.writeHead(421, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        ...NOSNIFF_HEADERS,
      });
      res.end(body);
      return;
    }
    const raw = new URL(req.url ?? "/", "http://placeholder").pathname;
    if (raw === "/api" || raw.startsWith("/api/")) {
      options.api(req, res);
      return;
    }
    serveApp(req, res, decodedPath(raw)).catch(() => {
      if (!res.headersSent) sendText(res, 500, "internal server error");
      else res.destroy();
    });
  };

  async function serveApp(req: IncomingMessage, res: ServerResponse, pathname: string | undefined): Promise<void> {
    if (req.method !== "GET" && req.method !== "HEAD") {
      sendText(res, 405, "method not allowed", { allow: "GET, HEAD" });
      return;
    }
    if (pathname === undefined) {
      sendText(res, 400, "malformed path");
      return;
    }
    const headers = securityHeaders(options.connectOrigins());
    if (pathname === "/web-config.json") {
      const body = JSON.stringify(options.webConfig());
      res.writeHead(200, {
        ...headers,
        "content-type": TYPES[".json"],
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-store",
      });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    const file = path.resolve(root, `.${pathname}`);
    // Only files inside the app folder; an extension-less path is an app route.
    const inside = file === root || file.startsWith(`${root}${path.sep}`);
    const info = inside ? await stat(file).catch(() => undefined) : undefined;
    if (info?.isFile()) {
      await sendFile(req, res, file, info.size, headers, pathname.startsWith("/assets/"));
      return;
    }
    if (path.extname(pathname) !== "") {
      sendText(res, 404, "not found");
      return;
    }
    const index = path.join(root, "index.html");
    const indexInfo = await stat(index).catch(() => undefined);
    if (!indexInfo?.isFile()) {
      sendText(res, 503, "the web app is not built: run npm run build");
      return;
    }
    await sendFile(req, res, index, indexInfo.size, headers, false);
  }
}

async function sendFile(
  req: IncomingMessage,
  res: ServerResponse,
  file: string,
  size: number,
  headers: Record<string, string>,
  immutable: boolean,
): Promise<void> {
  res.writeHead(200, {
    ...headers,
    "content-type": TYPES[path.extname(file)] ?? "application/octet-stream",
    "content-length": size,
    // Hashed asset names change with their content; the page itself is always revalidated.
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
  });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const stream = createReadStream(file);
    stream.once("error", reject);
    res.once("close", () => {
      stream.destroy();
      resolve();
    });
    stream.pipe(res);
  });
}

const PERMISSIONS_POLICY = [
  "accelerometer=()",
  "camera=()",
  "display-capture=()",
  "geolocation=()",
  "gyroscope=()",
  "magnetometer=()",
  "microphone=()",
  "midi=()",
  "payment=()",
  "usb=()",
].join(", ");

/**
 * Scripts and styles only from this origin; data calls to this origin and the identity provider;
 * the provider (and the app it returns to) may be framed for MSAL's silent renewal; nobody may
 * frame the app but itself.
 */
function securityHeaders(connectOrigins: string[]): Record<string, string> {
  const others = connectOrigins.join(" ");
  return {
    "content-security-policy": [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data:",
      `connect-src 'self' ${others}`,
      // MSAL's silent renewal frame starts at the provider and comes back to the app.
      `frame-src 'self' ${others}`,
      "frame-ancestors 'self'",
      "base-uri 'self'",
      "form-action 'self'",
      "object-src 'none'",
    ].join("; "),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    // No powerful features: the app needs none of them, so an injected script gets none either.
    "permissions-policy": PERMISSIONS_POLICY,
    // A window the app opens (or that opens it) gets no handle on it; sign-in is a full-page
    // redirect and the silent renewal an iframe, neither of which needs the opener.
    "cross-origin-opener-policy": "same-origin",
    // The app's files are for its own pages only.
    "cross-origin-resource-policy": "same-origin",
  };
}

function decodedPath(pathname: string): string | undefined {
  try {
    return decodeURIComponent(pathname);
  } catch {
    return undefined;
  }
}

function sendText(res: ServerResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}
