// What `npm test` (scripts/test.mjs) prints from vitest's JSON report after the run: the slowest
// test files, so every CI log shows where the suite's time goes. Plain JavaScript, no dependencies.
import path from "node:path";

/**
 * The `count` test files of the report that took longest, slowest first: each file's path
 * relative to `root` and its seconds (from the file's start to its end, as vitest recorded them).
 */
export function slowestFiles(report, root, count = 15) {
  const files = [];
  for (const result of report?.testResults ?? []) {
    const { name, startTime, endTime } = result ?? {};
    if (typeof name !== "string" || !Number.isFinite(startTime) || !Number.isFinite(endTime)) continue;
    files.push({ file: path.relative(root, name) || name, seconds: Math.max(0, endTime - startTime) / 1000 });
  }
  return files.sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file)).slice(0, count);
}

/** The lines printed for {@link slowestFiles}: a heading, then one `  <seconds> s  <file>` line each (none when empty). */
export function slowestFilesLines(files) {
  if (files.length === 0) return [];
  const width = Math.max(...files.map((f) => f.seconds.toFixed(1).length));
  return [
    `slowest ${files.length} test files:`,
    ...files.map((f) => `  ${f.seconds.toFixed(1).padStart(width)} s  ${f.file}`),
  ];
}
