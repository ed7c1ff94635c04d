// What the Functions app's cold start (metric d) is made of: which packages and sources the
// worker reads at import (esbuild's metafile of the built bundle) and where the import's CPU time
// goes (a V8 CPU profile of one fresh-process import, each sample mapped back to its source through
// the bundle's source maps). A diagnostic, not a metric: run it after `npm run build`.
//
//   node bench/cold-start-profile.mjs [--top N] [--runs N] [--through <package>] [--keep]
//
// The CPU profile samples every 100 µs; native and garbage-collection time is given to the nearest
// bundle frame above it (parsing and compiling a chunk shows as its top-level code). The bundle's
// whitespace is minified, so a chunk's top-level code is one line: the profile is taken of a copy
// built with whitespace kept (same code, same splitting) in dist/profile/ (removed afterwards).
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { SourceMap } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { functionsBuildOptions, LAZY_DURABLE_REQUIRES, lazyBuildOptions, root } from "../scripts/build-options.mjs";

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const TOP = Number(option("--top", "25"));
const RUNS = Number(option("--runs", "3"));
/** With --through <package>: that package's time by the source that called into it. */
const THROUGH = option("--through", undefined);
const APP_ENV = {
  AzureWebJobsStorage: "UseDevelopmentStorage=true",
  AUTH_TENANT_ID: "bench",
  AUTH_CLIENT_ID: "bench",
  LOG_LEVEL: "error",
};

/** "zod", "@azure/functions", or the repository folder ("shared/console") of a bundle input. */
function ownerOf(input) {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input);
  if (pkg) return pkg[1];
  const ours = /^(?:\.\.\/)*((?:shared|functions|config)\/[^/]+)/.exec(input);
  if (ours) return ours[1].replace(/\.ts$/, "");
  return input;
}

const kb = (bytes) => `${(bytes / 1024).toFixed(0)} KB`;

function eagerOutputs(meta, entry) {
  const seen = new Set();
  const visit = (output) => {
    if (seen.has(output)) return;
    seen.add(output);
    for (const imported of meta.outputs[output]?.imports ?? [])
      if (imported.kind === "import-statement") visit(imported.path);
  };
  visit(entry);
  return [...seen];
}

/** Bytes each package or source folder puts into the outputs the worker reads at import. */
function eagerBytesByOwner(meta, entry) {
  const byOwner = new Map();
  let total = 0;
  for (const output of eagerOutputs(meta, entry)) {
    for (const [input, { bytesInOutput }] of Object.entries(meta.outputs[output].inputs)) {
      const owner = ownerOf(input);
      byOwner.set(owner, (byOwner.get(owner) ?? 0) + bytesInOutput);
      total += bytesInOutput;
    }
  }
  return { total, byOwner: [...byOwner].sort((a, b) => b[1] - a[1]) };
}

/** A readable copy of the bundle (whitespace kept) beside the real one, for line-level profiling. */
async function readableBuild(dir) {
  const outdir = path.join(dir, "functions");
  cpSync(path.join(root, "dist/functions/config"), path.join(outdir, "config"), { recursive: true });
  await Promise.all([
    build({ ...functionsBuildOptions, minifyWhitespace: false, outdir }),
    ...LAZY_DURABLE_REQUIRES.map((name) =>
      build({
        ...lazyBuildOptions(name),
        outfile: path.join(outdir, "lazy", path.basename(lazyBuildOptions(name).outfile)),
      }),
    ),
  ]);
  return path.join(outdir, "index.js");
}

function profileOnce(entry, dir) {
  const profDir = mkdtempSync(path.join(dir, "prof-"));
  execFileSync(
    process.execPath,
    [
      "--cpu-prof",
      `--cpu-prof-dir=${profDir}`,
      "--cpu-prof-interval=100",
      path.join(root, "scripts/import-probe.mjs"),
      entry,
    ],
    { cwd: root, env: { PATH: process.env.PATH, ...APP_ENV }, stdio: ["ignore", "ignore", "inherit"] },
  );
  const file = readdirSync(profDir).find((f) => f.endsWith(".cpuprofile"));
  return JSON.parse(readFileSync(path.join(profDir, file), "utf8"));
}

/** Source maps of the profiled copy, one per output file, with its lines (for the first column of a line). */
function sourceMapper() {
  const maps = new Map();
  const of = (url) => {
    if (!maps.has(url)) {
      let entry;
      try {
        const file = new URL(url).pathname;
        entry = {
          map: new SourceMap(JSON.parse(readFileSync(`${file}.map`, "utf8"))),
          lines: readFileSync(file, "utf8").split("\n"),
        };
      } catch {
        entry = undefined;
      }
      maps.set(url, entry);
    }
    return maps.get(url);
  };
  return (url, line0, column0) => {
    const m = of(url);
    if (!m) return undefined;
    const text = m.lines[line0] ?? "";
    const column = column0 ?? Math.max(0, text.search(/\S/));
    const found = m.map.findEntry(line0, column);
    return found && "originalSource" in found ? found.originalSource : undefined;
  };
}

function attribute(profile, distUrl, mapSource, through) {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map();
  for (let i = 0; i < profile.samples.length; i++)
    selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
  const inBundle = (n) => n.callFrame.url.startsWith(distUrl);
  const frameOwner = (n) =>
    ownerOf(mapSource(n.callFrame.url, n.callFrame.lineNumber, n.callFrame.columnNumber) ?? n.callFrame.url);
  const byOwner = new Map();
  const byCaller = new Map();
  const add = (map, owner, us) => map.set(owner, (map.get(owner) ?? 0) + us);
  let bundleUs = 0;
  for (const n of profile.nodes) {
    const us = selfUs.get(n.id) ?? 0;
    if (us === 0) continue;
    // The nearest frame of the bundle at or above this one.
    let at = n;
    while (at && !inBundle(at)) at = nodes.get(parent.get(at.id));
    if (!at) continue;
    bundleUs += us;
    const gc = n.callFrame.functionName === "(garbage collector)";
    let owner;
    if (at === n && n.positionTicks?.length) {
      // Line-level ticks of this function: each line to its source.
      const ticks = n.positionTicks.reduce((s, t) => s + t.ticks, 0);
      for (const t of n.positionTicks) {
        const source = mapSource(n.callFrame.url, t.line - 1) ?? n.callFrame.url;
        add(byOwner, ownerOf(source), (us * t.ticks) / ticks);
      }
      owner = frameOwner(n);
    } else {
      owner = gc ? "(garbage collection)" : frameOwner(at);
      add(byOwner, owner, us);
    }
    if (through && owner === through) {
      // Whose code called into `through`: the first bundle frame above of another owner.
      let caller = nodes.get(parent.get(at.id));
      while (caller && (!inBundle(caller) || frameOwner(caller) === through)) caller = nodes.get(parent.get(caller.id));
      const where = caller
        ? (mapSource(caller.callFrame.url, caller.callFrame.lineNumber, caller.callFrame.columnNumber) ?? "?")
        : "(none)";
      add(byCaller, where.replace(/^(\.\.\/)+/, ""), us);
    }
  }
  return { bundleUs, byOwner, byCaller };
}

const meta = JSON.parse(readFileSync(path.join(root, "dist/meta/functions.json"), "utf8"));
const { total, byOwner: bytes } = eagerBytesByOwner(meta, "dist/functions/index.js");
console.log(`Read at import (entry and its static chunks): ${kb(total)} of source in the bundle`);
for (const [owner, size] of bytes.slice(0, TOP)) console.log(`  ${kb(size).padStart(8)}  ${owner}`);

const work = path.join(root, "dist/profile");
rmSync(work, { recursive: true, force: true });
try {
  const entry = await readableBuild(work);
  const distUrl = pathToFileURL(path.dirname(entry)).href;
  const mapSource = sourceMapper();
  const sums = new Map();
  const callers = new Map();
  let bundleTotal = 0;
  for (let run = 0; run < RUNS; run++) {
    const { bundleUs, byOwner, byCaller } = attribute(profileOnce(entry, work), distUrl, mapSource, THROUGH);
    bundleTotal += bundleUs;
    for (const [owner, us] of byOwner) sums.set(owner, (sums.get(owner) ?? 0) + us);
    for (const [caller, us] of byCaller) callers.set(caller, (callers.get(caller) ?? 0) + us);
  }
  console.log(
    `\nCPU in the bundle's code during import (mean of ${RUNS} profiled imports, 100 µs sampling): ${(bundleTotal / RUNS / 1000).toFixed(0)} ms`,
  );
  for (const [owner, us] of [...sums].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(`  ${(us / RUNS / 1000).toFixed(1).padStart(7)} ms  ${owner}`);
  if (THROUGH) {
    console.log(`\n${THROUGH}'s time by the source that called into it:`);
    for (const [caller, us] of [...callers].sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(`  ${(us / RUNS / 1000).toFixed(1).padStart(7)} ms  ${caller}`);
  }
} finally {
  // --keep leaves the readable copy (with its source maps) to look into.
  if (!args.includes("--keep")) rmSync(work, { recursive: true, force: true });
}
