import { z } from "zod";
import { DISCOVERY_KINDS } from "./discovery.js";

const meta = z.object({ request_id: z.string() });

/** `GET /api/workspace/choices/{kind}`. */
export const discoveryPageSchema = z.object({
  kind: z.enum(DISCOVERY_KINDS),
  items: z.array(
    z.object({
      name: z.string(),
      id: z.string(),
      resource_group: z.string().optional(),
      location: z.string().optional(),
      detail: z.string().optional(),
    }),
  ),
  truncated: z.boolean(),
  meta,
});

/** One runtime role assignment and its state (spec §5). */
export const assignmentResultSchema = z.object({
  principal_kind: z.enum(["kubelet", "workload", "user"]),
  principal_id: z.string(),
  principal_type: z.enum(["ServicePrincipal", "User"]),
  role: z.string(),
  scope: z.string(),
  name: z.string(),
  state: z.enum(["assigned", "exists", "missing"]),
  command: z.string().optional(),
});

/** `POST /api/aks/role-assignments/check`. */
export const roleAssignmentCheckSchema = z.object({ assignments: z.array(assignmentResultSchema), meta });

/** `POST /api/aks/pools/blast/scale`. */
export const scaleRequestSchema = z.strictObject({ node_count: z.number().int().min(0).max(100) });
