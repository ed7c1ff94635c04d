import { z } from "zod";
import type { ProposedAction } from "../ops/verifier/verifier.js";

/** A runbook: code over one action type, turning validated parameters into the exact proposed action. */
export interface Runbook {
  name: string;
  description: string;
  params: z.ZodType<Record<string, unknown>>;
  action(params: Record<string, unknown>): ProposedAction;
}

const jobId = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/);
const databaseName = z.string().regex(/^[A-Za-z0-9._-]{1,100}$/);

function runbook<S extends z.ZodObject>(
  name: string,
  description: string,
  params: S,
  action: (p: z.output<S>) => ProposedAction,
): Runbook {
  return {
    name,
    description,
    params: params as unknown as z.ZodType<Record<string, unknown>>,
    action: (p) => action(p as z.output<S>),
  };
}

/** The shipped runbooks, one per action type. */
export const RUNBOOKS: readonly Runbook[] = [
  runbook("retry_failed_job", "Retries one failed BLAST job.", z.strictObject({ job_id: jobId }), (p) => ({
    action_type: "retry_job",
    target: `blast_job/${p.job_id}`,
    params: {},
  })),
  runbook("cancel_job", "Cancels one queued or running BLAST job.", z.strictObject({ job_id: jobId }), (p) => ({
    action_type: "cancel_job",
    target: `blast_job/${p.job_id}`,
    params: {},
  })),
  runbook(
    "rewarm_database",
    "Warms one database's files into the node cache again.",
    z.strictObject({ database: databaseName }),
    (p) => ({ action_type: "rewarm_database", target: `blast_database/${p.database}`, params: {} }),
  ),
  runbook(
    "prepare_database_update",
    "Prepares the newest release of one database.",
    z.strictObject({ database: databaseName }),
    (p) => ({ action_type: "prepare_database_update", target: `blast_database/${p.database}`, params: {} }),
  ),
  runbook("rotate_api_token", "Rotates the job API token with its grace period.", z.strictObject({}), () => ({
    action_type: "rotate_api_token",
    target: "api_token/current",
    params: {},
  })),
  runbook("redeploy_job_api", "Rolls the job API deployment.", z.strictObject({}), () => ({
    action_type: "redeploy_job_api",
    target: "job_api/default",
    params: {},
  })),
  runbook(
    "scale_node_pool",
    "Sets the node count of one node pool.",
    z.strictObject({
      pool: z.string().regex(/^[a-z][a-z0-9]{0,11}$/),
      node_count: z.coerce.number().int().min(0).max(100),
    }),
    (p) => ({ action_type: "scale_node_pool", target: `node_pool/${p.pool}`, params: { node_count: p.node_count } }),
  ),
  runbook(
    "kill_switch",
    "Turns the global kill switch on or off.",
    z.strictObject({ on: z.union([z.boolean(), z.enum(["true", "false"]).transform((v) => v === "true")]) }),
    (p) => ({ action_type: "kill_switch", target: "control_plane", params: { on: p.on } }),
  ),
];
