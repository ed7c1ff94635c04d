import type { AssignmentResult } from "./role-assignments.js";
import type { ClusterTarget } from "./cluster-provisioning.js";

/** What a cluster operation does. */
export const CLUSTER_ACTIONS = ["provision", "scale", "stop", "start", "delete"] as const;
export type ClusterAction = (typeof CLUSTER_ACTIONS)[number];

/** The steps of a cluster operation, in order; each reports its own progress. */
export type ClusterStep = "cluster" | "blast_pool" | "role_assignments" | "stop" | "start" | "delete";

/** The steps each action runs. */
export function stepsOf(action: ClusterAction): ClusterStep[] {
  switch (action) {
    case "provision":
      return ["cluster", "blast_pool", "role_assignments"];
    case "scale":
      return ["blast_pool"];
    default:
      return [action];
  }
}

/** The orchestration's input: the action, the cluster, and who else gets runtime roles. */
export interface ClusterOperationInput {
  action: ClusterAction;
  target: ClusterTarget;
  /** For the role-assignment step: the workspace's registry, storage account and vault, the workload identity and the caller. */
  roles?: {
    registry?: string;
    storage_account?: string;
    vault?: string;
    workload_principal_id?: string;
    user_object_id?: string;
  };
}

/** One step's progress, as the operation reports it. */
export interface StepProgress {
  name: ClusterStep;
  state: "pending" | "running" | "succeeded" | "failed";
  /** Why the step failed (ARM's code and message). */
  error?: string;
  /** The role-assignment step: each assignment, with the command for a missing one. */
  assignments?: AssignmentResult[];
}
