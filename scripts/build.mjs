// Bundles the deployables with esbuild: the Functions app (package.json "main") and the local
// stack. Plain JavaScript so it runs before anything is compiled.
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { common, functionsBuildOptions, LAZY_DURABLE_REQUIRES, lazyBuildOptions, root } from "./build-options.mjs";

// Chunk names carry content hashes: drop the previous build's.
rmSync(path.join(root, "dist/functions"), { recursive: true, force: true });
const [functionsBuild] = await Promise.all([
  build(functionsBuildOptions),
  ...LAZY_DURABLE_REQUIRES.map((name) => build(lazyBuildOptions(name))),
  build({
    ...common,
    entryPoints: ["jobapi/server.ts"],
    outfile: "dist/jobapi/server.js",
  }),
  build({
    ...common,
    entryPoints: ["local/cli-db.ts"],
    outfile: "dist/local/cli-db.js",
  }),
  build({
    ...common,
    entryPoints: ["local/start.ts"],
    outfile: "dist/local/start.js",
    // Azurite runs from node_modules as its own process.
    external: ["azurite"],
  }),
]);
// The lazy stand-ins require their module relative to the entry bundle.
const entryInputs = Object.keys(functionsBuild.metafile.outputs["dist/functions/index.js"]?.inputs ?? {});
for (const name of LAZY_DURABLE_REQUIRES) {
  if (!entryInputs.includes(`lazy-require:${name}`)) throw new Error(`the lazy stand-in for ${name} is not in dist/functions/index.js`);
}
mkdirSync(path.join(root, "dist/meta"), { recursive: true });
writeFileSync(path.join(root, "dist/meta/functions.json"), JSON.stringify(functionsBuild.metafile));
mkdirSync(path.join(root, "dist/local"), { recursive: true });
copyFileSync(path.join(root, "local/parent-watchdog.cjs"), path.join(root, "dist/local/parent-watchdog.cjs"));
