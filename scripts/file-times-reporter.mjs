// A vitest reporter for `npm test` (scripts/test.mjs): each test file's whole time — environment,
// set-up files, import, tests and hooks (beforeAll/afterAll, where the stacks start and stop) — as
// `{ startTime, testResults: [{ name, startTime, endTime }] }` next to the JSON report
// (`<outputFile.json>.files.json`), the shape scripts/test-report.mjs reads. vitest's JSON report times a file
// from its first test to its last only, which leaves the hooks out (docs/testing.md).
import { writeFileSync } from "node:fs";

/** A file's busy milliseconds from vitest's diagnostic of a test module. */
export function busyMilliseconds(diagnostic) {
  const parts = [
    diagnostic?.environmentSetupDuration,
    diagnostic?.prepareDuration,
    diagnostic?.setupDuration,
    diagnostic?.collectDuration,
    diagnostic?.duration,
  ];
  return parts.reduce((sum, ms) => sum + (Number.isFinite(ms) && ms > 0 ? ms : 0), 0);
}

export default class FileTimesReporter {
  constructor(options = {}) {
    this.output = options.output;
    this.now = options.now ?? (() => Date.now());
    this.files = [];
    this.startTime = undefined;
  }

  /** Without an `output`, the file goes next to vitest's JSON report (`--outputFile.json`). */
  onInit(vitest) {
    const json = vitest?.config?.outputFile;
    const reportFile = typeof json === "string" ? json : json?.json;
    if (this.output === undefined && typeof reportFile === "string") this.output = `${reportFile}.files.json`;
  }

  onTestRunStart() {
    this.startTime = this.now();
  }

  onTestModuleEnd(testModule) {
    const endTime = this.now();
    const busy = busyMilliseconds(testModule.diagnostic());
    this.files.push({ name: testModule.moduleId, startTime: endTime - busy, endTime });
  }

  onTestRunEnd() {
    if (!this.output) return;
    writeFileSync(this.output, JSON.stringify({ startTime: this.startTime, testResults: this.files }));
  }
}
