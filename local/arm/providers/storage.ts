import type { ArmProvider, LocalArm } from "../server.js";
import { readRoutes, seedResource } from "./simple-routes.js";

/** Microsoft.Storage: storage accounts (read; the product lists them for the workspace). */
export function storageProvider(arm: LocalArm): ArmProvider {
  return { namespace: "Microsoft.Storage", routes: readRoutes(arm.store, "Microsoft.Storage", "storageAccounts") };
}

/** Adds a storage account as ARM describes one (private, no shared keys). */
export function seedStorageAccount(
  arm: LocalArm,
  at: { subscriptionId: string; resourceGroup: string; location: string },
  name: string,
) {
  return seedResource(
    arm.store,
    at,
    "Microsoft.Storage",
    "storageAccounts",
    name,
    {
      allowSharedKeyAccess: false,
      publicNetworkAccess: "Disabled",
      primaryEndpoints: {
        blob: `https://${name}.blob.core.windows.net/`,
        table: `https://${name}.table.core.windows.net/`,
      },
    },
    { kind: "StorageV2", sku: { name: "Standard_LRS", tier: "Standard" } },
  );
}
