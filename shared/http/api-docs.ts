import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { NotFoundError } from "../errors.js";
import type { HttpResult } from "./envelope.js";

/**
 * The Swagger UI page both APIs serve beside their OpenAPI document (`/docs` on the job API,
 * `/api/docs` on the dashboard API), from the bundled `swagger-ui-dist` (no CDN).
 */

/** The Swagger UI files served, and their types; nothing else reaches the file system. */
const DOC_ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css",
  "swagger-ui-bundle.js": "application/javascript",
  "swagger-ui-standalone-preset.js": "application/javascript",
  "favicon-32x32.png": "image/png",
};

/**
 * The schema UI's policy: its scripts and styles are files of this origin (the start script is
 * `<base>/init.js`, not inline), so neither needs 'unsafe-inline' (Swagger UI sets styles through
 * the DOM, which style-src does not govern; checked in Chromium: no violation, the UI renders);
 * nobody may frame it (clickjacking of "Try it out").
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

export interface ApiDocsOptions {
  title: string;
  /** Where the page is served (`/docs`); its assets are under `<base>/<file>`. */
  base: string;
  /** Where the OpenAPI document is served (`/openapi.json`). */
  openapiUrl: string;
}

/** The page and its assets as transport-neutral results. */
export function apiDocs(o: ApiDocsOptions): { page: () => HttpResult; asset: (name: string) => Promise<HttpResult> } {
  // Resolved on the first asset request, not at import: the app starts (and serves its API) even
  // where the UI's package is missing; the deployment package ships it (scripts/package.mjs).
  let swaggerDir: string | undefined;
  const swaggerFile = (name: string) => {
    swaggerDir ??= path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
    return path.join(swaggerDir, name);
  };
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>${o.title}</title><link rel="stylesheet" href="${o.base}/swagger-ui.css"></head><body><div id="swagger-ui"></div><script src="${o.base}/swagger-ui-bundle.js"></script><script src="${o.base}/init.js"></script></body></html>`;
  return {
    page: () => ({
      status: 200,
      headers: {
        "Content-Type": "text/html; charset=utf-8",
        "Content-Security-Policy": DOCS_CSP,
      },
      body: html,
    }),
    async asset(name): Promise<HttpResult> {
      if (name === "init.js") {
        return {
          status: 200,
          headers: { "Content-Type": "application/javascript" },
          body: `window.ui = SwaggerUIBundle({ url: ${JSON.stringify(o.openapiUrl)}, dom_id: "#swagger-ui" });`,
        };
      }
      const type = Object.hasOwn(DOC_ASSETS, name) ? DOC_ASSETS[name] : undefined;
      if (!type) throw new NotFoundError("not found");
      return {
        status: 200,
        headers: { "Content-Type": type, "Cache-Control": "public, max-age=3600" },
        body: await readFile(swaggerFile(name)),
      };
    },
  };
}
