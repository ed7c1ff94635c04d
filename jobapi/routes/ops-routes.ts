import os from "node:os";
import { type DatabaseCatalog, databaseSummary } from "../../shared/databases/database-catalog.js";
import { jsonResult } from "../../shared/http/envelope.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { ApiTokenService } from "../../shared/secrets/api-tokens.js";
import type { JobApiConfig } from "../config.js";
import type { JobApiRoute } from "../http.js";
import type { ArtifactStore } from "../jobs/artifact-store.js";
import type { JobStore } from "../jobs/job-store.js";
import { JOB_API_VERSION, jsonContent, refusedBeforeRouting, retryLater, secured, unsecured } from "../openapi.js";
import { createReadinessState } from "./readiness-state.js";

/**
 * How long each readiness check may take before it counts as unavailable. Storage answering a ping
 * in 2–5 s under a burst of submits is busy, not down; beyond 5 s it is treated as unavailable.
 */
const READY_CHECK_TIMEOUT_MS = 5000;
/** How long after its last answer a check that only times out still counts as ok. */
const READY_SLOW_GRACE_MS = 15_000;

export interface OpsRouteOptions {
  config: Pick<
    JobApiConfig,
    | "maxActiveJobs"
    | "maxQueuedJobs"
    | "bodyLimitBytes"
    | "shardConcurrency"
    | "threadsPerShard"
    | "nodeMemoryBytes"
    | "memoryMarginBytes"
  >;
  jobs: Pick<JobStore, "ping">;
  artifacts: Pick<ArtifactStore, "ping">;
  catalog: Pick<DatabaseCatalog, "list">;
  tokens: Pick<ApiTokenService, "state">;
  blastVersion: () => Promise<string>;
  executorName: string;
  /** Jobs this process is running now. */
  activeJobs: () => number;
  /** Whether this process holds the dispatch lease (runs jobs) or stands by (serves the API only). */
  dispatchRole: () => "active" | "standby";
  /** Where failing readiness checks are logged. */
  logger: Logger;
}

/** Liveness, readiness, configuration, capacity and the database list. */
export function createOpsRoutes(o: OpsRouteOptions): JobApiRoute[] {
  /** When each check last answered; a check that is only slow stays ok for a while after that. */
  const lastAnswered = new Map<string, number>();
  const readiness = createReadinessState(async () => {
    const checks: Record<string, string> = {};
    const probe = async (name: string, run: () => Promise<unknown>) => {
      let timedOut = false;
      try {
        await Promise.race([
          run(),
          new Promise((_, reject) =>
            setTimeout(() => {
              timedOut = true;
              reject(new Error(`no answer within ${READY_CHECK_TIMEOUT_MS} ms`));
            }, READY_CHECK_TIMEOUT_MS).unref(),
          ),
        ]);
        lastAnswered.set(name, Date.now());
        checks[name] = "ok";
      } catch (error) {
        // Busy, not down: a dependency that answered moments ago and is slow under a burst (every
        // long poll reads storage) keeps the service ready; one that refuses or errs does not.
        const busy = timedOut && Date.now() - (lastAnswered.get(name) ?? 0) < READY_SLOW_GRACE_MS;
        o.logger.warn(busy ? "readiness check slow" : "readiness check failed", { check: name, error });
        checks[name] = busy ? "ok" : "unavailable";
      }
    };
    await Promise.all([
      probe("storage", () => Promise.all([o.jobs.ping(), o.artifacts.ping()])),
      probe("blast", () => o.blastVersion()),
      probe("api_token", async () => {
        if (!(await o.tokens.state())) throw new Error("no API token configured");
      }),
    ]);
    return checks;
  });
  return [
    {
      method: "GET",
      path: "/v1/health",
      public: true,
      openapi: {
        operationId: "getHealth",
        summary: "Liveness",
        security: unsecured,
        responses: { "200": { description: "alive", content: jsonContent("Health") }, ...refusedBeforeRouting },
      },
      handler: async (_req, { requestId }) => jsonResult(200, { status: "ok", version: JOB_API_VERSION }, requestId),
    },
    {
      method: "GET",
      path: "/v1/ready",
      public: true,
      openapi: {
        operationId: "getReadiness",
        summary: "Readiness (storage, BLAST+, token store)",
        security: unsecured,
        responses: {
          "200": { description: "ready", content: jsonContent("Ready") },
          ...refusedBeforeRouting,
          "503": { ...retryLater("a dependency is unavailable"), content: jsonContent("NotReady") },
        },
      },
      handler: async (_req, { requestId }) => {
        const checks = await readiness.current();
        const failing = Object.entries(checks)
          .filter(([, v]) => v !== "ok")
          .map(([k]) => k);
        if (failing.length > 0) {
          return {
            status: 503,
            headers: { "Content-Type": "application/json", "Retry-After": "5" },
            jsonBody: { detail: `not ready: ${failing.join(", ")} unavailable`, request_id: requestId, checks },
          };
        }
        return jsonResult(200, { status: "ready", checks }, requestId);
      },
    },
    {
      method: "GET",
      path: "/v1/config",
      openapi: {
        operationId: "getServiceConfig",
        summary: "Service configuration and limits",
        security: secured,
        responses: { "200": { description: "configuration", content: jsonContent("ServiceConfig") } },
      },
      handler: async (_req, { requestId }) =>
        jsonResult(
          200,
          {
            version: JOB_API_VERSION,
            blast_version: await o.blastVersion(),
            executor: o.executorName,
            programs: ["blastn", "blastp", "blastx", "tblastn", "tblastx"],
            execution_profiles: ["standard", "sharded"],
            limits: {
              max_active_jobs: o.config.maxActiveJobs,
              max_queued_jobs: o.config.maxQueuedJobs,
              request_body_bytes: o.config.bodyLimitBytes,
              shard_concurrency: o.config.shardConcurrency,
              threads_per_shard: o.config.threadsPerShard,
            },
          },
          requestId,
        ),
    },
    {
      method: "GET",
      path: "/v1/cluster",
      openapi: {
        operationId: "getCluster",
        summary: "Execution capacity",
        security: secured,
        responses: { "200": { description: "cluster status", content: jsonContent("Cluster") } },
      },
      handler: async (_req, { requestId }) =>
        jsonResult(
          200,
          {
            executor: o.executorName,
            status: "running",
            nodes: [
              {
                name: os.hostname(),
                cpus: os.availableParallelism(),
                memory_bytes: o.config.nodeMemoryBytes,
                // What one search may cache: the memory pre-flight's own figure.
                usable_memory_bytes: Math.max(0, o.config.nodeMemoryBytes - o.config.memoryMarginBytes),
              },
            ],
            active_jobs: o.activeJobs(),
            max_active_jobs: o.config.maxActiveJobs,
            dispatch: o.dispatchRole(),
          },
          requestId,
        ),
    },
    {
      method: "GET",
      path: "/v1/databases",
      openapi: {
        operationId: "listDatabases",
        summary: "Prepared databases",
        security: secured,
        responses: { "200": { description: "databases", content: jsonContent("DatabaseList") } },
      },
      handler: async (_req, { requestId }) => {
        const entries = await o.catalog.list();
        return jsonResult(
          200,
          { databases: entries.map((e) => ({ ...databaseSummary(e), location: e.location })) },
          requestId,
        );
      },
    },
  ];
}
