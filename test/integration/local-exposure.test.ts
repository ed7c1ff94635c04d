/**
 * What the local stack exposes beyond the user's own account (issue 21 items 4 and 9): every
 * listening socket of its processes is on loopback, every service refuses a Host header that names
 * anything but loopback (DNS rebinding), JSON responses say nosniff, and the data folder is private.
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { request } from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readApiToken } from "../support/jobapi-client.js";
import { startStack, type TestStack } from "../support/local-stack.js";

let stack: TestStack;

beforeAll(async () => {
  // On disk (not in memory), so Azurite, the job API and the durable backend write their files.
  stack = await startStack({ inMemory: false, readyTimeoutMs: 120_000 });
}, 150_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

/** The process and all its descendants, from /proc (the stack's Azurite, job API, ...). */
function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid ...: comm may contain spaces and parentheses, so read after the last ")".
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
  }
  const out: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** Socket inodes a process holds open. */
function socketInodes(pid: number): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const inodes: string[] = [];
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m?.[1]) inodes.push(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/** One 32-bit word of /proc/net/tcp's address, which is in host (little-endian) byte order. */
function wordBytes(hex: string): number[] {
  const bytes = (hex.match(/../g) ?? []).map((b) => Number.parseInt(b, 16));
  return bytes.reverse();
}

/** Listening TCP sockets (IPv4 and IPv6) by inode, with their address in readable form. */
function listeningSockets(): Map<string, { address: string; port: number; loopback: boolean }> {
  const out = new Map<string, { address: string; port: number; loopback: boolean }>();
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const lines = readFileSync(file, "utf8").trim().split("\n").slice(1);
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      const [local, state, inode] = [f[1] ?? "", f[3], f[9] ?? ""];
      if (state !== "0A") continue; // LISTEN
      const [hex = "", portHex = "0"] = local.split(":");
      const port = Number.parseInt(portHex, 16);
      if (hex.length === 8) {
        const bytes = wordBytes(hex);
        out.set(inode, { address: bytes.join("."), port, loopback: bytes[0] === 127 });
      } else {
        const bytes = (hex.match(/.{8}/g) ?? []).flatMap(wordBytes);
        const address = (
          bytes
            .map((b) => b.toString(16).padStart(2, "0"))
            .join("")
            .match(/.{4}/g) ?? []
        ).join(":");
        const isV6Loopback = bytes.slice(0, 15).every((b) => b === 0) && bytes[15] === 1;
        const isMappedV4Loopback =
          bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff && bytes[12] === 127;
        out.set(inode, { address, port, loopback: isV6Loopback || isMappedV4Loopback });
      }
    }
  }
  return out;
}

/** GET with an explicit Host header (fetch does not let a caller choose it). */
function get(
  url: string,
  host?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { ...(host ? { host } : {}), ...headers } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the local stack's exposure", () => {
  it("listens on loopback only, in every process of the stack (the Functions host's HTTP stream proxy too)", () => {
    const pids = processTree(stack.process.pid as number);
    const sockets = listeningSockets();
    const mine = pids.flatMap((pid) => socketInodes(pid).flatMap((inode) => sockets.get(inode) ?? []));
    const ports = new Set(mine.map((s) => s.port));
    // Not vacuous: the stack's known ports are among them, and more (the proxy has no URL of its own).
    const known = [stack.info.functions_url, stack.info.idp_url, stack.info.jobapi_url, stack.info.blob_endpoint].map(
      (u) => Number(new URL(u).port),
    );
    for (const port of known) expect(ports, `port ${port}`).toContain(port);
    expect(ports.size).toBeGreaterThan(known.length);
    const exposed = mine.filter((s) => !s.loopback).map((s) => `${s.address} port ${s.port}`);
    expect(exposed).toEqual([]);
  });

  it("refuses a Host header that does not name loopback on the Functions port, the web app and the job API (DNS rebinding)", async () => {
    const functions = new URL(stack.info.functions_url);
    const jobapi = new URL(stack.info.jobapi_url);
    for (const [url, port] of [
      [`${stack.info.functions_url}/api/health`, functions.port],
      [`${stack.info.functions_url}/api/health/queue`, functions.port],
      [`${stack.info.functions_url}/`, functions.port],
      [`${stack.info.functions_url}/web-config.json`, functions.port],
      [`${stack.info.jobapi_url}/v1/health`, jobapi.port],
      [`${stack.info.jobapi_url}/openapi.json`, jobapi.port],
      [
        `${stack.info.idp_url}/blastplane-local/v2.0/.well-known/openid-configuration`,
        new URL(stack.info.idp_url).port,
      ],
    ] as const) {
      const rebound = await get(url, `rebind.attacker.example:${port}`);
      expect(rebound.status, url).toBe(421);
      expect(rebound.body, url).not.toMatch(/ok|openapi|client_id|issuer/);
      for (const name of ["localhost", "127.0.0.1"]) {
        expect((await get(url, `${name}:${port}`)).status, `${url} as ${name}`).toBe(200);
      }
    }
  });

  it("says X-Content-Type-Options: nosniff on the JSON responses of both APIs, errors included", async () => {
    const token = readApiToken(stack);
    const responses = [
      await get(`${stack.info.functions_url}/api/health`),
      await get(`${stack.info.functions_url}/api/me`),
      await get(`${stack.info.functions_url}/api/no-such-route`),
      await get(`${stack.info.jobapi_url}/v1/health`),
      await get(`${stack.info.jobapi_url}/v1/jobs`),
      await get(`${stack.info.jobapi_url}/v1/jobs`, undefined, { "X-SVC-API-Token": token }),
      await get(`${stack.info.jobapi_url}/v1/no-such-route`),
    ];
    expect(responses.map((r) => r.status)).toEqual([200, 401, 404, 200, 401, 200, 404]);
    for (const res of responses) {
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
    }
  });

  it("keeps the data folder private: folders 0700, files 0600 (queries, results, the audit, Azurite's files)", () => {
    const loose: string[] = [];
    let files = 0;
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isSymbolicLink()) continue;
        const mode = statSync(full).mode & 0o777;
        if ((mode & 0o077) !== 0) loose.push(`${path.relative(stack.dataDir, full)} ${mode.toString(8)}`);
        if (entry.isDirectory()) walk(full);
        else files++;
      }
    };
    expect(statSync(stack.dataDir).mode & 0o777).toBe(0o700);
    walk(stack.dataDir);
    expect(files).toBeGreaterThan(3);
    expect(readdirSync(path.join(stack.dataDir, "azurite")).length).toBeGreaterThan(0);
    expect(loose).toEqual([]);
  });
});
