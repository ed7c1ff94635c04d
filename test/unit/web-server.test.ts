import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createWebHandler } from "../../local/web-server.js";

let dir: string;
let server: Server;
let base: string;
const apiCalls: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "web-server-test-"));
  const root = path.join(dir, "web");
  await mkdir(path.join(root, "assets"), { recursive: true });
  await writeFile(path.join(root, "index.html"), "<!doctype html><title>app</title>");
  await writeFile(path.join(root, "assets", "index-abc.js"), "console.log(1)");
  await writeFile(path.join(dir, "secret.txt"), "outside the app folder");
  server = createServer(
    createWebHandler({
      root,
      api: (req, res) => {
        apiCalls.push(req.url ?? "");
        res.writeHead(204);
        res.end();
      },
      webConfig: () => ({ auth: { client_id: "c" } }),
      connectOrigins: () => ["http://127.0.0.1:7072"],
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
  await rm(dir, { recursive: true, force: true });
});

describe("the local web server beside the Functions routes", () => {
  it("hands /api and everything under it to the Functions host", async () => {
    expect((await fetch(`${base}/api/health`)).status).toBe(204);
    expect((await fetch(`${base}/api`)).status).toBe(204);
    expect(apiCalls).toEqual(["/api/health", "/api"]);
  });

  it("serves app routes as index.html with a CSP that admits only the app and the identity provider", async () => {
    const res = await fetch(`${base}/blast/jobs/0b1c2d3e-4f50-5172-8394-a5b6c7d8e9f0`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("<title>app</title>");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self' http://127.0.0.1:7072");
    expect(csp).toContain("frame-ancestors 'self'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("permissions-policy")).toContain("camera=()");
    expect(res.headers.get("permissions-policy")).toContain("microphone=()");
    expect(res.headers.get("permissions-policy")).toContain("geolocation=()");
    expect(res.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    expect(res.headers.get("cross-origin-resource-policy")).toBe("same-origin");
  });

  it("with loopbackHostOnly refuses a Host header naming anything but loopback, for the app and /api alike", async () => {
    const guarded = createServer(
      createWebHandler({
        root: path.join(dir, "web"),
        api: (_req, res) => {
          res.writeHead(204);
          res.end();
        },
        webConfig: () => ({}),
        connectOrigins: () => [],
        loopbackHostOnly: true,
      }),
    );
    await new Promise<void>((resolve) => guarded.listen(0, "127.0.0.1", resolve));
    const port = (guarded.address() as AddressInfo).port;
    const status = (pathname: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: "127.0.0.1", port, path: pathname, headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end();
      });
    try {
      for (const pathname of ["/", "/web-config.json", "/api/health"]) {
        expect(await status(pathname, `rebind.attacker.example:${port}`)).toBe(421);
        expect(await status(pathname, `127.0.0.2.nip.example:${port}`)).toBe(421);
        expect(await status(pathname, `localhost:${port}`)).not.toBe(421);
        expect(await status(pathname, `127.0.0.1:${port}`)).not.toBe(421);
        expect(await status(pathname, `[::1]:${port}`)).not.toBe(421);
      }
    } finally {
      await new Promise<void>((resolve) => guarded.close(() => resolve()));
    }
  });

  it("serves hashed assets as immutable and the runtime configuration as never cached", async () => {
    const asset = await fetch(`${base}/assets/index-abc.js`);
    expect(asset.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(asset.headers.get("cache-control")).toContain("immutable");
    const config = await fetch(`${base}/web-config.json`);
    expect(await config.json()).toEqual({ auth: { client_id: "c" } });
    expect(config.headers.get("cache-control")).toBe("no-store");
  });

  it("refuses what is not a file of the app: a missing asset, a path out of the folder, a malformed path, other methods", async () => {
    expect((await fetch(`${base}/assets/missing.js`)).status).toBe(404);
    for (const outside of ["/%2e%2e/secret.txt", "/assets/%2e%2e/%2e%2e/secret.txt", "/..%2fsecret.txt"]) {
      const res = await fetch(`${base}${outside}`);
      expect(res.status, outside).toBe(404);
      expect(await res.text(), outside).not.toContain("outside the app folder");
    }
    expect((await fetch(`${base}/%E0%A4%A`)).status).toBe(400);
    const post = await fetch(`${base}/`, { method: "POST", body: "x" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });
});
