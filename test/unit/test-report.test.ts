import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import FileTimesReporter, { busyMilliseconds } from "../../scripts/file-times-reporter.mjs";
import { fileOccupancy, fileOccupancyLines, slowestFiles, slowestFilesLines } from "../../scripts/test-report.mjs";

/*
 * `npm test` ends with the slowest test files, read from vitest's JSON report, so each CI log shows
 * where the 15-minute budget went.
 */
const root = path.resolve("/repo");
const file = (name: string, startTime: number, endTime: number) => ({
  name: path.join(root, name),
  startTime,
  endTime,
  status: "passed",
  assertionResults: [],
});

describe("the slowest test files npm test prints", () => {
  it("lists the 15 slowest files of the report, slowest first, with seconds and paths relative to the project", () => {
    const report = {
      numPassedTests: 20,
      testResults: [
        ...Array.from({ length: 18 }, (_, i) => file(`test/unit/u${i}.test.ts`, 1_000, 1_000 + i * 100)),
        file("test/e2e/dashboard.test.ts", 5_000, 115_200),
        file("test/integration/notify-channels.test.ts", 0, 22_040),
      ],
    };
    const slowest = slowestFiles(report, root);
    expect(slowest).toHaveLength(15);
    expect(slowest.slice(0, 3)).toEqual([
      { file: "test/e2e/dashboard.test.ts", seconds: 110.2 },
      { file: "test/integration/notify-channels.test.ts", seconds: 22.04 },
      { file: "test/unit/u17.test.ts", seconds: 1.7 },
    ]);
    expect(slowest.at(-1)).toEqual({ file: "test/unit/u5.test.ts", seconds: 0.5 });
    expect(slowestFilesLines(slowest.slice(0, 3))).toEqual([
      "slowest 3 test files:",
      "  110.2 s  test/e2e/dashboard.test.ts",
      "   22.0 s  test/integration/notify-channels.test.ts",
      "    1.7 s  test/unit/u17.test.ts",
    ]);
  });

  it("prints nothing for a report without file times (a run that failed before any file ran)", () => {
    expect(slowestFiles({ numFailedTestSuites: 1 }, root)).toEqual([]);
    expect(slowestFiles({ testResults: [{ name: "x.test.ts" }] }, root)).toEqual([]);
    expect(slowestFilesLines([])).toEqual([]);
  });

  it("says how busy the workers were: file time, the most files at once, the time fewer ran and the tail after the last start", () => {
    // Two workers: a: 0–10 s; b: 0–4, 4.1–6, then the last file 6–20 s. From 10 s on only one ran.
    const report = {
      startTime: 0,
      testResults: [
        file("test/integration/a.test.ts", 0, 10_000),
        file("test/unit/b.test.ts", 0, 4_000),
        file("test/unit/c.test.ts", 4_100, 6_000),
        file("test/e2e/late.test.ts", 6_000, 20_000),
      ],
    };
    const occupancy = fileOccupancy(report);
    expect(occupancy).toEqual({
      run_seconds: 20,
      file_seconds: 29.9,
      most_at_once: 2,
      under_seconds: 10.1,
      tail_seconds: 10,
    });
    expect(fileOccupancyLines(occupancy)).toEqual([
      "test files: 29.9 s of file time in 20.0 s, at most 2 at once; fewer ran for 10.1 s, of it 10.0 s at the tail (a worker with no file left to start)",
    ]);
    // The slow file first: no tail, the workers busy to the end.
    const balanced = fileOccupancy({
      startTime: 0,
      testResults: [
        file("test/e2e/late.test.ts", 0, 14_000),
        file("test/integration/a.test.ts", 0, 10_000),
        file("test/unit/b.test.ts", 10_000, 14_000),
      ],
    });
    expect(balanced).toMatchObject({ run_seconds: 14, most_at_once: 2, under_seconds: 0, tail_seconds: 0 });
    expect(fileOccupancy({ numFailedTestSuites: 1 })).toBeNull();
    expect(fileOccupancyLines(null)).toEqual([]);
  });
});

describe("the whole-file times npm test reads (scripts/file-times-reporter.mjs)", () => {
  it("times each file from its environment set-up to its last hook, not from its first test to its last: the stack a beforeAll starts counts", () => {
    const output = path.join(mkdtempSync(path.join(tmpdir(), "bp-file-times-")), "times.json");
    let clock = 1_000;
    const reporter = new FileTimesReporter({ output, now: () => clock });
    reporter.onTestRunStart();
    // A file whose beforeAll started a stack for 20 s before 5 s of tests (vitest counts hooks in `duration`).
    clock = 31_000;
    reporter.onTestModuleEnd({
      moduleId: path.join(root, "test/integration/stack.test.ts"),
      diagnostic: () => ({
        environmentSetupDuration: 100,
        prepareDuration: 200,
        setupDuration: 1_700,
        collectDuration: 3_000,
        duration: 25_000,
        heap: undefined,
        importDurations: {},
      }),
    });
    reporter.onTestRunEnd();
    const times = JSON.parse(readFileSync(output, "utf8"));
    expect(times).toEqual({
      startTime: 1_000,
      testResults: [{ name: path.join(root, "test/integration/stack.test.ts"), startTime: 1_000, endTime: 31_000 }],
    });
    expect(slowestFiles(times, root)).toEqual([{ file: "test/integration/stack.test.ts", seconds: 30 }]);
    expect(fileOccupancy(times)).toMatchObject({ run_seconds: 30, file_seconds: 30, under_seconds: 0 });
    // A missing or malformed part counts as nothing.
    expect(busyMilliseconds({ duration: 5, collectDuration: Number.NaN, setupDuration: -1 })).toBe(5);
  });
});
