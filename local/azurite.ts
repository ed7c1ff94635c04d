import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "../shared/logging/logger.js";
import { stopChild } from "./stop-child.js";

/** The well-known development account Azurite serves (public, documented by Microsoft). */
export const DEV_ACCOUNT = "devstoreaccount1";
export const DEV_ACCOUNT_KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

export interface AzuriteOptions {
  /** Folder for persisted data; undefined keeps everything in memory. */
  location?: string;
  blobPort: number;
  queuePort: number;
  tablePort: number;
  logger: Logger;
  /** Path of the watchdog preload that ends Azurite when this process dies. */
  watchdogPath: string;
  /**
   * Serve HTTPS with this certificate and key (PEM files) and accept only OAuth bearer tokens
   * besides the account key (`--oauth basic`: issuer, audience and lifetime are checked), as Azure
   * storage does for a managed identity. Tests of the identity-based configuration use it.
   */
  oauth?: { certPath: string; keyPath: string };
  /**
   * With `location`: every acknowledged write is on disk before its response leaves (default
   * true; see `azurite-durable.cjs`). false only to measure what durability costs.
   */
  durableWrites?: boolean;
  /** How long Azurite may take to listen (default 30 s; a heavily loaded machine needs longer). */
  startTimeoutMs?: number;
  /**
   * The storage accounts it serves instead of the development account (`AZURITE_ACCOUNTS`; keys
   * base64). The test suite shares one Azurite among its files, one account each.
   */
  accounts?: { name: string; key: string }[];
}

export interface RunningAzurite {
  /** Each service's origin, without an account (`http://127.0.0.1:PORT`). */
  serviceUrls: { blob: string; queue: string; table: string };
  blobEndpoint: string;
  queueEndpoint: string;
  tableEndpoint: string;
  connectionString: string;
  /** The Azurite process (tests cut its power with SIGKILL). */
  pid: number | undefined;
  stop(): Promise<void>;
}

const LISTENING = /Azurite (Blob|Queue|Table) service is successfully listening at (https?:\/\/\S+)/;
const DURABLE_ON = "blastplane durable writes on";

/** The durable-write preload, next to this module (in `local/` from source, `dist/local/` built). */
export const AZURITE_DURABLE_PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), "azurite-durable.cjs");

/**
 * Starts Azurite as a child process (loading it in-process would replace console.log) and waits
 * until its three services listen. Port 0 picks free ports; the real ones are read from its output.
 */
export async function startAzurite(options: AzuriteOptions): Promise<RunningAzurite> {
  const require = createRequire(import.meta.url);
  const cli = path.join(path.dirname(require.resolve("azurite/package.json")), "dist/src/azurite.js");
  const args = [
    "--require",
    options.watchdogPath,
    cli,
    "--disableTelemetry",
    "--skipApiVersionCheck",
    "--silent",
    "--blobHost",
    "127.0.0.1",
    "--queueHost",
    "127.0.0.1",
    "--tableHost",
    "127.0.0.1",
    "--blobPort",
    String(options.blobPort),
    "--queuePort",
    String(options.queuePort),
    "--tablePort",
    String(options.tablePort),
  ];
  if (options.oauth) args.push("--oauth", "basic", "--cert", options.oauth.certPath, "--key", options.oauth.keyPath);
  const durable = Boolean(options.location) && options.durableWrites !== false;
  // Preloads go before the script: node runs them in the Azurite process ahead of its modules.
  if (durable) args.unshift("--require", AZURITE_DURABLE_PRELOAD);
  if (options.location) {
    // Azurite's blobs and tables are the user's data: nobody else may list or read them.
    mkdirSync(options.location, { recursive: true, mode: 0o700 });
    chmodSync(options.location, 0o700);
    args.push("--location", options.location);
  } else {
    args.push("--inMemoryPersistence");
  }
  const child: ChildProcess = spawn(process.execPath, args, {
    stdio: ["pipe", "pipe", "pipe"],
    ...(options.accounts
      ? {
          env: {
            ...process.env,
            AZURITE_ACCOUNTS: options.accounts.map((a) => `${a.name}:${a.key}`).join(";"),
          },
        }
      : {}),
  });
  const endpoints: Record<string, string> = {};
  let durableOn = false;
  let output = "";
  await new Promise<void>((resolve, reject) => {
    const limitMs = options.startTimeoutMs ?? 30_000;
    const timer = setTimeout(
      () => reject(new Error(`Azurite did not start within ${limitMs / 1000} s:\n${output}`)),
      limitMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of chunk.toString().split("\n")) {
        const m = LISTENING.exec(line);
        if (m?.[1] && m[2]) endpoints[m[1].toLowerCase()] = m[2];
        if (line.startsWith(DURABLE_ON)) durableOn = true;
      }
      if (endpoints.blob && endpoints.queue && endpoints.table) {
        // The preload prints before Azurite loads: listening without it means it never ran.
        if (durable && !durableOn) {
          clearTimeout(timer);
          child.kill("SIGKILL");
          reject(new Error(`Azurite started without its durable-write preload:\n${output}`));
          return;
        }
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`Azurite exited with code ${String(code)}:\n${output}`));
    });
  });
  child.removeAllListeners("exit");
  child.stdout?.removeAllListeners("data");
  child.stdout?.resume();
  child.stderr?.resume();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.once("exit", (code, signal) => options.logger.info("azurite stopped", { code, signal }));
  const blobEndpoint = `${endpoints.blob}/${DEV_ACCOUNT}`;
  const queueEndpoint = `${endpoints.queue}/${DEV_ACCOUNT}`;
  const tableEndpoint = `${endpoints.table}/${DEV_ACCOUNT}`;
  options.logger.info("azurite started", {
    blob: blobEndpoint,
    queue: queueEndpoint,
    table: tableEndpoint,
    persistent: Boolean(options.location),
    durable_writes: durable,
  });
  return {
    serviceUrls: { blob: endpoints.blob as string, queue: endpoints.queue as string, table: endpoints.table as string },
    blobEndpoint,
    queueEndpoint,
    tableEndpoint,
    connectionString:
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};` +
      `BlobEndpoint=${blobEndpoint};QueueEndpoint=${queueEndpoint};TableEndpoint=${tableEndpoint};`,
    pid: child.pid,
    stop: () => stopChild(child, exited, 10_000),
  };
}
