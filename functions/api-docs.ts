import { buildDashboardOpenApi } from "../shared/dashboard/openapi.js";
import { apiDocs } from "../shared/http/api-docs.js";
import { registeredRoutes, route } from "./composition/http-route.js";

/**
 * The dashboard API's description: `GET /api/openapi.json` (built once, on first request, from the
 * routes registered before it) and the Swagger UI at `/api/docs`. Public, like the job API's.
 */
let document: string | undefined;
const docs = apiDocs({ title: "blastplane dashboard API", base: "/api/docs", openapiUrl: "/api/openapi.json" });

route("dashboardOpenApi", { methods: ["GET"], route: "openapi.json" }, async () => {
  document ??= JSON.stringify(buildDashboardOpenApi(registeredRoutes()));
  return { status: 200, headers: { "Content-Type": "application/json" }, body: document };
});

route("dashboardDocs", { methods: ["GET"], route: "docs" }, async () => docs.page());

route("dashboardDocsAsset", { methods: ["GET"], route: "docs/{asset}" }, async (request) =>
  docs.asset(request.params.asset ?? ""),
);
