import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { build } from "esbuild";
import type { TestProject } from "vitest/node";

const root = path.resolve(import.meta.dirname, "../..");

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the first stack leaves its demo database for the later ones (test/support/local-stack.ts). */
    demoDatabaseTemplate: string;
  }
}

/**
 * Bundles the product and the durable test app once, before any test file runs, and makes the
 * folder that shares one built demo database among the run's stacks.
 */
export default async function setup(project: TestProject): Promise<() => void> {
  execFileSync(process.execPath, [path.join(root, "scripts/build.mjs")], { stdio: "inherit" });
  await build({
    entryPoints: [path.join(root, "test/fixtures/durable-app/index.ts")],
    outfile: path.join(root, "dist/test/durable-app.js"),
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    external: ["@azure/functions-core"],
    banner: { js: 'import { createRequire as __c } from "node:module"; const require = __c(import.meta.url);' },
    logLevel: "warning",
  });
  const template = mkdtempSync(path.join(tmpdir(), "bp-demo-template-"));
  project.provide("demoDatabaseTemplate", template);
  return () => rmSync(template, { recursive: true, force: true });
}
