import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { NotFoundError } from "../../shared/errors.js";
import type { HttpResult } from "../../shared/http/envelope.js";
import type { JobApiRoute } from "../http.js";

/** The Swagger UI files served under /docs, from the bundled `swagger-ui-dist` (no CDN). */
const DOC_ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css",
  "swagger-ui-bundle.js": "application/javascript",
  "swagger-ui-standalone-preset.js": "application/javascript",
  "favicon-32x32.png": "image/png",
};

const DOCS_PAGE =
  '<!doctype html><html><head><meta charset="utf-8"><title>blastplane job API</title><link rel="stylesheet" href="/docs/swagger-ui.css"></head><body><div id="swagger-ui"></div><script src="/docs/swagger-ui-bundle.js"></script><script src="/docs/init.js"></script></body></html>';

/**
 * The schema UI's policy: its scripts and styles are files of this origin (the start script is
 * `/docs/init.js`, not inline), so neither needs 'unsafe-inline' (Swagger UI sets styles through
 * the DOM, which style-src does not govern); nobody may frame it (clickjacking of "Try it out").
 */
const DOCS_CSP = [
  "default-src 'self'",
  "img-src 'self' data:",
  "style-src 'self'",
  "script-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** `/openapi.json` and the schema UI at `/docs`; public. `openapi` is the document's text. */
export function createDocsRoutes(options: { openapi: () => string }): JobApiRoute[] {
  const swaggerDir = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  return [
    {
      method: "GET",
      path: "/openapi.json",
      public: true,
      handler: async () => ({ status: 200, headers: { "Content-Type": "application/json" }, body: options.openapi() }),
    },
    {
      method: "GET",
      path: "/docs",
      public: true,
      handler: async () => ({
        status: 200,
        headers: {
          "Content-Type": "text/html; charset=utf-8",
          "Content-Security-Policy": DOCS_CSP,
        },
        body: DOCS_PAGE,
      }),
    },
    {
      method: "GET",
      path: "/docs/{asset}",
      public: true,
      handler: async (req): Promise<HttpResult> => {
        const asset = req.params.asset ?? "";
        if (asset === "init.js") {
          return {
            status: 200,
            headers: { "Content-Type": "application/javascript" },
            body: 'window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui" });',
          };
        }
        // Only the listed files: the name never reaches the file system otherwise.
        const type = Object.hasOwn(DOC_ASSETS, asset) ? DOC_ASSETS[asset] : undefined;
        if (!type) throw new NotFoundError("not found");
        return {
          status: 200,
          headers: { "Content-Type": type, "Cache-Control": "public, max-age=3600" },
          body: await readFile(path.join(swaggerDir, asset)),
        };
      },
    },
  ];
}
