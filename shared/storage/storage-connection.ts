import { TableClient, type TableServiceClientOptions, TableServiceClient } from "@azure/data-tables";
import { z } from "zod";
import { azureCredential } from "../auth/azure-credential.js";
import { isLoopbackUrl, type StorageService, storageClientOptions, storageEndpoint } from "./endpoints.js";

/**
 * Where a deployable's storage is, and the one factory of its storage clients.
 *
 * In Azure, storage is reached with the managed identity (`DefaultAzureCredential`, see
 * `shared/auth/azure-credential.ts`) against account URLs, never with an account key or a SAS
 * (spec §5: no storage keys; ledger B-195, B-219). A connection string is accepted only when every
 * endpoint it names is on this machine: that is the embedded Azurite, and it is what "local mode"
 * means. A key or SAS for anything else refuses start with a message naming the setting (never its
 * value) and the identity-based settings to use instead.
 */
export type StorageConnection =
  /** The embedded Azurite (every endpoint on loopback). */
  | { readonly kind: "connection-string"; readonly connectionString: string }
  /** Account URLs reached with the managed identity; a service the deployable does not use may be absent. */
  | {
      readonly kind: "identity";
      readonly blobUrl: string | undefined;
      readonly tableUrl: string | undefined;
      readonly queueUrl: string | undefined;
      /** The user-assigned identity's client id; unset, the credential reads `AZURE_CLIENT_ID`. */
      readonly clientId: string | undefined;
    };

/** What a store's factory accepts: a connection string to Azurite (tests, the local stack) or a {@link StorageConnection}. */
export type StorageTarget = string | StorageConnection;

/** The environment names of one deployable's storage settings. */
export interface StorageSettingNames {
  readonly connectionString: string;
  readonly accountName: string;
  readonly blobUrl: string;
  readonly tableUrl?: string;
  readonly queueUrl?: string;
  /** Must be `managedidentity` when set (the Functions host's convention). */
  readonly credential?: string;
  readonly clientId?: string;
  /** The services the deployable opens: each needs a URL in identity mode. */
  readonly services: readonly StorageService[];
}

/** The Functions app: the Functions host's identity-based connection convention for `AzureWebJobsStorage`. */
export const FUNCTIONS_STORAGE_SETTINGS: StorageSettingNames = {
  connectionString: "AzureWebJobsStorage",
  accountName: "AzureWebJobsStorage__accountName",
  blobUrl: "AzureWebJobsStorage__blobServiceUri",
  tableUrl: "AzureWebJobsStorage__tableServiceUri",
  queueUrl: "AzureWebJobsStorage__queueServiceUri",
  credential: "AzureWebJobsStorage__credential",
  clientId: "AzureWebJobsStorage__clientId",
  services: ["blob", "table"],
};

/** The job API (job state in Tables, queries and results in Blobs). */
export const JOBAPI_STORAGE_SETTINGS: StorageSettingNames = {
  connectionString: "JOBAPI_STORAGE_CONNECTION_STRING",
  accountName: "JOBAPI_STORAGE_ACCOUNT_NAME",
  blobUrl: "JOBAPI_STORAGE_BLOB_URL",
  tableUrl: "JOBAPI_STORAGE_TABLE_URL",
  services: ["blob", "table"],
};

/** The shard worker (its query batch and its output, in Blobs). */
export const SHARD_STORAGE_SETTINGS: StorageSettingNames = {
  connectionString: "SHARD_STORAGE_CONNECTION_STRING",
  accountName: "SHARD_STORAGE_ACCOUNT_NAME",
  blobUrl: "SHARD_STORAGE_BLOB_URL",
  services: ["blob"],
};

/** A warm-up pod (the release in Blobs, the catalog's holds in Tables). */
export const WARM_STORAGE_SETTINGS: StorageSettingNames = {
  ...SHARD_STORAGE_SETTINGS,
  tableUrl: "SHARD_STORAGE_TABLE_URL",
  services: ["blob", "table"],
};

const ACCOUNT_NAME = /^[a-z0-9]{3,24}$/;
const URL_SETTING: Record<StorageService, "blobUrl" | "tableUrl" | "queueUrl"> = {
  blob: "blobUrl",
  table: "tableUrl",
  queue: "queueUrl",
};

/** The zod fields of `names` (all optional strings), to spread into a deployable's schema. */
export function storageSettingsShape(names: StorageSettingNames): Record<string, z.ZodOptional<z.ZodString>> {
  const all = [
    names.connectionString,
    names.accountName,
    names.blobUrl,
    names.tableUrl,
    names.queueUrl,
    names.credential,
    names.clientId,
  ];
  return Object.fromEntries(
    all.filter((name): name is string => name !== undefined).map((name) => [name, z.string().optional()]),
  );
}

/**
 * A refinement for a deployable's schema (built with {@link storageSettingsShape}) that adds one
 * issue per bad storage setting. It runs even when other settings fail, so one refusal names them all.
 */
export function checkStorageSettings(names: StorageSettingNames) {
  return [
    (values: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx) => {
      for (const [setting, message] of resolveStorageSettings(values, names).problems)
        ctx.addIssue({ code: "custom", path: [setting], message });
    },
    { when: () => true },
  ] as const;
}

/**
 * The storage connection `values` describe (with {@link checkStorageSettings} passed, it is never
 * undefined). A connection string wins over identity settings, as in the Functions host.
 */
export function storageConnectionFromSettings(
  values: Readonly<Record<string, unknown>>,
  names: StorageSettingNames,
): StorageConnection {
  const { connection, problems } = resolveStorageSettings(values, names);
  if (!connection)
    throw new Error(
      `invalid storage settings: ${problems.map(([setting, message]) => `${setting}: ${message}`).join("; ")}`,
    );
  return connection;
}

function resolveStorageSettings(
  values: Readonly<Record<string, unknown>>,
  names: StorageSettingNames,
): { connection?: StorageConnection; problems: [setting: string, message: string][] } {
  const read = (name: string | undefined) =>
    name !== undefined && typeof values[name] === "string" ? (values[name] as string) : undefined;
  const connectionString = read(names.connectionString);
  if (connectionString !== undefined) {
    const refusal = connectionStringRefusal(connectionString, names);
    return refusal
      ? { problems: [[names.connectionString, refusal]] }
      : { connection: { kind: "connection-string", connectionString }, problems: [] };
  }
  const problems: [string, string][] = [];
  const account = read(names.accountName);
  const credential = read(names.credential);
  if (names.credential && credential !== undefined && credential.toLowerCase() !== "managedidentity")
    problems.push([names.credential, "must be managedidentity"]);
  if (account !== undefined && !ACCOUNT_NAME.test(account))
    problems.push([names.accountName, "must be a storage account name (3-24 lowercase letters or digits)"]);
  const urls: Partial<Record<StorageService, string>> = {};
  const given = names.services.some((service) => read(names[URL_SETTING[service]]) !== undefined);
  if (account === undefined && !given) return { problems: [[names.connectionString, "is required"], ...problems] };
  for (const service of ["blob", "table", "queue"] as const) {
    const setting = names[URL_SETTING[service]];
    const url = read(setting);
    if (setting && url !== undefined) {
      const problem = accountUrlProblem(url);
      if (problem) problems.push([setting, problem]);
      else urls[service] = url.replace(/\/+$/, "");
    } else if (account !== undefined) {
      if (ACCOUNT_NAME.test(account)) urls[service] = `https://${account}.${service}.core.windows.net`;
    } else if (setting && names.services.includes(service)) {
      problems.push([setting, `is required (or ${names.accountName})`]);
    }
  }
  if (problems.length > 0) return { problems };
  return {
    connection: {
      kind: "identity",
      blobUrl: urls.blob,
      tableUrl: urls.table,
      queueUrl: urls.queue,
      clientId: read(names.clientId),
    },
    problems,
  };
}

/** Why an account URL cannot be used with the managed identity, or undefined when it can. */
function accountUrlProblem(url: string): string | undefined {
  if (!URL.canParse(url) || new URL(url).protocol !== "https:")
    return "must be an https URL (the managed identity's token is sent only over TLS)";
  const parsed = new URL(url);
  if (parsed.searchParams.has("sig"))
    return "holds a SAS; outside local mode storage is reached with the managed identity, not a SAS: give the account URL alone";
  if (parsed.search || parsed.username || parsed.password)
    return "must be the account URL alone (no query, no user info)";
  return undefined;
}

/**
 * Why `connectionString` is refused, or undefined when every endpoint it names is on this machine
 * (Azurite). The message names what the value holds (a key, a SAS) but never repeats it.
 */
export function connectionStringRefusal(
  connectionString: string,
  names: StorageSettingNames = FUNCTIONS_STORAGE_SETTINGS,
): string | undefined {
  // The endpoints it names; only without any, those it implies (Azurite's, or the account's in Azure).
  const named = [...connectionString.matchAll(/(?:^|;)\s*(?:Blob|Queue|Table|File)Endpoint\s*=\s*([^;]*)/gi)].map((m) =>
    (m[1] ?? "").trim(),
  );
  const endpoints =
    named.length > 0
      ? named
      : (["blob", "queue", "table"] as const)
          .map((service) => storageEndpoint(connectionString, service))
          .filter((url) => url !== undefined);
  if (endpoints.length > 0 && endpoints.every(isLoopbackUrl)) return undefined;
  const holds = /(^|;)\s*SharedAccessSignature\s*=/i.test(connectionString)
    ? "holds a SAS"
    : /(^|;)\s*AccountKey\s*=/i.test(connectionString)
      ? "holds an account key"
      : "names storage that is not on this machine";
  const urls = [names.blobUrl, names.tableUrl].filter(Boolean).join(" and ");
  return (
    `${holds}; a connection string is accepted only for the local Azurite (local mode). ` +
    `Outside it, storage is reached with the managed identity: set ${names.accountName} (or ${urls}) instead`
  );
}

/** The endpoint a client of `service` opens, for messages and plain-HTTP rules (never logged with a key). */
function identityUrl(storage: Extract<StorageConnection, { kind: "identity" }>, service: StorageService): string {
  const url = service === "blob" ? storage.blobUrl : service === "table" ? storage.tableUrl : storage.queueUrl;
  if (!url) throw new Error(`no ${service} storage URL is configured for this deployable`);
  return url;
}

/** The connection string of an Azurite target, refusing one that reaches beyond this machine. */
export function azuriteConnectionString(target: string): string {
  const refusal = connectionStringRefusal(target);
  if (refusal) throw new Error(`storage connection string refused: ${refusal}`);
  return target;
}

/** A Table client for `tableName`: Azurite by connection string, or the account URL with the managed identity. */
export function openTableClient(
  target: StorageTarget,
  tableName: string,
  options?: TableServiceClientOptions,
): TableClient {
  if (typeof target === "string" || target.kind === "connection-string") {
    const connectionString = azuriteConnectionString(typeof target === "string" ? target : target.connectionString);
    return TableClient.fromConnectionString(
      connectionString,
      tableName,
      storageClientOptions(connectionString, options),
    );
  }
  return new TableClient(identityUrl(target, "table"), tableName, azureCredential(target.clientId), options);
}

/** The Table service client (listing tables, readiness). */
export function openTableServiceClient(target: StorageTarget, options?: TableServiceClientOptions): TableServiceClient {
  if (typeof target === "string" || target.kind === "connection-string") {
    const connectionString = azuriteConnectionString(typeof target === "string" ? target : target.connectionString);
    return TableServiceClient.fromConnectionString(connectionString, storageClientOptions(connectionString, options));
  }
  return new TableServiceClient(identityUrl(target, "table"), azureCredential(target.clientId), options);
}

/** The Blob endpoint of `target` (for a client built where the Blob SDK is loaded; see `blob-service.ts`). */
export function blobUrlOf(target: Extract<StorageConnection, { kind: "identity" }>): string {
  return identityUrl(target, "blob");
}

/**
 * `config` with the `storageConnectionString` field that code written before identity-based
 * storage reads: the Azurite connection string in local mode; with the managed identity a
 * non-enumerable getter that throws, so such code fails loudly instead of looking for a key.
 */
export function withLegacyConnectionString<T extends { storage: StorageConnection }>(
  config: T,
): T & { readonly storageConnectionString: string } {
  const { storage } = config;
  if (storage.kind === "connection-string") return { ...config, storageConnectionString: storage.connectionString };
  return Object.defineProperty({ ...config }, "storageConnectionString", {
    enumerable: false,
    get(): never {
      throw new Error(
        "storage is reached with the managed identity here, not a connection string: open it through config.storage",
      );
    },
  }) as T & { readonly storageConnectionString: string };
}
