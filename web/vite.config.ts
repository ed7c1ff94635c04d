import path from "node:path";
import { defineConfig } from "vite";

const here = import.meta.dirname;

/**
 * The dashboard web app: Preact with the automatic JSX runtime, bundled by Vite into
 * `dist/web` (served by the local stack at `/`, or by Azure Static Web Apps).
 */
export default defineConfig({
  root: here,
  base: "/",
  publicDir: "public",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: path.resolve(here, "../dist/web"),
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    // scripts/build.mjs reports the first load's gzipped size against its budget.
    reportCompressedSize: false,
    // The timing report fires on a loaded 2-core machine and says nothing about the app.
    rolldownOptions: { checks: { bundlerTimings: false } },
  },
});
