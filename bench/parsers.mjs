// `node bench/parsers.mjs`: bundles bench/parsers.ts (the FASTA and NCRONTAB parsers' running time,
// as ratios against baselines measured in the same run) and runs it. Needs no build and no stack.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outfile = path.join(root, "node_modules/.cache/blastplane-bench/parsers.mjs");
await build({
  entryPoints: [path.join(root, "bench/parsers.ts")],
  bundle: true,
  platform: "node",
  format: "esm",
  packages: "external",
  outfile,
  logLevel: "warning",
});
const run = spawnSync(process.execPath, [outfile], { stdio: "inherit" });
process.exit(run.status ?? 1);
