import type { Role } from "../../auth/roles.js";
import { meetsFloor, type Tool, type ToolDescriptor } from "./tool.js";

/** The installed tools, with discovery filtered by role. */
export interface ToolRegistry {
  /** The tool named `name`, for the coordinator only (discovery never hands out handlers). */
  get(name: string): Tool | undefined;
  /** Every installed tool name (for the canned reply and completion, filtered by the caller). */
  names(): string[];
  /** Descriptors the role may see, optionally matching `query` in name or description. */
  search(role: Role, query?: string): ToolDescriptor[];
  /** One descriptor, or undefined when it does not exist or is above the role. */
  describe(role: Role, name: string): ToolDescriptor | undefined;
}

/** A copy of the descriptor's data, so nothing handed out reaches back into the registry. */
function copyOf(descriptor: ToolDescriptor): ToolDescriptor {
  return JSON.parse(JSON.stringify(descriptor)) as ToolDescriptor;
}

/**
 * Builds the registry. Visibility uses the descriptor's floor: a tool whose floor depends on its
 * arguments (`run_runbook`) is visible from its lowest floor, and the call is checked again.
 */
export function createToolRegistry(tools: readonly Tool[]): ToolRegistry {
  const byName = new Map<string, Tool>();
  for (const tool of tools) {
    if (byName.has(tool.descriptor.name)) throw new Error(`tool ${tool.descriptor.name} is registered twice`);
    byName.set(tool.descriptor.name, tool);
  }
  const visible = (role: Role) => [...byName.values()].filter((t) => meetsFloor(role, t.descriptor.rbac_floor));
  return {
    get: (name) => byName.get(name),
    names: () => [...byName.keys()],
    search(role, query) {
      const q = query?.trim().toLowerCase();
      return visible(role)
        .filter((t) => !q || t.descriptor.name.includes(q) || t.descriptor.description.toLowerCase().includes(q))
        .map((t) => copyOf(t.descriptor));
    },
    describe(role, name) {
      const tool = byName.get(name);
      return tool && meetsFloor(role, tool.descriptor.rbac_floor) ? copyOf(tool.descriptor) : undefined;
    },
  };
}
