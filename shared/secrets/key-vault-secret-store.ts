import type { TokenCredential } from "@azure/identity";
import { SecretClient, type SecretClientOptions } from "@azure/keyvault-secrets";
import { isStatus } from "../storage/table-text.js";
import { createFileSecretStore, type SecretStore } from "./api-tokens.js";

/**
 * Secrets in Azure Key Vault, read and written with the shared managed identity (in Azure:
 * DefaultAzureCredential). The dashboard regenerates the job-API token here and the job API reads it
 * from here, so both always agree.
 */
export function createKeyVaultSecretStore(options: {
  vaultUrl: string;
  credential: TokenCredential;
  clientOptions?: SecretClientOptions;
}): SecretStore {
  const client = new SecretClient(options.vaultUrl, options.credential, options.clientOptions);
  return {
    async get(name) {
      try {
        return (await client.getSecret(name)).value;
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
    },
    async set(name, value) {
      await client.setSecret(name, value, { contentType: "application/json" });
    },
  };
}

/**
 * The secret store a process uses: Key Vault when a vault URL is configured (Azure, managed
 * identity through DefaultAzureCredential), else the local folder (the local stack), else none.
 */
export async function selectSecretStore(options: { keyVaultUrl: string | undefined; secretsDir: string | undefined }): Promise<SecretStore | undefined> {
  if (options.keyVaultUrl) {
    const { DefaultAzureCredential } = await import("@azure/identity");
    return createKeyVaultSecretStore({ vaultUrl: options.keyVaultUrl, credential: new DefaultAzureCredential() });
  }
  if (options.secretsDir) return createFileSecretStore(options.secretsDir);
  return undefined;
}
