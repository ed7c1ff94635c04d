import { apiDocs } from "../../shared/http/api-docs.js";
import type { JobApiRoute } from "../http.js";

/** `/openapi.json` and the schema UI at `/docs`; public. `openapi` is the document's text. */
export function createDocsRoutes(options: { openapi: () => string }): JobApiRoute[] {
  const docs = apiDocs({ title: "blastplane job API", base: "/docs", openapiUrl: "/openapi.json" });
  return [
    {
      method: "GET",
      path: "/openapi.json",
      public: true,
      handler: async () => ({ status: 200, headers: { "Content-Type": "application/json" }, body: options.openapi() }),
    },
    { method: "GET", path: "/docs", public: true, handler: async () => docs.page() },
    {
      method: "GET",
      path: "/docs/{asset}",
      public: true,
      handler: async (req) => docs.asset(req.params.asset ?? ""),
    },
  ];
}
