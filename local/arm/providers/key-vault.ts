import type { ArmProvider, LocalArm } from "../server.js";
import { readRoutes, seedResource } from "./simple-routes.js";

/** Microsoft.KeyVault: vaults (read; discovery lists them through the generic resource list). */
export function keyVaultProvider(arm: LocalArm): ArmProvider {
  return { namespace: "Microsoft.KeyVault", routes: readRoutes(arm.store, "Microsoft.KeyVault", "vaults") };
}

/** Adds a vault (RBAC authorization). */
export function seedVault(
  arm: LocalArm,
  at: { subscriptionId: string; resourceGroup: string; location: string },
  name: string,
) {
  return seedResource(arm.store, at, "Microsoft.KeyVault", "vaults", name, {
    vaultUri: `https://${name}.vault.azure.net/`,
    enableRbacAuthorization: true,
  });
}
