/**
 * Vendor SDKs that only some requests need, loaded on their first use and kept (decision 0016):
 * the Functions app imports its bundle on every cold start, and a first request of most routes
 * sends no email, posts nothing to Slack and signs no webhook. Each loader imports its package
 * once (a failed load is retried on the next use) and checks that the exports the app calls are
 * there: in the bundle a dynamic import of a CommonJS package may hand its exports over under
 * `default` only (as `@azure/arm-authorization`'s did), so each is taken named or from `default`,
 * and a package that has neither fails loudly on its first use, naming it.
 * test/integration/functions-bundle.test.ts loads each of them from a bundle built like the app's.
 */

type Loaded<T> = T & { default?: T };

/** `module`'s exports named `names`, whether handed over named or under `default`; throws naming what is missing. */
function exportsOf<T extends object>(pkg: string, loaded: Loaded<T>, names: readonly (keyof T & string)[]): T {
  const fromDefault = loaded.default;
  const missing = names.filter((name) => loaded[name] === undefined && fromDefault?.[name] === undefined);
  if (missing.length > 0) throw new Error(`${pkg} loaded without ${missing.join(", ")}`);
  return names.every((name) => loaded[name] !== undefined) ? loaded : (fromDefault as T);
}

/** Memoizes a load; a failed one is forgotten, so the next use tries again. */
function once<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    });
    return loading;
  };
}

/** nodemailer (the email channel): `createTransport`. */
export const loadNodemailer = once(async () => {
  const loaded = (await import("nodemailer")) as unknown as Loaded<typeof import("nodemailer")>;
  return exportsOf("nodemailer", loaded, ["createTransport"]);
});

/** `@slack/web-api` (chat platform B, outbound and replies): the client and the error classes it throws. */
export const loadSlackWebApi = once(async () => {
  const loaded = (await import("@slack/web-api")) as Loaded<typeof import("@slack/web-api")>;
  return exportsOf("@slack/web-api", loaded, [
    "WebClient",
    "WebAPIHTTPError",
    "WebAPIPlatformError",
    "WebAPIRateLimitedError",
    "WebAPIRequestError",
  ]);
});

/** `standardwebhooks` (the webhook channel's signer, the inbound webhooks' verifier): `Webhook`. */
export const loadStandardWebhooks = once(async () => {
  const loaded = (await import("standardwebhooks")) as Loaded<typeof import("standardwebhooks")>;
  return exportsOf("standardwebhooks", loaded, ["Webhook"]);
});

/**
 * The Microsoft 365 Agents SDK (the inbound Teams channel's replies): `CloudAdapter`. A CommonJS
 * package: in the bundle its exports arrive under `default` only, so a plain
 * `(await import(…)).CloudAdapter` is undefined there (the full-stack reply test found it).
 */
export const loadAgentsHosting = once(async () => {
  const loaded = (await import("@microsoft/agents-hosting")) as Loaded<typeof import("@microsoft/agents-hosting")>;
  return exportsOf("@microsoft/agents-hosting", loaded, ["CloudAdapter"]);
});

/**
 * `@azure/identity`'s `ClientSecretCredential` (the Teams replies' app token from a configured
 * authority host). Not in {@link LAZY_SDKS}: the bundle test of every `await import` checks it.
 */
export const loadClientSecretCredential = once(async () => {
  const loaded = (await import("@azure/identity")) as Loaded<typeof import("@azure/identity")>;
  return exportsOf("@azure/identity", loaded, ["ClientSecretCredential"]);
});

/** `@octokit/rest` (the `/svc` draft pull requests on a configured Git host): `Octokit`. */
export const loadOctokit = once(async () => {
  const loaded = (await import("@octokit/rest")) as Loaded<typeof import("@octokit/rest")>;
  return exportsOf("@octokit/rest", loaded, ["Octokit"]);
});

/** Every loader, by package: what the bundle tests load one by one. */
export const LAZY_SDKS = {
  nodemailer: loadNodemailer,
  "@slack/web-api": loadSlackWebApi,
  standardwebhooks: loadStandardWebhooks,
  "@microsoft/agents-hosting": loadAgentsHosting,
  "@octokit/rest": loadOctokit,
} as const;
