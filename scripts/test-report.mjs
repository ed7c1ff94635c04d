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

/**
 * How well the run kept its workers busy, from the files' start and end times: the run's seconds
 * (its start to the last file's end), the files' seconds added up, the most files that ran at once
 * (the workers), the seconds in which fewer ran than that, and the tail: the seconds from the first
 * worker left without a file to start (the first end after the last file started) to the run's end.
 * A long tail means a long file started late: start the slow files first (docs/testing.md). Null
 * for a report without file times.
 */
export function fileOccupancy(report) {
  const files = [];
  for (const result of report?.testResults ?? []) {
    const { startTime, endTime } = result ?? {};
    if (Number.isFinite(startTime) && Number.isFinite(endTime) && endTime >= startTime)
      files.push({ start: startTime, end: endTime });
  }
  if (files.length === 0) return null;
  const runStart = Number.isFinite(report.startTime)
    ? Math.min(report.startTime, ...files.map((f) => f.start))
    : Math.min(...files.map((f) => f.start));
  const runEnd = Math.max(...files.map((f) => f.end));
  // Ends before starts at the same instant: a worker that ends a file and starts the next is never counted twice.
  const events = files
    .flatMap((f) => [
      { at: f.start, change: 1 },
      { at: f.end, change: -1 },
    ])
    .sort((a, b) => a.at - b.at || a.change - b.change);
  let running = 0;
  let most = 0;
  for (const e of events) {
    running += e.change;
    most = Math.max(most, running);
  }
  running = 0;
  let under = 0;
  let last = runStart;
  for (const e of events) {
    if (running < most) under += e.at - last;
    last = e.at;
    running += e.change;
  }
  const lastStarted = files.reduce((a, b) => (b.start > a.start ? b : a));
  const endsAfter = files.filter((f) => f !== lastStarted && f.end > lastStarted.start).map((f) => f.end);
  const tail = endsAfter.length > 0 ? runEnd - Math.min(...endsAfter) : 0;
  return {
    run_seconds: (runEnd - runStart) / 1000,
    file_seconds: files.reduce((sum, f) => sum + (f.end - f.start), 0) / 1000,
    most_at_once: most,
    under_seconds: under / 1000,
    tail_seconds: tail / 1000,
  };
}

/** The line printed for {@link fileOccupancy} (none without file times). */
export function fileOccupancyLines(occupancy) {
  if (!occupancy) return [];
  const s = (n) => `${n.toFixed(1)} s`;
  return [
    `test files: ${s(occupancy.file_seconds)} of file time in ${s(occupancy.run_seconds)}, at most ${occupancy.most_at_once} at once; fewer ran for ${s(occupancy.under_seconds)}, of it ${s(occupancy.tail_seconds)} at the tail (a worker with no file left to start)`,
  ];
}
