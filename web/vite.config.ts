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
  publicDir: false,
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: path.resolve(here, "../dist/web"),
    emptyOutDir: true,
    target: "es2022",
    sourcemap: true,
    // Results (hit table, graphic) load on the job page only; the first load stays small.
    reportCompressedSize: false,
  },
});
