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
import { ActionNotSupportedError, type ActionExecutor } from "../shared/ops/actions/action-executor.js";
import { createKillSwitch } from "../shared/ops/kill-switch.js";
import { createOpsLoop } from "../shared/ops/ops-loop.js";
import { createAttemptLog, recordingVerifier, type RouteRole } from "../shared/ops/snapshots/attempt-log.js";
import { createSnapshotProducer } from "../shared/ops/snapshots/snapshot-producer.js";
import { createSnapshotStore } from "../shared/ops/snapshots/snapshot-store.js";
import { type ControlPlaneStateReader, type ProposedAction, verifyAction } from "../shared/ops/verifier/verifier.js";
import { appContext } from "./app-context.js";
import { dashboardJobs, databaseState } from "./dashboard-deps.js";
import { actionTypes, configurationBaseline, consoleConfig, ruleCatalog } from "./console-deps.js";
import { deploymentSnapshotSources } from "./console-snapshots.js";

export interface ConsoleParts {
  registry: ToolRegistry;
  coordinator: Coordinator;
  approvals: ReturnType<typeof createApprovalService>;
  notifier: ReturnType<typeof createOutboxNotifier>;
  approvalActivities: ReturnType<typeof createApprovalActivities>;
  opsLoop: ReturnType<typeof createOpsLoop>;
  /** Records the detection readiness, T2 recovery and configuration baseline snapshots the console's tools read. */
  snapshots: ReturnType<typeof createSnapshotProducer>;
}

/** The control plane's current state as the verifier reads it; what has no provider here is unobserved. */
function stateReader(killSwitch: ReturnType<typeof createKillSwitch>): ControlPlaneStateReader {
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
    // No cluster or node-pool provider is wired into the console yet: unobserved, so the verifier abstains.
    clusterReachable: async () => undefined,
    nodePoolBounds: async () => undefined,
    killSwitchOn: () => killSwitch.isOn(),
  };
}

/** Builds the console's parts over the app's context. */
export function buildConsoleParts(): ConsoleParts {
  // The app's storage as configured (Azurite locally, the managed identity in Azure): not the
  // legacy connection string, which throws with identity-based storage.
  const source = appContext.config.storage;
  const killSwitch = createKillSwitch(source);
  const reader = stateReader(killSwitch);
  const verify = (action: ProposedAction) => verifyAction(action, actionTypes, reader);
  // Every route to the verifier records its attempts (sanitized) for query_t2_recovery.
  const attemptLog = createAttemptLog(source);
  const verifyAs = (route_role: RouteRole) => recordingVerifier(verify, attemptLog, { route_role, catalog: actionTypes, onRecordError: (error) => appContext.logger.warn("a proposer attempt was not recorded", { route_role, error: error instanceof Error ? error.name : "unknown" }) });
  const snapshotStore = createSnapshotStore(source);
  const executor: ActionExecutor = {
    async execute(action, context) {
      // The kill switch is the one action type this deployment carries out from the console so far.
      if (action.action_type === "kill_switch") {
        await killSwitch.set(action.params.on === true, context.actor.oid, new Date());
        return { kill_switch: action.params.on === true };
      }
      throw new ActionNotSupportedError(action.action_type);
    },
  };
  const notifier = createOutboxNotifier(source);
  const approvalStore = createApprovalStore(source);
  const approvals = createApprovalService({
    store: approvalStore,
    audit: appContext.audit,
    notifier,
    verify: verifyAs("approval"),
    executor,
    killSwitch,
    approvers: consoleConfig.approvers,
    ttlSeconds: consoleConfig.approvalTtlSeconds,
    reminderOffsetsSeconds: consoleConfig.reminderOffsetsSeconds,
  });
  const databasesDir = appContext.config.databasesDir;
  async function listDatabases() {
    if (!databasesDir) return [];
    const entries = await createFileDatabaseCatalog(databasesDir).list();
    return Promise.all(
      entries.map(async (e) => {
        const state = await databaseState().get(e.manifest.name);
        return { name: e.manifest.name, version: e.manifest.version, warm_state: state.warm_state, update_available: state.update_available };
      }),
    );
  }
  const registry = createConsoleToolRegistry(
    {
      events: appContext.events,
      audit: appContext.audit,
      rules: ruleCatalog,
      actions: actionTypes,
      // A tool's own verifier call (run_runbook, simulate_change) is recorded under the runbook route.
      verify: verifyAs("runbook"),
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
        detectionReadiness: snapshotStore.reader("detection_readiness", { maxAgeMs: consoleConfig.snapshots.maxAgeMs }),
        t2Recovery: snapshotStore.reader("t2_recovery", { maxAgeMs: consoleConfig.snapshots.maxAgeMs }),
        configurationBaseline: snapshotStore.reader("configuration_baseline", { maxAgeMs: consoleConfig.snapshots.maxAgeMs }),
        ...(consoleConfig.logAnalyticsWorkspaceId ? { logs: createLogAnalyticsProvider({ workspaceId: consoleConfig.logAnalyticsWorkspaceId, credential: lazyDefaultCredential() }) } : {}),
        // With a subscription configured the inventory is Resource Graph's; otherwise (the local
        // stack) it is the control plane's own resources.
        inventory: consoleConfig.subscriptionId
          ? createResourceGraphInventoryProvider({ subscriptionId: consoleConfig.subscriptionId, credential: lazyDefaultCredential() })
          : createLocalInventoryProvider({
          location: "local",
          databases: listDatabases,
          async jobs() {
            const { jobs } = await dashboardJobs().list({ page: 1, pageSize: 200 });
            return jobs.map((j) => ({ job_id: j.job_id, status: j.status, db: j.db, title: j.title }));
          },
        }),
      },
    },
    { serverTimeZone: consoleConfig.serverTimeZone },
  );
  const coordinator = createCoordinator({ registry, audit: appContext.audit, approvals, verify: verifyAs("coordinator") });
  const approvalActivities = createApprovalActivities({ approvals, store: approvalStore, loadPolicy: consoleConfig.loadPolicy });
  const opsLoop = createOpsLoop({ events: appContext.events, audit: appContext.audit, rules: ruleCatalog, actions: actionTypes, verify: verifyAs("ops_loop"), claims: source, incidentWindowMs: consoleConfig.incidentWindowMs });
  const snapshots = createSnapshotProducer({
    store: snapshotStore,
    producer: "ops_loop",
    sources: deploymentSnapshotSources({
      settings: consoleConfig.snapshots,
      storage: source,
      identityTableUrl: appContext.config.storage.kind === "identity" ? appContext.config.storage.tableUrl : undefined,
      subscriptionId: consoleConfig.subscriptionId,
      apiTokenGraceSeconds: appContext.config.apiTokenGraceSeconds,
      readVaultSecret: appContext.config.keyVaultUrl ? () => appContext.apiTokens.state({ fresh: true }) : undefined,
      baseline: configurationBaseline,
      jobApiUrl: appContext.config.jobApiUrl,
      databases: listDatabases,
      attempts: attemptLog,
    }),
  });
  return { registry, coordinator, approvals, notifier, approvalActivities, opsLoop, snapshots };
}
