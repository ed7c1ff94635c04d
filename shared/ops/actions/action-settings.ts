import { z } from "zod";
import type { ActionMode } from "./action-runner.js";
import type { ActionTypeCatalog } from "./action-types.js";
import type { NodePoolBounds } from "./node-pool-actions.js";

/** `name=value` pairs, comma-separated. */
function pairs<T>(value: z.ZodType<T>, example: string) {
  return z.string().transform((s, ctx) => {
    const out: Record<string, T> = {};
    for (const part of s
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [name, raw] = part.split("=").map((x) => x.trim());
      const parsed = value.safeParse(raw);
      if (!name || !/^[a-z][a-z0-9_]{0,63}$/.test(name) || !parsed.success) {
        ctx.addIssue({ code: "custom", message: `must look like ${example}` });
        return z.NEVER;
      }
      out[name] = parsed.data;
    }
    return out;
  });
}

const bounds = z
  .string()
  .regex(/^\d{1,4}-\d{1,4}$/)
  .transform((s) => {
    const [min, max] = s.split("-").map(Number) as [number, number];
    return { min, max };
  })
  .refine((b) => b.min <= b.max);

/**
 * The action executors' settings, part of the console's (`console-config.ts`). Unset, each action
 * type runs in its catalog mode, and redeploy_job_api and scale_node_pool answer not configured.
 */
export const actionSettingsShape = {
  /** Mode per action type over the catalog's default, e.g. `retry_job=enforce,cancel_job=enforce`. */
  SVC_ACTION_MODES: pairs(z.enum(["shadow", "enforce"]), "retry_job=enforce,scale_node_pool=shadow").default({}),
  /** The AKS cluster scale_node_pool changes (with `SVC_SUBSCRIPTION_ID`): its resource group and name. */
  SVC_AKS_RESOURCE_GROUP: z
    .string()
    .regex(/^[-\w._()]{1,90}$/, "must be a resource group name")
    .optional(),
  SVC_AKS_CLUSTER: z
    .string()
    .regex(/^[a-zA-Z0-9][-_a-zA-Z0-9]{0,62}$/, "must be a cluster name")
    .optional(),
  /** Node-count bounds per pool, e.g. `blast=1-10`; a pool without bounds is not scaled. */
  SVC_NODE_POOL_BOUNDS: pairs(bounds, "blast=1-10").default({}),
  /** A kubeconfig file for the cluster running the job API; redeploy_job_api needs it. */
  SVC_KUBECONFIG: z.string().min(1).optional(),
  SVC_JOB_API_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, "must be a namespace name")
    .default("blastplane"),
  SVC_JOB_API_DEPLOYMENT: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, "must be a Deployment name")
    .default("blastplane-jobapi"),
};

export interface ActionSettings {
  readonly modes: Readonly<Record<string, ActionMode>>;
  readonly aks: { readonly resourceGroup: string; readonly cluster: string } | undefined;
  readonly nodePoolBounds: NodePoolBounds;
  readonly jobApiDeployment:
    | { readonly kubeconfigPath: string; readonly namespace: string; readonly deployment: string }
    | undefined;
}

type Parsed = z.output<z.ZodObject<typeof actionSettingsShape>>;

export function actionSettings(c: Parsed): ActionSettings {
  return {
    modes: c.SVC_ACTION_MODES,
    aks:
      c.SVC_AKS_RESOURCE_GROUP && c.SVC_AKS_CLUSTER
        ? { resourceGroup: c.SVC_AKS_RESOURCE_GROUP, cluster: c.SVC_AKS_CLUSTER }
        : undefined,
    nodePoolBounds: c.SVC_NODE_POOL_BOUNDS,
    jobApiDeployment: c.SVC_KUBECONFIG
      ? { kubeconfigPath: c.SVC_KUBECONFIG, namespace: c.SVC_JOB_API_NAMESPACE, deployment: c.SVC_JOB_API_DEPLOYMENT }
      : undefined,
  };
}

/**
 * Each action type's mode: the catalog's `default_mode` unless `overrides` (`SVC_ACTION_MODES`)
 * names it. An override for an action type the catalog does not declare refuses to load.
 */
export function actionModes(
  catalog: ActionTypeCatalog,
  overrides: Readonly<Record<string, ActionMode>>,
): (actionType: string) => ActionMode {
  const modes = new Map(catalog.action_types.map((a) => [a.id, a.default_mode as ActionMode]));
  for (const [id, mode] of Object.entries(overrides)) {
    if (!modes.has(id)) throw new Error(`SVC_ACTION_MODES: ${id} is not an action type of the catalog`);
    modes.set(id, mode);
  }
  // An action type unknown to the catalog never reaches an executor (the verifier denies it); shadow is the safe answer anyway.
  return (actionType) => modes.get(actionType) ?? "shadow";
}
