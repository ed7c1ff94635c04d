import type { TokenCredential } from "@azure/identity";

/**
 * How the control plane reaches Azure Resource Manager: the one managed identity's credential and
 * the client options every `@azure/arm-*` client gets (in Azure only the credential; the local
 * stack and tests override `endpoint` to the local Resource Manager and trust its CA).
 */
export interface ArmConnection {
  credential: TokenCredential;
  clientOptions?: {
    endpoint?: string;
    tlsOptions?: { ca?: string };
    retryOptions?: { maxRetries?: number };
    /**
     * The token scope: ARM's, whatever the endpoint (some generated clients would otherwise ask
     * for `<endpoint>/.default`, which no identity provider issues for a local endpoint).
     */
    credentials?: { scopes?: string[] };
    credentialScopes?: string[];
  };
}

/** Azure's public-cloud Resource Manager endpoint (what the SDKs use when `ARM_ENDPOINT` is unset). */
export const PUBLIC_ARM_ENDPOINT = "https://management.azure.com";

/** The token scope of Resource Manager. */
export const ARM_SCOPE = "https://management.azure.com/.default";

/** A lazily created client: the SDK module loads on first use, not at cold start. */
export function lazyClient<T>(create: () => Promise<T>): () => Promise<T> {
  let client: Promise<T> | undefined;
  return () => {
    client ??= create().catch((error: unknown) => {
      client = undefined;
      throw error;
    });
    return client;
  };
}

/** The resource group of an ARM resource id. */
export function resourceGroupOf(id: string | undefined): string {
  return /\/resourceGroups\/([^/]+)/i.exec(id ?? "")?.[1] ?? "";
}
