import { z } from "zod";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { boundedText, defineTool, type Tool, ToolError } from "./tool.js";

/** search_tools and describe_tool: descriptors only, filtered by the caller's role from its token. */
export function discoveryTools(deps: ConsoleToolDependencies): Tool[] {
  return [
    defineTool({
      descriptor: {
        name: "search_tools",
        description: "Searches the descriptors of the tools your role may use.",
        argument_hint: "search_tools [query=<text>]",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments"],
      },
      roleScopedResult: true,
      args: z.strictObject({ query: boundedText(200).optional() }),
      async run({ query }, context) {
        const tools = deps.registry().search(context.role, query);
        return { data: { role: context.role, tools }, evidence_ref: `registry:${context.role}` };
      },
    }),
    defineTool({
      descriptor: {
        name: "describe_tool",
        description: "Describes one tool your role may use.",
        argument_hint: "describe_tool name=<tool>",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "not_found"],
      },
      roleScopedResult: true,
      args: z.strictObject({ name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/) }),
      async run({ name }, context) {
        const descriptor = deps.registry().describe(context.role, name);
        // A tool above the role and a tool that does not exist look the same: discovery reveals nothing more.
        if (!descriptor) throw new ToolError("not_found", `no tool ${name} for the ${context.role} role`);
        return { data: descriptor, evidence_ref: `registry:${context.role}:${name}` };
      },
    }),
  ];
}
