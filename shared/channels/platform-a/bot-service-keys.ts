import https from "node:https";
import type { JWK } from "jose";

/** Bot Service's OpenID metadata (the default of `SVC_PLATFORM_A_OPENID_METADATA_URL`). */
export const BOT_SERVICE_OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration";
/** The issuer of the tokens Bot Service sends a bot (the default of `SVC_PLATFORM_A_TOKEN_ISSUER`). */
export const BOT_SERVICE_ISSUER = "https://api.botframework.com";

/** A key of the Bot Service key set, with the channels that endorse it. */
export interface BotServiceKey extends JWK {
  kid: string;
  endorsements?: string[];
}

/** The cached key set: looked up by `kid`, refreshed when stale or when an unknown kid arrives (rate-limited). */
export interface BotServiceKeySet {
  get(kid: string): Promise<BotServiceKey | undefined>;
}

const MAX_DOCUMENT_BYTES = 256 * 1024;

/** GETs an HTTPS JSON document (bounded size and time); `ca` trusts a test's own certificate authority. */
export function getHttpsJson(
  url: string,
  options: { ca?: string | Buffer; timeoutMs?: number } = {},
): Promise<unknown> {
  const target = new URL(url);
  if (target.protocol !== "https:") return Promise.reject(new Error("the key set is fetched over HTTPS only"));
  return new Promise((resolve, reject) => {
    const request = https.get(
      target,
      {
        headers: { accept: "application/json" },
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
        ...(options.ca ? { ca: options.ca } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_DOCUMENT_BYTES) response.destroy(new Error("document too large"));
          else chunks.push(chunk);
        });
        response.on("end", () => {
          if (response.statusCode !== 200) return reject(new Error(`HTTP ${response.statusCode}`));
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
          } catch {
            reject(new Error("not JSON"));
          }
        });
        response.on("error", reject);
      },
    );
    request.on("error", reject);
  });
}

/**
 * The Bot Service signing keys (spec operator-console.md §5 item 7: "a cached key set"): the OpenID
 * metadata names the `jwks_uri`; the keys are cached for `ttlMs` (Bot Framework rotates them
 * rarely and publishes new ones ahead of use) and re-read early only when a token names an unknown
 * `kid`, at most once per `minRefreshMs`, so a flood of forged kids cannot make it fetch per request.
 * Only RSA signing keys are kept. A failed refresh keeps the previous keys.
 */
export function createBotServiceKeySet(options: {
  metadataUrl: string;
  ca?: string | Buffer;
  ttlMs?: number;
  minRefreshMs?: number;
  now?: () => number;
  fetchJson?: (url: string) => Promise<unknown>;
}): BotServiceKeySet & { fetches: () => number } {
  const ttl = options.ttlMs ?? 24 * 60 * 60 * 1000;
  const minRefresh = options.minRefreshMs ?? 5 * 60 * 1000;
  const now = options.now ?? Date.now;
  const fetchJson =
    options.fetchJson ?? ((url: string) => getHttpsJson(url, options.ca !== undefined ? { ca: options.ca } : {}));
  let keys = new Map<string, BotServiceKey>();
  let loadedAt = Number.NEGATIVE_INFINITY;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let loading: Promise<void> | undefined;
  let fetchCount = 0;

  async function load(): Promise<void> {
    attemptedAt = now();
    fetchCount++;
    const metadata = (await fetchJson(options.metadataUrl)) as { jwks_uri?: unknown };
    if (typeof metadata?.jwks_uri !== "string" || !metadata.jwks_uri.startsWith("https://"))
      throw new Error("the OpenID metadata names no HTTPS jwks_uri");
    const set = (await fetchJson(metadata.jwks_uri)) as { keys?: unknown };
    if (!Array.isArray(set?.keys)) throw new Error("the key set has no keys");
    const next = new Map<string, BotServiceKey>();
    for (const k of set.keys as Record<string, unknown>[]) {
      if (k?.kty !== "RSA" || typeof k.kid !== "string" || typeof k.n !== "string" || typeof k.e !== "string") continue;
      if (k.use !== undefined && k.use !== "sig") continue;
      next.set(k.kid, {
        kty: "RSA",
        kid: k.kid,
        n: k.n,
        e: k.e,
        ...(Array.isArray(k.endorsements)
          ? { endorsements: k.endorsements.filter((x): x is string => typeof x === "string") }
          : {}),
      });
    }
    if (next.size === 0) throw new Error("the key set has no RSA signing keys");
    keys = next;
    loadedAt = now();
  }

  const refresh = () => {
    loading ??= load()
      .catch(() => undefined)
      .finally(() => {
        loading = undefined;
      });
    return loading;
  };

  return {
    async get(kid) {
      if (now() - loadedAt > ttl && now() - attemptedAt >= minRefresh) await refresh();
      const key = keys.get(kid);
      if (key || now() - attemptedAt < minRefresh) return key;
      await refresh();
      return keys.get(kid);
    },
    fetches: () => fetchCount,
  };
}
