import type { ArmProvider, LocalArm } from "../server.js";
import { readRoutes, seedResource } from "./simple-routes.js";

/**
 * Microsoft.ContainerRegistry: registries (read). Registry tasks, runs and build-source upload
 * belong here too (the image build adds them).
 */
export function containerRegistryProvider(arm: LocalArm): ArmProvider {
  return {
    namespace: "Microsoft.ContainerRegistry",
    routes: readRoutes(arm.store, "Microsoft.ContainerRegistry", "registries"),
  };
}

/** Adds a registry (Standard, admin user off). */
export function seedRegistry(
  arm: LocalArm,
  at: { subscriptionId: string; resourceGroup: string; location: string },
  name: string,
) {
  return seedResource(
    arm.store,
    at,
    "Microsoft.ContainerRegistry",
    "registries",
    name,
    { loginServer: `${name.toLowerCase()}.azurecr.io`, adminUserEnabled: false },
    { sku: { name: "Standard", tier: "Standard" } },
  );
}
