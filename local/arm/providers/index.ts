import type { ArmProvider, LocalArm } from "../server.js";
import { authorizationProvider } from "./authorization.js";
import { type BuiltImage, containerRegistryProvider } from "./container-registry.js";
import { type ClusterBackend, containerServiceProvider } from "./container-service.js";
import { keyVaultProvider } from "./key-vault.js";
import { resourcesProvider } from "./resources.js";
import { storageProvider } from "./storage.js";

/**
 * Every resource provider module of the local Resource Manager (one module per provider
 * namespace); `backend` realises managed clusters on a local Kubernetes API, `onImageBuilt`
 * hears of each image a registry run pushed.
 */
export function localArmProviders(
  options: { backend?: ClusterBackend; onImageBuilt?: (image: BuiltImage) => void } = {},
): ((arm: LocalArm) => ArmProvider)[] {
  return [
    resourcesProvider,
    containerServiceProvider(options.backend ? { backend: options.backend } : {}),
    storageProvider,
    containerRegistryProvider(options.onImageBuilt ? { onImageBuilt: options.onImageBuilt } : {}),
    keyVaultProvider,
    authorizationProvider,
  ];
}

/** The providers without a cluster backend (clusters are resources only). */
export const LOCAL_ARM_PROVIDERS: ((arm: LocalArm) => ArmProvider)[] = localArmProviders();
