import type { AccessToken, GetTokenOptions, TokenCredential } from "@azure/identity";

/**
 * The one place a process gets its Azure identity: `DefaultAzureCredential`, which in Azure is the
 * Function App's user-assigned managed identity (`IDENTITY_ENDPOINT`) or, on the cluster, the pod's
 * workload identity (`AZURE_FEDERATED_TOKEN_FILE`, injected by the workload identity webhook).
 * `clientId` picks the user-assigned identity; without it the credential reads `AZURE_CLIENT_ID`.
 *
 * `@azure/identity` (and MSAL under it) loads on the first token request, not with the app: a
 * cold start that never reaches Azure storage (the local stack, most health probes) does not pay
 * for it, as with the Key Vault SDK (`npm run bench`, metric d).
 */
export function azureCredential(clientId?: string): TokenCredential {
  const key = clientId ?? "";
  let credential = credentials.get(key);
  if (!credential) {
    let loaded: Promise<TokenCredential> | undefined;
    const load = () => {
      loaded ??= import("@azure/identity").then(
        ({ DefaultAzureCredential }) =>
          new DefaultAzureCredential(
            clientId ? { managedIdentityClientId: clientId, workloadIdentityClientId: clientId } : {},
          ),
      );
      return loaded;
    };
    credential = {
      getToken: async (scopes: string | string[], options?: GetTokenOptions): Promise<AccessToken | null> =>
        (await load()).getToken(scopes, options),
    };
    credentials.set(key, credential);
  }
  return credential;
}

// One credential per identity and process, so its token cache is shared by every client.
const credentials = new Map<string, TokenCredential>();
