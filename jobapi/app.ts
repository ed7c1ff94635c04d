import type { DatabaseCatalog } from "../shared/databases/database-catalog.js";
import { isLoopbackBind } from "../shared/http/loopback-host.js";
import type { Logger } from "../shared/logging/logger.js";
import type { ApiTokenService } from "../shared/secrets/api-tokens.js";
import type { JobApiConfig } from "./config.js";
import { createJobApiTransport, type JobApiApp, type JobApiRoute } from "./http.js";
import type { ArtifactStore } from "./jobs/artifact-store.js";
import type { JobService } from "./jobs/job-service.js";
import type { JobStore } from "./jobs/job-store.js";
import { buildOpenApiDocument } from "./openapi.js";
import { createDocsRoutes } from "./routes/docs-routes.js";
import { createFacadeRoutes } from "./routes/facade-routes.js";
import { createJobRoutes } from "./routes/job-routes.js";
import { ResultPages } from "./jobs/result-pages.js";
import { createOpsRoutes } from "./routes/ops-routes.js";
import { createResultPageRoutes } from "./routes/result-page-routes.js";
import { createTerminalRoutes } from "./routes/terminal-routes.js";
import { createWarmupRoutes } from "./routes/warmup-routes.js";
import type { KubernetesWarmup } from "./executors/kubernetes-warmup.js";

export interface JobApiDeps {
  config: JobApiConfig;
  service: JobService;
  jobs: JobStore;
  artifacts: ArtifactStore;
  catalog: DatabaseCatalog;
  tokens: ApiTokenService;
  logger: Logger;
  blastVersion: () => Promise<string>;
  executorName: string;
  activeJobs: () => number;
  dispatchRole: () => "active" | "standby";
  /** Node cache warm-up on the cluster (the Kubernetes executor only). */
  warmup?: KubernetesWarmup;
}

/** Every route of the job API (spec §4.2): ops, jobs, facade, then the docs that describe them. */
export function createJobApiRoutes(d: JobApiDeps): JobApiRoute[] {
  const bodyLimitBytes = d.config.bodyLimitBytes;
  const routes = [
    ...createOpsRoutes(d),
    ...createJobRoutes({ service: d.service, artifacts: d.artifacts, bodyLimitBytes }),
    ...createResultPageRoutes({ service: d.service, pages: new ResultPages(d.artifacts) }),
    ...createFacadeRoutes({ service: d.service, artifacts: d.artifacts, bodyLimitBytes }),
    ...createWarmupRoutes(d.warmup),
    ...createTerminalRoutes(),
  ];
  const openapi = JSON.stringify(buildOpenApiDocument(routes));
  return [...routes, ...createDocsRoutes({ openapi: () => openapi })];
}

/** The job API application: its routes on the Hono transport, with the token check and one error mapper. */
export function createJobApiApp(d: JobApiDeps): JobApiApp {
  return createJobApiTransport({
    routes: createJobApiRoutes(d),
    logger: d.logger,
    authorize: (token) => d.tokens.isValid(token),
    bodyLimitBytes: d.config.bodyLimitBytes,
    loopbackHostOnly: isLoopbackBind(d.config.host),
  });
}
