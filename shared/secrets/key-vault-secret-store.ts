import type { TokenCredential } from "@azure/identity";
import type { SecretClient, SecretClientOptions } from "@azure/keyvault-secrets";
import { azureCredential } from "../auth/azure-credential.js";
import { isStatus } from "../storage/table-text.js";
import { createFileSecretStore, type SecretStore } from "./api-tokens.js";

/**
 * Secrets in Azure Key Vault, read and written with the shared managed identity (in Azure:
 * DefaultAzureCredential). The dashboard regenerates the job-API token here and the job API reads it
 * from here, so both always agree. The Key Vault SDK loads on the first read or write, not with the
 * app (it costs cold starts that never touch the token; see `npm run bench`, metric d).
 */
export function createKeyVaultSecretStore(options: {
  vaultUrl: string;
  credential: TokenCredential;
  clientOptions?: SecretClientOptions;
}): SecretStore {
  let client: Promise<SecretClient> | undefined;
  const open = () => {
    client ??= import("@azure/keyvault-secrets").then(
      ({ SecretClient }) => new SecretClient(options.vaultUrl, options.credential, options.clientOptions),
    );
    return client;
  };
  return {
    async get(name) {
      try {
        return (await (await open()).getSecret(name)).value;
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
    },
    async set(name, value) {
      await (await open()).setSecret(name, value, { contentType: "application/json" });
    },
  };
}

/**
 * The secret store a process uses: Key Vault when a vault URL is configured (Azure, managed
 * identity through DefaultAzureCredential), else the local folder (the local stack), else none.
 */
export async function selectSecretStore(options: {
  keyVaultUrl: string | undefined;
  secretsDir: string | undefined;
  /** The user-assigned identity's client id (unset: `AZURE_CLIENT_ID`). */
  clientId?: string;
}): Promise<SecretStore | undefined> {
  if (options.keyVaultUrl) {
    return createKeyVaultSecretStore({ vaultUrl: options.keyVaultUrl, credential: azureCredential(options.clientId) });
  }
  if (options.secretsDir) return createFileSecretStore(options.secretsDir);
  return undefined;
}
