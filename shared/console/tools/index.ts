import { actionTools } from "./action-tools.js";
import { approvalTools } from "./approval-tools.js";
import { coreTools } from "./core-tools.js";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { discoveryTools } from "./discovery-tools.js";
import { inventoryTool } from "./inventory-tool.js";
import { ledgerTools } from "./ledger-tools.js";
import { providerTools } from "./provider-tools.js";
import { createToolRegistry, type ToolRegistry } from "./registry.js";

/**
 * Every console tool of spec §2.2 (enqueue_hil is coordinator-internal and not among them), in a
 * registry whose discovery tools search the registry itself.
 */
export function createConsoleToolRegistry(
  deps: Omit<ConsoleToolDependencies, "registry">,
  options: { serverTimeZone?: string } = {},
): ToolRegistry {
  let registry: ToolRegistry | undefined;
  const full: ConsoleToolDependencies = {
    ...deps,
    registry: () => {
      if (!registry) throw new Error("the tool registry is not built yet");
      return registry;
    },
  };
  registry = createToolRegistry([
    ...coreTools(full),
    ...ledgerTools(full),
    inventoryTool(full, options),
    ...providerTools(full),
    ...approvalTools(full),
    ...actionTools(full),
    ...discoveryTools(full),
  ]);
  return registry;
}
