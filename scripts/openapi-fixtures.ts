// Builds both APIs' descriptions from their route definitions, as the tests that hold the committed
// copies (test/fixtures/*-openapi.json) build them. Bundled and run by scripts/docs-openapi.mjs.
import { buildOpenApiDocument } from "../jobapi/openapi.js";
import { createJobApiRoutes, type JobApiDeps } from "../jobapi/app.js";

export async function buildDescriptions(jobApiBodyLimitBytes: number) {
  Object.assign(process.env, {
    AzureWebJobsStorage: "UseDevelopmentStorage=true",
    AUTH_TENANT_ID: "00000000-0000-4000-8000-000000000000",
    AUTH_CLIENT_ID: "00000000-0000-4000-8000-000000000001",
    TASKHUB_NAME: "blastplane",
  });
  // @azure/functions outside a worker warns for each registration; the registry still records them.
  const warn = console.warn;
  console.warn = () => undefined;
  await import("../functions/index.js");
  console.warn = warn;
  const { registeredRoutes } = await import("../functions/composition/http-route.js");
  const { buildDashboardOpenApi } = await import("../shared/dashboard/openapi.js");
  const jobApiRoutes = createJobApiRoutes({
    config: { bodyLimitBytes: jobApiBodyLimitBytes },
  } as unknown as JobApiDeps);
  return {
    "dashboard-openapi.json": buildDashboardOpenApi(registeredRoutes()),
    "jobapi-openapi.json": buildOpenApiDocument(jobApiRoutes),
  };
}
