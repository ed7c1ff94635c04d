// Bundles the deployables with esbuild: the Functions app (package.json "main") and the local
// stack; and the dashboard web app with Vite (dist/web). Plain JavaScript so it runs before
// anything is compiled.
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { parseDocument } from "yaml";
import { build as buildWeb } from "vite";
import { common, functionsBuildOptions, LAZY_DURABLE_REQUIRES, lazyBuildOptions, root } from "./build-options.mjs";

// Vite builds whatever NODE_ENV says; vitest sets "test", and the tests must drive the build users get.
process.env.NODE_ENV = "production";

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
    // The shard worker: the command of every shard's pod on the cluster (same image as the server).
    entryPoints: ["jobapi/shard.ts"],
    outfile: "dist/jobapi/shard.js",
  }),
  build({
    ...common,
    // The warm-up worker: one pod per node fills that node's database cache.
    entryPoints: ["jobapi/warm.ts"],
    outfile: "dist/jobapi/warm.js",
  }),
  build({
    ...common,
    // The terminal daemon: its own container of the job-API pod (decision 0020); node-pty is native.
    entryPoints: ["jobapi/terminal-daemon.ts"],
    outfile: "dist/jobapi/terminal-daemon.js",
    external: ["node-pty"],
  }),
  build({
    ...common,
    entryPoints: ["local/cli-db.ts"],
    outfile: "dist/local/cli-db.js",
  }),
  build({
    ...common,
    entryPoints: ["local/cli-notify.ts"],
    outfile: "dist/local/cli-notify.js",
  }),
  build({
    ...common,
    entryPoints: ["local/start.ts"],
    outfile: "dist/local/start.js",
    // Azurite runs from node_modules as its own process.
    external: ["azurite"],
  }),
  buildWeb({ configFile: path.join(root, "web/vite.config.ts"), mode: "production" }),
]);
// The lazy stand-ins require their module relative to the entry bundle.
const entryInputs = Object.keys(functionsBuild.metafile.outputs["dist/functions/index.js"]?.inputs ?? {});
for (const name of LAZY_DURABLE_REQUIRES) {
  if (!entryInputs.includes(`lazy-require:${name}`))
    throw new Error(`the lazy stand-in for ${name} is not in dist/functions/index.js`);
}
mkdirSync(path.join(root, "dist/meta"), { recursive: true });
writeFileSync(path.join(root, "dist/meta/functions.json"), JSON.stringify(functionsBuild.metafile));
// The catalogs and the approval-load policy ship inside the Functions package (SVC_CATALOG_DIR still overrides them).
mkdirSync(path.join(root, "dist/functions/config"), { recursive: true });
for (const file of readdirSync(path.join(root, "config")).filter(
  (name) => name.endsWith(".json") || name.endsWith(".yaml"),
)) {
  copyFileSync(path.join(root, "config", file), path.join(root, "dist/functions/config", file));
}
// Each YAML file ships with its parse (`<file>.parsed.json`: the text's SHA-256 and the parsed
// value), so the app's start validates the shipped files without running the YAML parser; a file
// changed after the build no longer matches its digest and is parsed at start (shared/config/yaml-catalog.ts,
// whose parse options these are). A file that does not parse is left to start-up to report, with its line.
for (const file of readdirSync(path.join(root, "config")).filter((name) => name.endsWith(".yaml"))) {
  const text = readFileSync(path.join(root, "config", file), "utf8");
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) continue;
  const value = doc.toJS() ?? {};
  // Only what JSON carries as it is (no dates, no non-finite numbers).
  if (!isDeepStrictEqual(JSON.parse(JSON.stringify(value)), value)) continue;
  const sha256 = createHash("sha256").update(text).digest("hex");
  writeFileSync(path.join(root, "dist/functions/config", `${file}.parsed.json`), JSON.stringify({ sha256, value }));
}
// Each JSON catalog ships with its validation (`<file>.validated.json`: the SHA-256 of its text and
// of what its validation depends on, and the validated value), made here with the loaders' own
// schemas (shared/shipped-catalogs.ts), so the app's start does not run zod over the
// catalogs it ships; a file changed after the build no longer matches and is validated at start.
const validatorFile = path.join(root, "dist/meta/shipped-catalogs.mjs");
await build({
  entryPoints: [path.join(root, "shared/shipped-catalogs.ts")],
  outfile: validatorFile,
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  logLevel: "warning",
});
const { validateShippedCatalogs } = await import(pathToFileURL(validatorFile).href);
for (const [file, validated] of Object.entries(validateShippedCatalogs(path.join(root, "config")))) {
  // Only what JSON carries as it is (a transform's Date or Set stays validated at start).
  if (!isDeepStrictEqual(JSON.parse(JSON.stringify(validated.value)), validated.value)) continue;
  writeFileSync(path.join(root, "dist/functions/config", `${file}.validated.json`), JSON.stringify(validated));
}
// The job API's manifests, which the deploy renders and applies (shared/cluster/job-api-manifests.ts finds them here).
mkdirSync(path.join(root, "dist/functions/k8s"), { recursive: true });
for (const file of ["jobapi.yaml", "terminal.yaml"])
  copyFileSync(path.join(root, "infra/k8s", file), path.join(root, "dist/functions/k8s", file));
mkdirSync(path.join(root, "dist/local"), { recursive: true });
copyFileSync(path.join(root, "local/parent-watchdog.cjs"), path.join(root, "dist/local/parent-watchdog.cjs"));
copyFileSync(path.join(root, "local/azurite-durable.cjs"), path.join(root, "dist/local/azurite-durable.cjs"));
copyFileSync(path.join(root, "local/azurite-journal.cjs"), path.join(root, "dist/local/azurite-journal.cjs"));

// The web app's first load (the page and what it links: script, stylesheet, preloads) must stay
// under 150 KB gzipped; the results view is a chunk loaded on the job page only.
const FIRST_LOAD_BUDGET_BYTES = 150 * 1024;
const webDir = path.join(root, "dist/web");
const page = readFileSync(path.join(webDir, "index.html"));
const linked = [...page.toString().matchAll(/(?:src|href)="\/(assets\/[^"]+)"/g)].map((m) => m[1]);
const firstLoad = [page, ...linked.map((file) => readFileSync(path.join(webDir, file)))].reduce(
  (sum, bytes) => sum + gzipSync(bytes, { level: 9 }).length,
  0,
);
console.log(
  `web app first load: ${(firstLoad / 1024).toFixed(1)} KB gzipped (budget ${FIRST_LOAD_BUDGET_BYTES / 1024} KB)`,
);
if (firstLoad > FIRST_LOAD_BUDGET_BYTES) {
  console.error(
    "the web app's first load is over its budget: move code behind a dynamic import() or drop a dependency",
  );
  process.exit(1);
}
