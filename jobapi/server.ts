import http from "node:http";
import os from "node:os";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { blastVersion } from "../shared/blast/blast-tools.js";
import { ApiTokenService } from "../shared/secrets/api-tokens.js";
import { selectSecretStore } from "../shared/secrets/key-vault-secret-store.js";
import { ArtifactStore } from "./jobs/artifact-store.js";
import { checkJobConsistency } from "./jobs/consistency-check.js";
import { createFileDatabaseCatalog } from "../shared/databases/database-catalog.js";
import { createTableDatabaseCatalog, openDatabaseStorage } from "../shared/databases/table-catalog.js";
import { DispatchLease } from "./jobs/dispatch-lease.js";
import { JobDispatcher } from "./jobs/dispatcher.js";
import { JobStore } from "./jobs/job-store.js";
import { JobService } from "./jobs/job-service.js";
import { createLogger } from "../shared/logging/logger.js";
import { CLUSTER_COMPONENT, createHealthTransitions } from "../shared/ops/emitters/health-transitions.js";
import { createSaturationWatch } from "../shared/ops/emitters/saturation-watch.js";
import { reportMissingRoles } from "../shared/ops/emitters/signal-events.js";
import { createEventLog } from "../shared/ops/events.js";
import { createJobApiApp } from "./app.js";
import { apiAudience, createJwtValidator } from "../shared/auth/jwt-validator.js";
import { createAuditLog } from "../shared/ops/audit.js";
import { createTerminalTicketStore } from "../shared/terminal/terminal-tickets.js";
import { createTerminalGateway, TERMINAL_PATH } from "./terminal/terminal-gateway.js";
import { TERMINAL_DAEMON_HOST } from "./terminal/terminal-protocol.js";
import { loadJobApiConfig } from "./config.js";
import { KubeConfig } from "@kubernetes/client-node";
import { createKubernetesExecutor } from "./executors/kubernetes-executor.js";
import { createLocalExecutor } from "./executors/local-executor.js";
import { blobUrlOf } from "../shared/storage/storage-connection.js";
import { createKubernetesWarmup } from "./executors/kubernetes-warmup.js";

/**
 * The job API process: `/v1/*` and `/api/v1/facade/*`. Runs as a container on the cluster, and as a
 * child of `npm start` locally. SIGTERM stops it cleanly; unfinished jobs resume on the next start.
 */
async function main(): Promise<void> {
  const config = loadJobApiConfig(process.env);
  const logger = createLogger({ level: config.logLevel, base: { service: "jobapi" } });
  const jobs = JobStore.fromConnectionString(config.storage);
  const artifacts = ArtifactStore.fromConnectionString(config.storage);
  const lease = DispatchLease.fromConnectionString(config.storage, {
    leaseDurationMs: config.dispatchLeaseSeconds * 1000,
    fleet: config.dispatchFleet,
    logger,
  });
  await Promise.all([jobs.init(), artifacts.init(), lease.init()]);
  const secrets = await selectSecretStore({ keyVaultUrl: config.keyVaultUrl, secretsDir: config.secretsDir });
  if (!secrets) throw new Error("no secret store is configured");
  const tokens = new ApiTokenService(secrets);
  await tokens.ensure();
  // The catalog the Functions app reads too; databases only in the folder layout are published once.
  // The local executor searches this machine's copy, filled from storage when missing.
  const catalog = createTableDatabaseCatalog({
    ...openDatabaseStorage(config.storage),
    cacheRoot: config.databasesDir,
    fillCache: config.executor === "local",
    holdLocally: true,
    importFrom: createFileDatabaseCatalog(config.databasesDir),
  });
  // KUBECONFIG when set (the local cluster), else the pod's service account.
  const kubeConfig = config.executor === "kubernetes" ? loadKubeConfig() : undefined;
  // Before any job is dispatched or served: nothing may reference what storage lost in a crash.
  await checkJobConsistency({ jobs, artifacts, catalog, logger });
  const events = createEventLog(config.storage);
  // An Azure refusal for want of a role (a shard's storage, the cluster) is a `role_assignment.missing` event.
  const reportRefusal = reportMissingRoles(events, logger, "jobapi.dispatcher");
  // The cluster's API server failing the executor's watches is one `cluster.unhealthy` event per turn.
  const clusterHealth = createHealthTransitions({
    tables: config.storage,
    events,
    logger,
    source: "jobapi.kubernetes",
  });
  const executor = kubeConfig
    ? createKubernetesExecutor({
        kubeConfig,
        artifacts,
        logger,
        settings: {
          ...config.kubernetes,
          nodeSelector: { ...config.kubernetes.nodeSelector },
          tolerations: [...config.kubernetes.tolerations],
          dbCacheHostPath: config.kubernetes.dbCacheDir,
          workloadIdentity:
            config.storage.kind === "identity"
              ? { serviceAccountName: config.kubernetes.serviceAccountName, blobUrl: blobUrlOf(config.storage) }
              : undefined,
        },
        maxJobs: config.kubernetes.maxJobs,
        maxJobsPerSearch: config.kubernetes.maxJobsPerSearch,
        scheduleTimeoutSeconds: config.kubernetes.scheduleTimeoutSeconds,
        storage: config.storage,
        onClusterHealth: (seen) => void clusterHealth.observe(CLUSTER_COMPONENT, seen),
      })
    : createLocalExecutor({ concurrency: config.shardConcurrency });
  const dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor,
    logger,
    workDir: config.workDir,
    maxActiveJobs: config.maxActiveJobs,
    nodeMemoryBytes: config.nodeMemoryBytes,
    memoryMarginBytes: config.memoryMarginBytes,
    threadsPerShard: config.threadsPerShard,
    shardSlots: config.shardConcurrency,
    shardAttempts: config.shardAttempts,
    lease,
    fleet: config.dispatchFleet,
    onRoleRefusal: (failure) => void reportRefusal(failure),
  });
  // 429 streaks become `queue.saturated` events in the events table the Functions app's operations loop reads.
  const admission = createSaturationWatch({
    events,
    logger,
    threshold: config.saturation.streak,
    windowMs: config.saturation.windowSeconds * 1000,
    instance: os.hostname(),
    retryAfterSeconds: config.retryAfterSeconds,
  });
  const service = new JobService({
    jobs,
    artifacts,
    catalog,
    dispatcher,
    logger,
    blastVersion,
    maxQueuedJobs: config.maxQueuedJobs,
    retryAfterSeconds: config.retryAfterSeconds,
    admission,
  });
  const warmup = kubeConfig
    ? createKubernetesWarmup({
        kubeConfig,
        catalog,
        logger,
        storage: config.storage,
        serviceAccountName: config.kubernetes.serviceAccountName,
        settings: {
          ...config.kubernetes,
          nodeSelector: { ...config.kubernetes.nodeSelector },
          tolerations: [...config.kubernetes.tolerations],
          dbCacheHostPath: config.kubernetes.dbCacheDir,
        },
      })
    : undefined;
  const app = createJobApiApp({
    warmup,
    config,
    service,
    jobs,
    artifacts,
    catalog,
    tokens,
    logger,
    blastVersion,
    executorName: executor.name,
    activeJobs: () => dispatcher.activeCount,
    dispatchRole: () => dispatcher.role,
  });
  const server = http.createServer(getRequestListener(app.fetch));
  server.requestTimeout = 0;
  const terminal = createTerminalGateway({
    validator: config.terminal.auth
      ? createJwtValidator({
          discoveryUrl: config.terminal.auth.discoveryUrl,
          audience: apiAudience(config.terminal.auth.clientId),
        })
      : undefined,
    tickets: createTerminalTicketStore(config.storage),
    audit: createAuditLog(config.storage),
    logger: logger.child({ component: "terminal" }),
    allowedOrigins: config.terminal.allowedOrigins,
    daemonUrl: `ws://${TERMINAL_DAEMON_HOST}:${config.terminal.daemonPort}`,
    limits: {
      idleTimeoutMs: config.terminal.idleTimeoutSeconds * 1000,
      maxSessionMs: config.terminal.maxSessionSeconds * 1000,
      maxSessionsPerUser: config.terminal.maxSessionsPerUser,
      maxMessageBytes: config.terminal.maxMessageBytes,
      bufferBytes: config.terminal.bufferBytes,
    },
  });
  server.on("upgrade", (request, socket, head) => {
    if (new URL(request.url ?? "/", "http://placeholder").pathname === TERMINAL_PATH) {
      terminal.handleUpgrade(request, socket, head);
    } else {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  await dispatcher.start();
  const port = (server.address() as AddressInfo).port;
  logger.info("job API ready", { url: `http://${config.host}:${port}`, executor: executor.name });

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    logger.info("job API stopping");
    server.close();
    server.closeIdleConnections();
    await terminal.close();
    await dispatcher.stop();
    await admission.settled();
    process.exit(0);
  };
  // A background failure is logged, never fatal: jobs are reconciled from storage.
  process.on("unhandledRejection", (error) => logger.error("unhandled rejection", { error }));
  process.once("SIGTERM", () => void stop());
  process.once("SIGINT", () => void stop());
}

function loadKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

main().catch((error: unknown) => {
  process.stderr.write(`job API failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
