import type { ManagedCluster } from "@azure/arm-containerservice";
import type { ResourceGraphClient, ResourceGraphClientOptionalParams } from "@azure/arm-resourcegraph";
import type { TokenCredential } from "@azure/identity";
import type { BaselineObserver } from "./configuration-baseline.js";

/**
 * Observers of the configuration baseline's sources, each over the server-configured scope only
 * (the caller names none, C-100). The SDKs load on first use.
 */

/** The managed cluster as ARM describes it (the AKS SDK's `managedClusters.get`). */
export function aksBaselineObserver(read: () => Promise<ManagedCluster>, pool: string): BaselineObserver {
  return async () => {
    const cluster = await read();
    const blast = cluster.agentPoolProfiles?.find((p) => p.name === pool);
    return {
      status: "observed",
      scope: `managed cluster ${cluster.name ?? ""}`.trim(),
      fields: {
        kubernetes_version: cluster.currentKubernetesVersion ?? cluster.kubernetesVersion ?? null,
        auto_upgrade_channel: cluster.autoUpgradeProfile?.upgradeChannel ?? null,
        disable_local_accounts: cluster.disableLocalAccounts ?? false,
        ...(blast
          ? {
              "blast_pool.vm_size": blast.vmSize ?? null,
              "blast_pool.count": blast.count ?? null,
              "blast_pool.min_count": blast.minCount ?? null,
              "blast_pool.max_count": blast.maxCount ?? null,
              "blast_pool.node_labels": Object.entries(blast.nodeLabels ?? {}).map(([k, v]) => `${k}=${v}`),
              "blast_pool.node_taints": blast.nodeTaints ?? [],
            }
          : {}),
      },
    };
  };
}

/** The fixed Resource Graph query for the app's storage account; the account name is server configuration, validated. */
export function storageAccountQuery(accountName: string): string {
  if (!/^[a-z0-9]{3,24}$/.test(accountName)) throw new RangeError("not a storage account name");
  return `Resources | where type =~ 'microsoft.storage/storageaccounts' and name =~ '${accountName}' | project name, type, allowSharedKeyAccess = properties.allowSharedKeyAccess, publicNetworkAccess = tostring(properties.publicNetworkAccess), allowBlobPublicAccess = properties.allowBlobPublicAccess, minimumTlsVersion = tostring(properties.minimumTlsVersion)`;
}

/** The app's storage account through Resource Graph (one query, one record). */
export function storageAccountObserver(options: {
  subscriptionId: string;
  accountName: string;
  credential: TokenCredential;
  clientOptions?: ResourceGraphClientOptionalParams;
}): BaselineObserver {
  let client: Promise<ResourceGraphClient> | undefined;
  const query = storageAccountQuery(options.accountName);
  return async () => {
    client ??= import("@azure/arm-resourcegraph").then(
      ({ ResourceGraphClient }) => new ResourceGraphClient(options.credential, options.clientOptions),
    );
    const page = await (await client).resources({
      query,
      subscriptions: [options.subscriptionId],
      options: { resultFormat: "objectArray", top: 10 },
    });
    const rows = (page.data as Record<string, unknown>[] | undefined) ?? [];
    const row = rows.find(
      (r) =>
        String(r.name).toLowerCase() === options.accountName &&
        String(r.type).toLowerCase() === "microsoft.storage/storageaccounts",
    );
    if (!row)
      return {
        status: "unobserved",
        reason: `storage account ${options.accountName} is not visible in the configured subscription`,
      };
    // ARM omits allowSharedKeyAccess when it was never set, and then shared keys are allowed.
    const flag = (v: unknown, absent: boolean) => (typeof v === "boolean" ? v : absent);
    return {
      status: "observed",
      scope: `storage account ${options.accountName}`,
      fields: {
        allow_shared_key_access: flag(row.allowSharedKeyAccess, true),
        public_network_access:
          typeof row.publicNetworkAccess === "string" && row.publicNetworkAccess ? row.publicNetworkAccess : "Enabled",
        allow_blob_public_access: flag(row.allowBlobPublicAccess, false),
        minimum_tls_version:
          typeof row.minimumTlsVersion === "string" && row.minimumTlsVersion ? row.minimumTlsVersion : null,
      },
    };
  };
}

/** The app's own validated settings (always observable, also on the local stack). */
export function settingsObserver(fields: {
  storage_identity_based: boolean;
  api_token_grace_seconds: number;
}): BaselineObserver {
  return async () => ({ status: "observed", scope: "this app's settings", fields: { ...fields } });
}

/** The storage account's name from an identity-based account URL (`https://<account>.table.core.windows.net`). */
export function storageAccountNameOf(url: string | undefined): string | undefined {
  if (!url || !URL.canParse(url)) return undefined;
  const name = new URL(url).hostname.split(".")[0] ?? "";
  return /^[a-z0-9]{3,24}$/.test(name) ? name : undefined;
}
