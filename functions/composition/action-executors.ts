import type { AuditLog } from "../../shared/ops/audit.js";
import type { KillSwitch } from "../../shared/ops/kill-switch.js";
import { createKillSwitchHandler } from "../../shared/ops/actions/kill-switch-action.js";
import type { ActionExecutor } from "../../shared/ops/actions/action-executor.js";
import type { ActionOutcomeStore } from "../../shared/ops/actions/action-outcomes.js";
import { type ActionMode, createActionExecutor } from "../../shared/ops/actions/action-runner.js";
import {
  createPrepareDatabaseUpdateHandler,
  createRewarmDatabaseHandler,
  type DatabaseActionDependencies,
} from "../../shared/databases/database-actions.js";
import {
  createCancelJobHandler,
  createRetryJobHandler,
  type JobActionDependencies,
} from "../../shared/dashboard/job-actions.js";
import {
  createRedeployJobApiHandler,
  type JobApiDeployment,
} from "../../shared/ops/actions/job-api-deployment-actions.js";
import {
  type AksAgentPools,
  createScaleNodePoolHandler,
  type NodePoolBounds,
} from "../../shared/ops/actions/node-pool-actions.js";
import { createRotateApiTokenHandler, type TokenActionDependencies } from "../../shared/secrets/token-actions.js";

/** Everything the executors of all action types are built from. */
export interface ActionExecutorsDependencies {
  outcomes: ActionOutcomeStore;
  audit: Pick<AuditLog, "record">;
  mode: (actionType: string) => ActionMode;
  killSwitch: Pick<KillSwitch, "set">;
  jobs: JobActionDependencies;
  databases: DatabaseActionDependencies;
  tokens: TokenActionDependencies;
  /** Undefined without a cluster: redeploy_job_api answers not configured. */
  jobApiDeployment: JobApiDeployment | undefined;
  /** Undefined without a Resource Manager scope: scale_node_pool answers not configured. */
  agentPools: AksAgentPools | undefined;
  nodePoolBounds: NodePoolBounds;
  now?: () => Date;
}

/** The executor of every action type of `config/action-types.json`. */
export function createActionExecutors(deps: ActionExecutorsDependencies): ActionExecutor {
  return createActionExecutor({
    outcomes: deps.outcomes,
    audit: deps.audit,
    mode: deps.mode,
    now: deps.now,
    handlers: {
      retry_job: createRetryJobHandler(deps.jobs),
      cancel_job: createCancelJobHandler(deps.jobs),
      rewarm_database: createRewarmDatabaseHandler(deps.databases),
      prepare_database_update: createPrepareDatabaseUpdateHandler(deps.databases),
      rotate_api_token: createRotateApiTokenHandler(deps.tokens),
      redeploy_job_api: createRedeployJobApiHandler({ deployment: deps.jobApiDeployment, now: deps.now }),
      scale_node_pool: createScaleNodePoolHandler({ pools: deps.agentPools, bounds: deps.nodePoolBounds }),
      kill_switch: createKillSwitchHandler(deps.killSwitch, deps.now),
    },
  });
}
