import type { ArmProvider, LocalArm } from "../server.js";
import { authorizationProvider } from "./authorization.js";
import { containerRegistryProvider } from "./container-registry.js";
import { containerServiceProvider } from "./container-service.js";
import { keyVaultProvider } from "./key-vault.js";
import { resourcesProvider } from "./resources.js";
import { storageProvider } from "./storage.js";

/** Every resource provider module of the local Resource Manager (one module per provider namespace). */
export const LOCAL_ARM_PROVIDERS: ((arm: LocalArm) => ArmProvider)[] = [
  resourcesProvider,
  containerServiceProvider(),
  storageProvider,
  containerRegistryProvider,
  keyVaultProvider,
  authorizationProvider,
];
