/**
 * The operator console's parts (tools, coordinator, approvals, the operations loop), built on the
 * first console request. This module is its own chunk of the Functions bundle: `console-deps.ts`
 * imports it on first use, so a cold start does not load or evaluate it (README, cold start).
 */

import { createApprovalActivities } from "../shared/console/approvals/approval-activities.js";
import { createApprovalService } from "../shared/console/approvals/approval-service.js";
import { createApprovalStore } from "../shared/console/approvals/approval-store.js";
import { loadBreakGlassConfig } from "../shared/console/break-glass/break-glass.js";
import { type Coordinator, createCoordinator } from "../shared/console/coordinator/coordinator.js";
import { createOutboxNotifier } from "../shared/console/notify/outbox-notifier.js";
import { createLogAnalyticsProvider } from "../shared/console/providers/azure-log-analytics.js";
import { createArmSubscriptionProvider } from "../shared/console/providers/azure-subscription.js";
import { createAzureMetricsProvider } from "../shared/console/providers/azure-metrics.js";
import { lazyDefaultCredential } from "../shared/console/providers/azure-credential.js";
import { createResourceGraphInventoryProvider } from "../shared/console/providers/azure-resource-graph.js";
import { createLocalInventoryProvider } from "../shared/console/providers/local-inventory.js";
import { createConsoleToolRegistry } from "../shared/console/tools/index.js";
import type { ToolRegistry } from "../shared/console/tools/registry.js";
import { createUsageLedger } from "../shared/console/usage/usage-ledger.js";
import { createFileDatabaseCatalog } from "../shared/databases/database-catalog.js";
import { createActionExecutors } from "../shared/ops/actions/action-executors.js";
import { createActionOutcomeStore } from "../shared/ops/actions/action-outcomes.js";
import { createJobApiDeployment, type JobApiDeployment } from "../shared/ops/actions/job-api-deployment-actions.js";
import { type AksAgentPools, createAksAgentPools } from "../shared/ops/actions/node-pool-actions.js";
import { createKillSwitch } from "../shared/ops/kill-switch.js";
import { createOpsLoop } from "../shared/ops/ops-loop.js";
import { type ControlPlaneStateReader, type ProposedAction, verifyAction } from "../shared/ops/verifier/verifier.js";
import { appContext } from "./app-context.js";
import { apiTokenSettings, dashboardJobs, dashboardJobService, databaseCatalog, databaseService, databaseState } from "./dashboard-deps.js";
import { actionModeOf, actionTypes, consoleConfig, ruleCatalog } from "./console-deps.js";
import { invocationDurable } from "./invocation-durable.js";

export interface ConsoleParts {
  registry: ToolRegistry;
  coordinator: Coordinator;
  approvals: ReturnType<typeof createApprovalService>;
  notifier: ReturnType<typeof createOutboxNotifier>;
  approvalActivities: ReturnType<typeof createApprovalActivities>;
  opsLoop: ReturnType<typeof createOpsLoop>;
}

/** What the cluster actions act on, when configured: the job API Deployment (Kubernetes) and the node pools (Resource Manager). */
interface ClusterTargets {
  deployment: JobApiDeployment | undefined;
  agentPools: AksAgentPools | undefined;
}

function clusterTargets(): ClusterTargets {
  const { actions, subscriptionId } = consoleConfig;
  return {
    deployment: actions.jobApiDeployment ? createJobApiDeployment(actions.jobApiDeployment) : undefined,
    agentPools: actions.aks && subscriptionId ? createAksAgentPools({ subscriptionId, ...actions.aks, credential: lazyDefaultCredential() }) : undefined,
  };
}

/** Reachable when every configured way to the cluster answers; unobserved when none is configured. */
async function clusterReachable(targets: ClusterTargets): Promise<boolean | undefined> {
  const probes = [
    ...(targets.deployment ? [targets.deployment.read().then(() => true)] : []),
    ...(targets.agentPools ? [targets.agentPools.reachable()] : []),
  ];
  if (probes.length === 0) return undefined;
  const answers = await Promise.all(probes.map((p) => p.catch(() => false)));
  return answers.every(Boolean);
}

/** The control plane's current state as the verifier reads it; what has no provider here is unobserved. */
function stateReader(killSwitch: ReturnType<typeof createKillSwitch>, targets: ClusterTargets): ControlPlaneStateReader {
  return {
    jobStatus: async (id) => (await dashboardJobs().get(id))?.status ?? null,
    async database(name) {
      const dir = appContext.config.databasesDir;
      if (!dir) return undefined;
      const entry = await createFileDatabaseCatalog(dir).get(name);
      if (!entry) return null;
      return { update_available: (await databaseState().get(name)).update_available };
    },
    apiTokenConfigured: async () => (await appContext.apiTokens.state()) !== undefined,
    clusterReachable: () => clusterReachable(targets),
    nodePoolBounds: async (pool) => consoleConfig.actions.nodePoolBounds[pool],
    killSwitchOn: () => killSwitch.isOn(),
  };
}

/** Builds the console's parts over the app's context. */
export function buildConsoleParts(): ConsoleParts {
  const source = appContext.config.storageConnectionString;
  const killSwitch = createKillSwitch(source);
  const targets = clusterTargets();
  const reader = stateReader(killSwitch, targets);
  const verify = (action: ProposedAction) => verifyAction(action, actionTypes, reader);
  // The services the executors call are the dashboard routes' own, over the current invocation's durable client.
  const scope = { durable: invocationDurable, logger: appContext.logger };
  const executor = createActionExecutors({
    outcomes: createActionOutcomeStore(source),
    audit: appContext.audit,
    mode: actionModeOf,
    killSwitch,
    jobs: { jobs: dashboardJobs(), service: () => dashboardJobService(scope) },
    databases: { catalog: { get: (name) => databaseCatalog().get(name) }, states: databaseState(), orchestrations: invocationDurable, service: () => databaseService(scope) },
    tokens: { tokens: appContext.apiTokens, settings: () => apiTokenSettings(scope) },
    jobApiDeployment: targets.deployment,
    agentPools: targets.agentPools,
    nodePoolBounds: consoleConfig.actions.nodePoolBounds,
  });
  const notifier = createOutboxNotifier(source);
  const approvalStore = createApprovalStore(source);
  const approvals = createApprovalService({
    store: approvalStore,
    audit: appContext.audit,
    notifier,
    verify,
    executor,
    killSwitch,
    approvers: consoleConfig.approvers,
    ttlSeconds: consoleConfig.approvalTtlSeconds,
    reminderOffsetsSeconds: consoleConfig.reminderOffsetsSeconds,
  });
  const databasesDir = appContext.config.databasesDir;
  const registry = createConsoleToolRegistry(
    {
      events: appContext.events,
      audit: appContext.audit,
      rules: ruleCatalog,
      actions: actionTypes,
      verify,
      approvals,
      approvalStore,
      usage: createUsageLedger(source),
      executor,
      notifier,
      breakGlass: loadBreakGlassConfig({ owners: [...consoleConfig.breakGlass.owners], max_ttl_seconds: consoleConfig.breakGlass.max_ttl_seconds }),
      incidentWindowMs: consoleConfig.incidentWindowMs,
      providers: {
        ...(consoleConfig.subscriptionId ? { subscription: createArmSubscriptionProvider({ subscriptionId: consoleConfig.subscriptionId, credential: lazyDefaultCredential() }) } : {}),
        ...(consoleConfig.metrics ? { metrics: createAzureMetricsProvider({ ...consoleConfig.metrics, credential: lazyDefaultCredential() }) } : {}),
        ...(consoleConfig.logAnalyticsWorkspaceId ? { logs: createLogAnalyticsProvider({ workspaceId: consoleConfig.logAnalyticsWorkspaceId, credential: lazyDefaultCredential() }) } : {}),
        // With a subscription configured the inventory is Resource Graph's; otherwise (the local
        // stack) it is the control plane's own resources.
        inventory: consoleConfig.subscriptionId
          ? createResourceGraphInventoryProvider({ subscriptionId: consoleConfig.subscriptionId, credential: lazyDefaultCredential() })
          : createLocalInventoryProvider({
          location: "local",
          async databases() {
            if (!databasesDir) return [];
            const entries = await createFileDatabaseCatalog(databasesDir).list();
            return Promise.all(
              entries.map(async (e) => {
                const state = await databaseState().get(e.manifest.name);
                return { name: e.manifest.name, version: e.manifest.version, warm_state: state.warm_state, update_available: state.update_available };
              }),
            );
          },
          async jobs() {
            const { jobs } = await dashboardJobs().list({ page: 1, pageSize: 200 });
            return jobs.map((j) => ({ job_id: j.job_id, status: j.status, db: j.db, title: j.title }));
          },
        }),
      },
    },
    { serverTimeZone: consoleConfig.serverTimeZone },
  );
  const coordinator = createCoordinator({ registry, audit: appContext.audit, approvals, verify });
  const approvalActivities = createApprovalActivities({ approvals, store: approvalStore, loadPolicy: consoleConfig.loadPolicy });
  const opsLoop = createOpsLoop({ events: appContext.events, audit: appContext.audit, rules: ruleCatalog, actions: actionTypes, verify, claims: source, incidentWindowMs: consoleConfig.incidentWindowMs });
  return { registry, coordinator, approvals, notifier, approvalActivities, opsLoop };
}
