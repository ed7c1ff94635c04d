import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/identity";

/**
 * The app's managed identity (DefaultAzureCredential), created on the first token request so the
 * Functions bundle loads `@azure/identity` only when a console provider is first used.
 */
export function lazyDefaultCredential(): TokenCredential {
  let credential: Promise<TokenCredential> | undefined;
  return {
    async getToken(scopes: string | string[], options?: GetTokenOptions): Promise<AccessToken | null> {
      credential ??= import("@azure/identity").then(({ DefaultAzureCredential }) => new DefaultAzureCredential());
      return (await credential).getToken(scopes, options);
    },
  };
}
