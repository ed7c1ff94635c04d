import { addProgressFromClaim } from "../../shared/databases/build-steps.js";
import type { OrchestrationInstance } from "../../shared/orchestrations/orchestration-client.js";
/**
 * The composition of the dashboard's services over the app's one context: stores are created on
 * first use; services that need the invocation's durable client are built per request.
 */

import { createDashboardJobService, type DashboardJobService } from "../../shared/dashboard/dashboard-job-service.js";
import { DashboardJobStore } from "../../shared/dashboard/dashboard-jobs.js";
import { createDownloadTicketStore, type DownloadTicketStore } from "../../shared/dashboard/download-tickets.js";
import {
  createDatabaseService,
  type DatabaseService,
  type NodeMemory,
} from "../../shared/databases/database-service.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import { DatabaseNameClaims } from "../../shared/databases/name-claims.js";
import { createDatabaseUploadStore, type DatabaseUploadStore } from "../../shared/databases/upload-store.js";
import { createReadinessCheck } from "../../shared/http/readiness.js";
import { probeJobApiReady } from "../../shared/jobs/job-api-readiness.js";
import { createHealthTransitions, JOB_API_COMPONENT } from "../../shared/ops/emitters/health-transitions.js";
import { failureText } from "../../shared/ops/emitters/signal-events.js";
import { createDiagnosticsService, type DiagnosticsService } from "../../shared/orchestrations/diagnostics-service.js";
import { type ApiTokenSettings, createApiTokenSettings } from "../../shared/secrets/api-token-settings.js";
import { openTableClient } from "../../shared/storage/storage-connection.js";
import {
  createTerminalTicketService,
  type TerminalTicketService,
} from "../../shared/terminal/terminal-ticket-service.js";
import { createTerminalTicketStore, type TerminalTicketStore } from "../../shared/terminal/terminal-tickets.js";
import { appContext } from "./app-context.js";
import { databaseCatalog, type ServiceScope, workspaceService } from "./store-deps.js";

// Re-exported: the triggers and the other compositions take them from here as before.
export { databaseCatalog, type ServiceScope, workspaceService };

let jobs: DashboardJobStore | undefined;

/** The dashboard job store, created on first use from the app's one configuration. */
export function dashboardJobs(): DashboardJobStore {
  jobs ??= DashboardJobStore.fromConnectionString(appContext.config.storage);
  return jobs;
}

let databaseStates: DatabaseStateStore | undefined;

/** Database warm-up and update state, created on first use. */
export function databaseState(): DatabaseStateStore {
  databaseStates ??= new DatabaseStateStore(openTableClient(appContext.config.storage, "databasestate"));
  return databaseStates;
}

let uploads: DatabaseUploadStore | undefined;

/** Uploaded database FASTA files, in the platform storage account; created on first use. */
export function databaseUploads(): DatabaseUploadStore {
  uploads ??= createDatabaseUploadStore(appContext.config.storage);
  return uploads;
}

let claims: DatabaseNameClaims | undefined;

/** Names being added from uploads (insert-only claims in the platform storage account); created on first use. */
export function databaseClaims(): DatabaseNameClaims {
  claims ??= new DatabaseNameClaims(appContext.config.storage);
  return claims;
}

/** Progress of a running operation that lives outside its orchestration: a database build records its steps with its name's claim. */
export function liveOperationProgress(): (
  instance: OrchestrationInstance,
) => Promise<Record<string, unknown> | undefined> {
  return (instance) => addProgressFromClaim(databaseClaims(), instance);
}

let nodeMemoryCache: { at: number; value: Promise<NodeMemory | null> } | undefined;
/** How long the job API's answer about node memory is reused (the Databases page asks on every visit). */
const NODE_MEMORY_CACHE_MS = 60_000;

/** A search node's memory, from the job API (`GET /v1/cluster`), cached for a minute; null without a job API. */
function nodeMemory(): Promise<NodeMemory | null> {
  const now = Date.now();
  if (!nodeMemoryCache || now - nodeMemoryCache.at > NODE_MEMORY_CACHE_MS) {
    const value = appContext.jobApi.nodeMemory().catch(() => null);
    nodeMemoryCache = { at: now, value };
  }
  return nodeMemoryCache.value;
}

/** The dashboard job service for one request. */
export function dashboardJobService(scope: ServiceScope): DashboardJobService {
  return createDashboardJobService({
    jobs: dashboardJobs(),
    orchestrations: scope.durable(),
    jobApi: appContext.jobApi,
    audit: appContext.audit,
    logger: scope.logger,
    pollIntervalSeconds: appContext.config.jobPollIntervalSeconds,
    // The table catalog the routes and executors read: in Azure there is no DATABASES_DIR.
    databases: databaseCatalog(),
    // B-026: a stopped cluster runs no search (imported when a submit asks, not at start).
    clusterPower: async () => (await import("./aks-deps.js")).clusterPower(),
  });
}

/** The database service for one request. */
export function databaseService(scope: ServiceScope): DatabaseService {
  const { config } = appContext;
  return createDatabaseService({
    catalog: databaseCatalog(),
    states: databaseState(),
    orchestrations: scope.durable(),
    audit: appContext.audit,
    logger: scope.logger,
    sourceConfigured: config.databaseSourceUrl !== undefined,
    partitions: config.databasePartitions,
    uploads: databaseUploads(),
    claims: databaseClaims(),
    uploadMaxBytes: config.databaseUploadMaxBytes,
    nodeMemory,
  });
}

/** The task-queue diagnostics for one request. */
export function diagnosticsService(scope: ServiceScope): DiagnosticsService {
  return createDiagnosticsService({
    orchestrations: scope.durable(),
    taskHubName: appContext.config.taskHubName,
    noopLimiter: appContext.noopLimiter,
    logger: scope.logger,
  });
}

let healthTransitions: ReturnType<typeof createHealthTransitions> | undefined;

/** The app's one watch of component health: each turn of the job API to unhealthy is one `jobapi.unhealthy` event. */
function componentHealth(): ReturnType<typeof createHealthTransitions> {
  healthTransitions ??= createHealthTransitions({
    tables: appContext.config.storage,
    events: appContext.events,
    logger: appContext.logger,
    source: "functions.readiness",
  });
  return healthTransitions;
}

/** The readiness check (storage and the durable backend) for one request. */
export function readinessCheck(scope: ServiceScope): ReturnType<typeof createReadinessCheck> {
  const orchestrations = scope.durable();
  const { jobApiUrl } = appContext.config;
  return createReadinessCheck({
    probes: [
      {
        key: "storage",
        label: "storage",
        // A one-table listing: the Table Data Contributor role the managed identity holds allows it,
        // while Get Table Service Properties is an account-level read that role does not grant.
        probe: () => appContext.tableService.listTables().byPage({ maxPageSize: 1 }).next(),
      },
      {
        key: "durable_backend",
        label: "durable backend",
        // A listing proves the task hub answers.
        probe: () => orchestrations.listInstances({ runtimeStatus: [] })[Symbol.asyncIterator]().next(),
      },
      ...(jobApiUrl ? [{ key: "job_api", label: "job API", probe: () => probeJobApiReady(jobApiUrl) }] : []),
    ],
    timeoutMs: appContext.config.healthDependencyTimeoutMs,
    logger: scope.logger,
    onChecked: async (failures) => {
      if (!jobApiUrl) return;
      const failure = failures.job_api;
      await componentHealth().observe(
        JOB_API_COMPONENT,
        failure === undefined ? { healthy: true } : { healthy: false, reason: failureText(failure) },
      );
    },
  });
}

/** The API token panel for one request. */
export function apiTokenSettings(scope: Pick<ServiceScope, "logger">): ApiTokenSettings {
  return createApiTokenSettings({
    tokens: appContext.apiTokens,
    audit: appContext.audit,
    events: appContext.events,
    logger: scope.logger,
    graceSeconds: appContext.config.apiTokenGraceSeconds,
  });
}

let downloadTicketStore: DownloadTicketStore | undefined;

/** Results download tickets (issue 23): in the platform storage, issued and redeemed by the dashboard. */
export function downloadTickets(): DownloadTicketStore {
  downloadTicketStore ??= createDownloadTicketStore(appContext.config.storage);
  return downloadTicketStore;
}

let terminalTickets: TerminalTicketStore | undefined;

/** The terminal ticket service (decision 0020): tickets in the platform storage the job API redeems from. */
export function terminalTicketService(): TerminalTicketService {
  terminalTickets ??= createTerminalTicketStore(appContext.config.storage);
  return createTerminalTicketService({ tickets: terminalTickets, audit: appContext.audit });
}
