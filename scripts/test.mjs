// `npm test`: typecheck, lint, then every unit, integration and end-to-end test (real Azurite,
// real BLAST+, Debian's Chromium),
// ending with the 15 slowest test files and one summary line "N passed, N failed". Exits non-zero if any step fails.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { fileOccupancy, fileOccupancyLines, slowestFiles, slowestFilesLines } from "./test-report.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name) => path.join(root, "node_modules", ".bin", name);

function step(title, cmd, args) {
  process.stdout.write(`\n== ${title}\n`);
  const started = Date.now();
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  process.stdout.write(
    `== ${title}: ${r.status === 0 ? "ok" : "FAILED"} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`,
  );
  return r.status === 0;
}

const typecheck = step("typecheck", bin("tsc"), ["-p", "tsconfig.json", "--noEmit"]);
const lint = step("lint", bin("biome"), ["lint", "."]) && step("format", bin("biome"), ["format", "."]);
const reportDir = mkdtempSync(path.join(tmpdir(), "bp-test-report-"));
const report = path.join(reportDir, "vitest.json");
// Each file's whole time, hooks included (vitest's JSON report times its tests only).
const fileTimes = `${report}.files.json`;
const tests = step("unit, integration and end-to-end tests", bin("vitest"), [
  "run",
  "--reporter=default",
  "--reporter=json",
  `--reporter=${path.join(root, "scripts/file-times-reporter.mjs")}`,
  `--outputFile.json=${report}`,
  ...process.argv.slice(2),
]);

let passed = 0;
let failed = 0;
let skipped = 0;
let slowest = [];
try {
  const json = JSON.parse(readFileSync(report, "utf8"));
  passed = json.numPassedTests ?? 0;
  // A file whose setup failed has failed tests of none of its own; count it once then.
  failed = json.numFailedTests ?? 0;
  if (failed === 0) failed = json.numFailedTestSuites ?? 0;
  skipped = (json.numPendingTests ?? 0) + (json.numTodoTests ?? 0);
  try {
    let times = json;
    try {
      times = JSON.parse(readFileSync(fileTimes, "utf8"));
    } catch {
      // No whole-file times (the reporter did not run): the JSON report's test times.
    }
    slowest = [...slowestFilesLines(slowestFiles(times, root)), ...fileOccupancyLines(fileOccupancy(times))];
  } catch {
    // Only a report of the times: it never changes the counts or the exit code.
  }
} catch {
  failed += 1;
}
rmSync(reportDir, { recursive: true, force: true });
if (!typecheck) failed += 1;
if (!lint) failed += 1;
// Where the time went (CI budget: 15 minutes), just above the summary.
if (slowest.length > 0) process.stdout.write(`\n${slowest.join("\n")}\n`);
process.stdout.write(`\ntypecheck ${typecheck ? "ok" : "FAILED"}, lint ${lint ? "ok" : "FAILED"}\n`);
process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`);
process.exit(typecheck && lint && tests && failed === 0 && passed > 0 ? 0 : 1);
