/**
 * Where a storage connection string points, and whether plain HTTP may be used there. The Azure SDK
 * refuses `http://` unless a client is built with `allowInsecureConnection`; every storage client
 * of this codebase gets that option from {@link storageClientOptions}, which grants it only for
 * an endpoint on this machine (Azurite), never for one across a network.
 */

/** A storage service whose endpoint a connection string names. */
export type StorageService = "blob" | "queue" | "table";

/** Azurite's well-known ports, which `UseDevelopmentStorage=true` stands for. */
const DEVELOPMENT_PORTS: Record<StorageService, number> = { blob: 10000, queue: 10001, table: 10002 };
const ENDPOINT_KEYS: Record<StorageService, string> = {
  blob: "blobendpoint",
  queue: "queueendpoint",
  table: "tableendpoint",
};

/** True when `url` is an http(s) URL on a loopback host (127.0.0.0/8, `localhost`, `::1`). */
export function isLoopbackUrl(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const { protocol, hostname } = new URL(url);
  if (protocol !== "http:" && protocol !== "https:") return false;
  return hostname === "localhost" || hostname === "[::1]" || /^127(?:\.\d{1,3}){3}$/.test(hostname);
}

/**
 * The endpoint of `service` that `connectionString` names: its `<Service>Endpoint`, Azurite's for
 * `UseDevelopmentStorage=true` (or its `DevelopmentStorageProxyUri`), otherwise the one derived from
 * `DefaultEndpointsProtocol`, `AccountName` and `EndpointSuffix`. Undefined when it names none.
 */
export function storageEndpoint(connectionString: string, service: StorageService): string | undefined {
  const settings = new Map<string, string>();
  for (const part of connectionString.split(";")) {
    const at = part.indexOf("=");
    if (at > 0) settings.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).trim());
  }
  const explicit = settings.get(ENDPOINT_KEYS[service]);
  if (explicit) return explicit;
  if (settings.get("usedevelopmentstorage")?.toLowerCase() === "true") {
    const proxy = settings.get("developmentstorageproxyuri");
    return proxy ?? `http://127.0.0.1:${DEVELOPMENT_PORTS[service]}/devstoreaccount1`;
  }
  const account = settings.get("accountname");
  if (!account) return undefined;
  const protocol = settings.get("defaultendpointsprotocol") ?? "https";
  return `${protocol}://${account}.${service}.${settings.get("endpointsuffix") ?? "core.windows.net"}`;
}

/**
 * Options for a storage client of `service` at `endpoint` (a connection string or a URL): the
 * given options plus `allowInsecureConnection`, true only when that endpoint is on this machine.
 * A production `http://` endpoint (a typo) thus fails on the first call instead of sending
 * requests in the clear.
 */
export function storageClientOptions<T extends object = Record<never, never>>(
  endpoint: string,
  options?: T,
  service: StorageService = "table",
): T & { allowInsecureConnection: boolean } {
  const url = /^https?:\/\//i.test(endpoint) ? endpoint : storageEndpoint(endpoint, service);
  return { ...(options as T), allowInsecureConnection: url !== undefined && isLoopbackUrl(url) };
}
