// Metric (d) of `npm run bench`: the cold start of the Functions app, as the time to import its
// bundle (`dist/functions/index.js`, what the worker loads on every cold start) in a fresh process,
// beside the time to import `@azure/functions` alone (the floor: every app imports it), measured
// back to back in the same run, which goes first alternating. Each import runs in its own process
// through scripts/import-probe.mjs, with the worker's core module present so the app registers its
// functions as it does on Azure. The target (issue 24) is a ratio: the bundle's import at most
// `targetRatio` times that of `@azure/functions` alone. `compare` (BENCH_COLD_START_COMPARE) names
// another build's entry to import in the same rounds, e.g. the build before a change.
import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { foreignLoadMeter, foreignLoadOf, ROOT } from "./stack.mjs";

const PROBE = path.join(ROOT, "scripts/import-probe.mjs");
const BUNDLE = path.join(ROOT, "dist/functions/index.js");
/** The settings the app refuses to start without; the import reaches no storage. */
const APP_ENV = {
  AzureWebJobsStorage: "UseDevelopmentStorage=true",
  AUTH_TENANT_ID: "bench",
  AUTH_CLIENT_ID: "bench",
  LOG_LEVEL: "error",
};

function probe(target) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [PROBE, target], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...APP_ENV },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => {
      stdout += c;
    });
    child.stderr.on("data", (c) => {
      stderr += c;
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve(JSON.parse(stdout))
        : reject(new Error(`import of ${target} failed (${code}): ${stderr.slice(-500)}`)),
    );
  });
}

/** Bytes the worker reads on a cold start: the entry and the chunks it imports statically. */
function eagerBytes() {
  const meta = JSON.parse(readFileSync(path.join(ROOT, "dist/meta/functions.json"), "utf8"));
  const seen = new Set();
  const visit = (output) => {
    if (seen.has(output)) return;
    seen.add(output);
    for (const imported of meta.outputs[output]?.imports ?? [])
      if (imported.kind === "import-statement") visit(imported.path);
  };
  visit("dist/functions/index.js");
  return [...seen].reduce((sum, output) => sum + statSync(path.join(ROOT, output)).size, 0);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, digits = 1) => Number(x.toFixed(digits));

/**
 * Runs `runs` fresh-process imports of each (after one warm-up pair that fills the file cache) and
 * returns the medians. `log` prints progress lines.
 */
export async function benchColdStart({ runs, targetRatio, compare, log }) {
  log(
    `(d) cold start: import of the Functions bundle vs @azure/functions alone${compare ? ` and ${compare}` : ""}, ${runs} fresh processes each (1 warm-up round)`,
  );
  const ours = [];
  const baseline = [];
  const oursCpu = [];
  const other = [];
  const otherCpu = [];
  const foreign = [];
  let registered = 0;
  const BASELINE = "@azure/functions";
  const OTHER = compare ? path.resolve(compare) : undefined;
  for (let i = 0; i <= runs; i++) {
    const meter = foreignLoadMeter();
    const targets = [BUNDLE, BASELINE, ...(OTHER ? [OTHER] : [])];
    // Which goes first turns round by round.
    const order = targets.map((_, k) => targets[(k + i) % targets.length]);
    const answers = {};
    for (const target of order) answers[target] = await probe(target);
    const bundle = answers[BUNDLE];
    const alone = answers[BASELINE];
    const foreignCores = meter();
    log(
      `  ${i === 0 ? "warm-up" : `run ${i}`}: bundle ${bundle.import_ms.toFixed(0)} ms (CPU ${bundle.cpu_ms.toFixed(0)} ms, ${bundle.registered} functions), ` +
        `@azure/functions ${alone.import_ms.toFixed(0)} ms` +
        (OTHER
          ? `, compared build ${answers[OTHER].import_ms.toFixed(0)} ms (CPU ${answers[OTHER].cpu_ms.toFixed(0)} ms)`
          : "") +
        `, foreign load ${foreignCores.toFixed(2)} cores`,
    );
    if (i === 0) continue;
    registered = bundle.registered;
    ours.push(bundle.import_ms);
    oursCpu.push(bundle.cpu_ms);
    baseline.push(alone.import_ms);
    if (OTHER) {
      other.push(answers[OTHER].import_ms);
      otherCpu.push(answers[OTHER].cpu_ms);
    }
    foreign.push(foreignCores);
  }
  const result = {
    ours_ms: round(median(ours)),
    baseline_ms: round(median(baseline)),
    ratio: round(median(ours) / median(baseline), 2),
    ours_cpu_ms: round(median(oursCpu)),
    target_ratio: targetRatio,
    runs_ours_ms: ours.map((x) => round(x)),
    runs_baseline_ms: baseline.map((x) => round(x)),
    ...foreignLoadOf(foreign),
    functions_registered: registered,
    eager_bytes: eagerBytes(),
  };
  if (OTHER)
    result.compare = {
      bundle: path.relative(ROOT, OTHER),
      ms: round(median(other)),
      cpu_ms: round(median(otherCpu)),
      ratio: round(median(other) / median(baseline), 2),
      runs_ms: other.map((x) => round(x)),
    };
  result.pass = result.ratio <= targetRatio;
  return result;
}
