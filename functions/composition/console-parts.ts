/**
 * The operator console's parts (tools, coordinator, approvals, the operations loop), built on the
 * first console request. This module is its own chunk of the Functions bundle: `console-deps.ts`
 * imports it on first use, so a cold start does not load or evaluate it (README, cold start).
 */

import { createApprovalActivities } from "../../shared/console/approvals/approval-activities.js";
import { createApprovalService } from "../../shared/console/approvals/approval-service.js";
import { createApprovalStore } from "../../shared/console/approvals/approval-store.js";
import { createKillSwitchAnnouncer } from "../../shared/console/approvals/kill-switch-announcer.js";
import type { ConsoleConfig } from "../../shared/console/console-config.js";
import { loadBreakGlassConfig } from "../../shared/console/break-glass/break-glass.js";
import { createCoordinator } from "../../shared/console/coordinator/coordinator.js";
import { buildNotifier, createSecretResolver } from "../../shared/notify/build-notifier.js";
import { createDigestSources } from "../../shared/notify/digests/digest-sources.js";
import { buildNarrator } from "../../shared/console/narrators/build-narrator.js";
import { createIncidentNotices } from "../../shared/notify/emitters/incident-notices.js";
import { createArmDeploymentsProvider } from "../../shared/console/providers/azure-deployments.js";
import { createLogAnalyticsProvider } from "../../shared/console/providers/azure-log-analytics.js";
import { createBrowserEvidenceProvider } from "../../shared/console/providers/browser-evidence.js";
import { createGitDeploymentsProvider } from "../../shared/console/providers/git-deployments.js";
import { createArmSubscriptionProvider } from "../../shared/console/providers/azure-subscription.js";
import { createAzureMetricsProvider } from "../../shared/console/providers/azure-metrics.js";
import { createAzureHealthMetrics } from "../../shared/console/providers/azure-health-metrics.js";
import { createAzureResourceHealthProvider } from "../../shared/console/providers/azure-resource-health.js";
import { createSubscriptionHealth } from "../../shared/console/providers/subscription-health.js";
import type { ConsoleProviders } from "../../shared/console/providers/providers.js";
import { createResourceGraphInventoryProvider } from "../../shared/console/providers/azure-resource-graph.js";
import { createLocalInventoryProvider } from "../../shared/console/providers/local-inventory.js";
import { createConsoleToolRegistry } from "../../shared/console/tools/index.js";
import { createUsageLedger } from "../../shared/console/usage/usage-ledger.js";
import { createRecurrentQueryWatch } from "../../shared/console/recurrent-query.js";
import type { DatabaseService } from "../../shared/databases/database-service.js";
import { createEvidenceStore, EVIDENCE_CONTAINER } from "../../shared/ops/evidence-store.js";
import { createActionExecutors } from "./action-executors.js";
import { channelConfig } from "./channel-settings.js";
import { createActionOutcomeStore } from "../../shared/ops/actions/action-outcomes.js";
import { createJobApiDeployment, type JobApiDeployment } from "../../shared/ops/actions/job-api-deployment-actions.js";
import { type AksAgentPools, createAksAgentPools } from "../../shared/ops/actions/node-pool-actions.js";
import { createKillSwitch } from "../../shared/ops/kill-switch.js";
import { createOpsLoop } from "../../shared/ops/ops-loop.js";
import { createAttemptLog, recordingVerifier, type RouteRole } from "../../shared/ops/snapshots/attempt-log.js";
import { createSnapshotProducer } from "../../shared/ops/snapshots/snapshot-producer.js";
import { createSnapshotStore } from "../../shared/ops/snapshots/snapshot-store.js";
import { type ControlPlaneStateReader, type ProposedAction, verifyAction } from "../../shared/ops/verifier/verifier.js";
import { openBlobContainer } from "../../shared/storage/blob-container.js";
import { appContext } from "./app-context.js";
import {
  apiTokenSettings,
  dashboardJobs,
  dashboardJobService,
  databaseCatalog,
  databaseService,
  databaseState,
} from "./dashboard-deps.js";
import type { ConsoleParts, ConsoleSettings } from "./console-parts-types.js";
import { deploymentSnapshotSources } from "./console-snapshots.js";
import { currentInvocationDurable, invocationDurable } from "./invocation-durable.js";

/** What the cluster actions act on, when configured: the job API Deployment (Kubernetes) and the node pools (Resource Manager). */
interface ClusterTargets {
  deployment: JobApiDeployment | undefined;
  agentPools: AksAgentPools | undefined;
}

function clusterTargets(consoleConfig: ConsoleConfig): ClusterTargets {
  const { actions, subscriptionId } = consoleConfig;
  return {
    deployment: actions.jobApiDeployment ? createJobApiDeployment(actions.jobApiDeployment) : undefined,
    agentPools:
      actions.aks && subscriptionId
        ? createAksAgentPools({ subscriptionId, ...actions.aks, credential: appContext.credential })
        : undefined,
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
function stateReader(
  consoleConfig: ConsoleConfig,
  databases: Pick<DatabaseService, "get">,
  killSwitch: ReturnType<typeof createKillSwitch>,
  targets: ClusterTargets,
): ControlPlaneStateReader {
  return {
    jobStatus: async (id) => (await dashboardJobs().get(id))?.status ?? null,
    async database(name) {
      const database = await databases.get(name);
      return database ? { update_available: database.update_available } : null;
    },
    apiTokenConfigured: async () => (await appContext.apiTokens.state()) !== undefined,
    clusterReachable: () => clusterReachable(targets),
    nodePoolBounds: async (pool) => consoleConfig.actions.nodePoolBounds[pool],
    killSwitchOn: () => killSwitch.isOn(),
  };
}

/**
 * The subscription's providers when one is configured: its scope, Resource Graph inventory,
 * Resource Health and, with the metrics endpoint, the representative metrics, which together
 * answer `query_subscription_health`.
 */
function subscriptionProviders(
  subscriptionId: string,
  { config: consoleConfig, healthMetricSet }: ConsoleSettings,
): Pick<ConsoleProviders, "subscription" | "resourceHealth" | "inventory"> {
  const credential = appContext.credential;
  const resourceGroups = consoleConfig.healthResourceGroups;
  const inventory = createResourceGraphInventoryProvider({ subscriptionId, credential });
  const resourceHealth = createAzureResourceHealthProvider({ subscriptionId, resourceGroups, credential });
  const metrics = consoleConfig.metrics
    ? {
        reader: createAzureHealthMetrics({
          subscriptionId,
          resourceGroups,
          endpoint: consoleConfig.metrics.endpoint,
          credential,
          set: healthMetricSet,
        }),
        set: healthMetricSet,
      }
    : undefined;
  const health = createSubscriptionHealth({
    inventory,
    resourceHealth,
    ...(metrics ? { metrics } : {}),
    resourceGroups,
  });
  return {
    subscription: createArmSubscriptionProvider({ subscriptionId, credential, health }),
    resourceHealth,
    inventory,
  };
}

/** Builds the console's parts from its settings over the app's context. */
export function buildConsoleParts(settings: ConsoleSettings): ConsoleParts {
  const {
    config: consoleConfig,
    actionTypes,
    ruleCatalog,
    configurationBaseline,
    browserEvidencePolicies,
    actionModeOf,
    notifyConfig,
  } = settings;
  // The app's storage as configured (Azurite locally, the managed identity in Azure): not the
  // legacy connection string, which throws with identity-based storage.
  const source = appContext.config.storage;
  const notifier = buildNotifier(notifyConfig, {
    tables: source,
    audit: appContext.audit,
    secrets: appContext.secrets,
    env: process.env,
    credential: appContext.credential,
    // The kill switch holds A1 delivery at the router too (spec §8), whoever sends.
    a1Held: async () => (await killSwitch.status()).on,
    log: (message, fields) => appContext.logger.warn(message, fields),
    // Teams SSO configured: A1 cards carry the decision form (docs/channels-teams.md).
    ...(channelConfig.platformA?.inbound.ssoConnectionName ? { teamsSsoDecisions: true } : {}),
    // The scheduled digests read the product's own stores (spec §6 item 6).
    digestSources: createDigestSources({
      tables: source,
      audit: appContext.audit,
      events: appContext.events,
      rules: ruleCatalog,
      incidentWindowMs: consoleConfig.incidentWindowMs,
      modeOf: actionModeOf,
    }),
    digestDirectRecipients: consoleConfig.breakGlass.owners,
  });
  const approvalStore = createApprovalStore(source);
  // A flip is announced (A2) to everyone who operates the console: the approvers and the break-glass Owners.
  const operators = [...new Set([...consoleConfig.approvers, ...consoleConfig.breakGlass.owners])];
  const killSwitch = createKillSwitch(source, {
    onChange: createKillSwitchAnnouncer({
      store: approvalStore,
      notifier,
      audit: appContext.audit,
      recipients: operators,
    }),
    onChangeError: (error, change) =>
      appContext.logger.error("the kill switch flipped but its announcement failed", {
        on: change.on,
        error: error instanceof Error ? error.name : "unknown",
      }),
  });
  const targets = clusterTargets(consoleConfig);
  // The databases as the dashboard's routes and the executors see them: the table catalog (DATABASES_DIR is
  // only where the local stack keeps its files; Azure has none), with each one's warm-up and update state.
  const databases = databaseService({ durable: () => currentInvocationDurable, logger: appContext.logger });
  const listDatabases = () => databases.list();
  const reader = stateReader(consoleConfig, databases, killSwitch, targets);
  const verify = (action: ProposedAction) => verifyAction(action, actionTypes, reader);
  // Every route to the verifier records its attempts (sanitized) for query_t2_recovery.
  const attemptLog = createAttemptLog(source);
  const verifyAs = (route_role: RouteRole) =>
    recordingVerifier(verify, attemptLog, {
      route_role,
      catalog: actionTypes,
      onRecordError: (error) =>
        appContext.logger.warn("a proposer attempt was not recorded", {
          route_role,
          error: error instanceof Error ? error.name : "unknown",
        }),
    });
  const snapshotStore = createSnapshotStore(source);
  // The services the executors call are the dashboard routes' own, over the current invocation's durable client.
  const scope = { durable: invocationDurable, logger: appContext.logger };
  const executor = createActionExecutors({
    outcomes: createActionOutcomeStore(source),
    audit: appContext.audit,
    mode: actionModeOf,
    killSwitch,
    jobs: { jobs: dashboardJobs(), service: () => dashboardJobService(scope) },
    databases: {
      catalog: { get: (name) => databaseCatalog().get(name) },
      states: databaseState(),
      orchestrations: invocationDurable,
      service: () => databaseService(scope),
    },
    tokens: { tokens: appContext.apiTokens, settings: () => apiTokenSettings(scope) },
    jobApiDeployment: targets.deployment,
    agentPools: targets.agentPools,
    nodePoolBounds: consoleConfig.actions.nodePoolBounds,
  });
  const approvals = createApprovalService({
    store: approvalStore,
    audit: appContext.audit,
    notifier,
    verify: verifyAs("approval"),
    executor,
    killSwitch,
    actionTypes,
    approvers: consoleConfig.approvers,
    ttlSeconds: consoleConfig.approvalTtlSeconds,
    reauthMaxAgeSeconds: consoleConfig.approvalReauthMaxAgeSeconds,
    reminderOffsetsSeconds: consoleConfig.reminderOffsetsSeconds,
    loadPolicy: consoleConfig.loadPolicy,
  });
  // Browser artifacts and large tool evidence: content-addressed, write-once blobs.
  const evidence = createEvidenceStore(() => openBlobContainer(appContext.config.storage, EVIDENCE_CONTAINER));
  const usage = createUsageLedger(source);
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
      usage,
      executor,
      notifier,
      breakGlass: loadBreakGlassConfig({
        owners: [...consoleConfig.breakGlass.owners],
        max_ttl_seconds: consoleConfig.breakGlass.max_ttl_seconds,
      }),
      incidentWindowMs: consoleConfig.incidentWindowMs,
      evidence,
      providers: {
        ...(consoleConfig.metrics
          ? { metrics: createAzureMetricsProvider({ ...consoleConfig.metrics, credential: appContext.credential }) }
          : {}),
        detectionReadiness: snapshotStore.reader("detection_readiness", { maxAgeMs: consoleConfig.snapshots.maxAgeMs }),
        t2Recovery: snapshotStore.reader("t2_recovery", { maxAgeMs: consoleConfig.snapshots.maxAgeMs }),
        configurationBaseline: snapshotStore.reader("configuration_baseline", {
          maxAgeMs: consoleConfig.snapshots.maxAgeMs,
        }),
        ...(consoleConfig.deploymentsGitDir
          ? { gitDeployments: createGitDeploymentsProvider({ repositoryDir: consoleConfig.deploymentsGitDir }) }
          : {}),
        ...(consoleConfig.subscriptionId && consoleConfig.deploymentsResourceGroup
          ? {
              cloudDeployments: createArmDeploymentsProvider({
                subscriptionId: consoleConfig.subscriptionId,
                resourceGroup: consoleConfig.deploymentsResourceGroup,
                credential: appContext.credential,
              }),
            }
          : {}),
        ...(consoleConfig.browserEvidenceChromium
          ? {
              browserEvidence: createBrowserEvidenceProvider({
                policies: browserEvidencePolicies,
                store: evidence,
                executablePath: consoleConfig.browserEvidenceChromium,
              }),
            }
          : {}),
        ...(consoleConfig.logAnalyticsWorkspaceId
          ? {
              logs: createLogAnalyticsProvider({
                workspaceId: consoleConfig.logAnalyticsWorkspaceId,
                credential: appContext.credential,
              }),
            }
          : {}),
        // With a subscription configured the inventory is Resource Graph's (below); otherwise (the
        // local stack) it is the control plane's own resources.
        inventory: createLocalInventoryProvider({
          location: "local",
          databases: listDatabases,
          async jobs() {
            const { jobs } = await dashboardJobs().list({ page: 1, pageSize: 200 });
            return jobs.map((j) => ({ job_id: j.job_id, status: j.status, db: j.db, title: j.title }));
          },
        }),
        ...(consoleConfig.subscriptionId ? subscriptionProviders(consoleConfig.subscriptionId, settings) : {}),
      },
    },
    { serverTimeZone: consoleConfig.serverTimeZone },
  );
  const recurrent = createRecurrentQueryWatch({
    tables: source,
    events: appContext.events,
    logger: appContext.logger,
    ...consoleConfig.recurrentQuery,
  });
  const coordinator = createCoordinator({
    registry,
    audit: appContext.audit,
    approvals,
    verify: verifyAs("coordinator"),
    recurrent,
    evidence,
    narrator: buildNarrator(appContext.config.narrator, {
      credential: appContext.credential,
      usage,
      resolveSecret: createSecretResolver({
        secrets: appContext.secrets,
        env: process.env,
        local: appContext.config.storage.kind === "connection-string",
      }),
      onUsageError: (error) =>
        appContext.logger.warn("narrator usage was not recorded", {
          error: error instanceof Error ? error.name : "unknown",
        }),
    }),
    actionTypes: actionTypes.action_types.map((a) => a.id),
  });
  const approvalActivities = createApprovalActivities({
    approvals,
    store: approvalStore,
    loadPolicy: consoleConfig.loadPolicy,
  });
  const opsLoop = createOpsLoop({
    events: appContext.events,
    audit: appContext.audit,
    rules: ruleCatalog,
    actions: actionTypes,
    verify: verifyAs("ops_loop"),
    claims: source,
    incidentWindowMs: consoleConfig.incidentWindowMs,
    // The incident-open email and the severity_changed A2 notice, deduplicated by their fixed audit ids.
    onIncidents: createIncidentNotices({
      notifier,
      ...(notifyConfig.matrix.routes.incident_open ? { incidentOpenRoute: "incident_open" } : {}),
    }),
    onIncidentsError: (error) =>
      appContext.logger.warn("incident notices were not all sent", {
        error: error instanceof Error ? error.name : "unknown",
      }),
  });
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
      credential: appContext.credential,
    }),
  });
  return {
    registry,
    coordinator,
    approvals,
    approvalStore,
    killSwitch,
    notifier,
    approvalActivities,
    opsLoop,
    snapshots,
  };
}
