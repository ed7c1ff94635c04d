import { actingCaller, targetId } from "../ops/actions/acting-caller.js";
import { ActionStateChangedError } from "../ops/actions/action-executor.js";
import { actionHandler } from "../ops/actions/action-runner.js";
import type { ProposedAction } from "../ops/verifier/verifier.js";
import { newOperationId } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import type { DatabaseCatalog } from "./catalog-types.js";
import type { DatabaseService } from "./database-service.js";
import type { DatabaseStateStore } from "./database-state.js";

/** What the database executors are built from. */
export interface DatabaseActionDependencies {
  catalog: Pick<DatabaseCatalog, "get">;
  states: Pick<DatabaseStateStore, "get">;
  /** The durable client and database service of the current invocation. */
  orchestrations: () => Pick<OrchestrationClient, "getInstance">;
  service: () => Pick<DatabaseService, "warmUp" | "prepare">;
}

/** The operation a database action starts; its id is fixed in the plan so a resumed execution finds it. */
export interface DatabaseOperationPlan {
  database: string;
  operation_id: string;
}

async function requirePrepared(deps: DatabaseActionDependencies, action: ProposedAction): Promise<string> {
  const name = targetId(action.target);
  if (!(await deps.catalog.get(name)))
    throw new ActionStateChangedError(
      action.action_type,
      action.target,
      { exists: false },
      "the database no longer exists",
    );
  return name;
}

/** Starts the operation unless this plan's instance exists already (started before a crash). */
async function startOnce(deps: DatabaseActionDependencies, plan: DatabaseOperationPlan, start: () => Promise<unknown>) {
  const started = await deps.orchestrations().getInstance(plan.operation_id);
  if (!started) await start();
  return {
    database: plan.database,
    operation_id: plan.operation_id,
    operation_status_url: `/api/operations/${plan.operation_id}`,
  };
}

/** rewarm_database: the dashboard's warm-up operation (the `warmDatabase` orchestration) for one database. */
export function createRewarmDatabaseHandler(deps: DatabaseActionDependencies) {
  return actionHandler<DatabaseOperationPlan>({
    async plan(action) {
      return { database: await requirePrepared(deps, action), operation_id: newOperationId() };
    },
    apply: (plan, _action, context) =>
      startOnce(deps, plan, () =>
        deps.service().warmUp(actingCaller(context.actor, "Contributor"), plan.database, {
          requestId: context.requestId,
          operationId: plan.operation_id,
        }),
      ),
  });
}

/** prepare_database_update: the dashboard's prepare operation (the `prepareDatabase` orchestration) for the newest release. */
export function createPrepareDatabaseUpdateHandler(deps: DatabaseActionDependencies) {
  return actionHandler<DatabaseOperationPlan>({
    async plan(action) {
      const database = await requirePrepared(deps, action);
      const state = await deps.states.get(database);
      if (!state.update_available)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { update_available: false, latest_release: state.latest_release },
          "no update is available any more",
        );
      return { database, operation_id: newOperationId() };
    },
    apply: (plan, _action, context) =>
      startOnce(deps, plan, () =>
        deps.service().prepare(actingCaller(context.actor, "Owner"), plan.database, {
          requestId: context.requestId,
          operationId: plan.operation_id,
        }),
      ),
  });
}
