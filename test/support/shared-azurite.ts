import { createHash } from "node:crypto";
import { closeSync, openSync } from "node:fs";
import path from "node:path";
import { type RunningAzurite, startAzurite } from "../../local/azurite.js";
import { createLogger } from "../../shared/logging/logger.js";

/**
 * One Azurite for the whole run, shared by the files that need only storage (`azuriteTables`): a
 * start costs ~3 s and ~3 CPU-s, and the suite is CPU-bound (docs/testing.md). Each file gets an
 * account of its own — its tables, blobs and queues are its own — so sharing changes nothing a test
 * can see. Files that restart, cut or configure their Azurite still start their own.
 */

/** Accounts the shared Azurite serves: more than the files that claim one (`azuriteTables`). */
const ACCOUNTS = 96;

export interface SharedAzurite {
  serviceUrls: RunningAzurite["serviceUrls"];
  accounts: { name: string; key: string }[];
  /** Where a file claims its account (one file per account, created exclusively). */
  claimsDir: string;
}

/** The accounts' names and keys (test-only keys, derived from the names). */
function accounts(): SharedAzurite["accounts"] {
  return Array.from({ length: ACCOUNTS }, (_, i) => {
    const name = `bptest${String(i).padStart(3, "0")}`;
    return { name, key: createHash("sha512").update(`blastplane-test:${name}`).digest("base64") };
  });
}

/** Starts the run's shared Azurite (the global set-up). */
export async function startSharedAzurite(claimsDir: string, root: string) {
  const list = accounts();
  const azurite = await startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger: createLogger({ level: "error" }),
    watchdogPath: path.join(root, "local/parent-watchdog.cjs"),
    startTimeoutMs: 120_000,
    accounts: list,
  });
  const shared: SharedAzurite = { serviceUrls: azurite.serviceUrls, accounts: list, claimsDir };
  return { shared, stop: () => azurite.stop() };
}

/**
 * Claims an unused account of the shared Azurite, as a running Azurite whose `stop()` leaves the
 * shared one running (it has no process of its own); undefined when no account is left.
 */
export function claimSharedAccount(shared: SharedAzurite): RunningAzurite | undefined {
  for (const account of shared.accounts) {
    try {
      closeSync(openSync(path.join(shared.claimsDir, account.name), "wx"));
    } catch {
      continue;
    }
    const { blob, queue, table } = shared.serviceUrls;
    const blobEndpoint = `${blob}/${account.name}`;
    const queueEndpoint = `${queue}/${account.name}`;
    const tableEndpoint = `${table}/${account.name}`;
    return {
      serviceUrls: shared.serviceUrls,
      blobEndpoint,
      queueEndpoint,
      tableEndpoint,
      connectionString:
        `DefaultEndpointsProtocol=http;AccountName=${account.name};AccountKey=${account.key};` +
        `BlobEndpoint=${blobEndpoint};QueueEndpoint=${queueEndpoint};TableEndpoint=${tableEndpoint};`,
      pid: undefined,
      stop: async () => undefined,
    };
  }
  return undefined;
}
