import type { ArmProvider, LocalArm } from "../server.js";
import { containerServiceProvider } from "./container-service.js";
import { resourcesProvider } from "./resources.js";

/** Every resource provider module of the local Resource Manager (one module per provider namespace). */
export const LOCAL_ARM_PROVIDERS: ((arm: LocalArm) => ArmProvider)[] = [resourcesProvider, containerServiceProvider()];
