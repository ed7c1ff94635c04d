import { execFileSync } from "node:child_process";
import path from "node:path";
import { build } from "esbuild";

const root = path.resolve(import.meta.dirname, "../..");

/** Bundles the product and the durable test app once, before any test file runs. */
export default async function setup(): Promise<void> {
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
}
