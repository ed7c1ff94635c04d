import path from "node:path";
import { z } from "zod";
import { ROLES } from "../../auth/roles.js";
import { loadCatalogFile } from "../catalog/json-catalog.js";

/** Side-effect classes of console tools and actions (operator console spec §2.1). */
export const SIDE_EFFECT_CLASSES = ["read", "simulate", "approve", "execute", "breakglass"] as const;
export type SideEffectClass = (typeof SIDE_EFFECT_CLASSES)[number];

/** The checks the verifier knows how to run against current state (see `verifier/verifier.ts`). */
export const PRECONDITIONS = [
  "job_exists",
  "job_failed",
  "job_active",
  "database_exists",
  "database_update_available",
  "api_token_configured",
  "cluster_reachable",
  "node_count_in_bounds",
  "kill_switch_off",
] as const;
export type Precondition = (typeof PRECONDITIONS)[number];

/** Resource types the operations core reasons about; an event's `resource_ref` starts with one. */
export const RESOURCE_TYPES = [
  "blast_job",
  "blast_database",
  "api_token",
  "job_api",
  "cluster",
  "node_pool",
  "admission_queue",
  "role_assignment",
  "control_plane",
] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

const actionTypeSchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9_]*$/),
  title: z.string().min(1).max(200),
  resource_type: z.enum(RESOURCE_TYPES),
  role_floor: z.enum(ROLES),
  side_effect_class: z.enum(SIDE_EFFECT_CLASSES),
  preconditions: z.array(z.enum(PRECONDITIONS)),
  blast_radius: z.enum(["single_resource", "service", "control_plane"]),
  rollback: z.string().min(1).max(500),
  default_mode: z.enum(["shadow", "enforce"]),
  /**
   * True for the types the spec marks "Owner + approval" (operator-console §5 A3 table: kill switch
   * on/off): an approval is filed whoever asks, an Owner included (see `approvals/authority.ts`).
   */
  requires_approval: z.boolean().optional(),
});

/** One action type: what the operations core may propose and, once eligible and approved, carry out. */
export type ActionType = z.output<typeof actionTypeSchema>;

export const actionTypeCatalogSchema = z
  .strictObject({ version: z.literal(1), action_types: z.array(actionTypeSchema).min(1) })
  .superRefine((catalog, ctx) => {
    const seen = new Set<string>();
    catalog.action_types.forEach((a, index) => {
      if (seen.has(a.id))
        ctx.addIssue({
          code: "custom",
          path: ["action_types", index, "id"],
          message: `duplicate action type id ${a.id}`,
        });
      seen.add(a.id);
    });
  });

export type ActionTypeCatalog = z.output<typeof actionTypeCatalogSchema>;

/** Where the shipped catalogs live: `config/` of the app root (the working folder of both hosts). */
export function catalogPath(file: string, dir = path.resolve("config")): string {
  return path.join(dir, file);
}

/** Loads and validates `config/action-types.json`; a bad file throws naming the file and line. */
export function loadActionTypes(file = catalogPath("action-types.json")): ActionTypeCatalog {
  return loadCatalogFile(file, actionTypeCatalogSchema);
}
