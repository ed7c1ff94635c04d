/** The parts of vitest's `ModuleDiagnostic` a file's whole time is made of (milliseconds). */
export interface FileDiagnostic {
  environmentSetupDuration?: number;
  prepareDuration?: number;
  setupDuration?: number;
  collectDuration?: number;
  duration?: number;
}
/** A file's busy milliseconds: environment, preparation, set-up files, import, tests and hooks. */
export function busyMilliseconds(diagnostic: FileDiagnostic | undefined): number;
/** Writes each test file's whole time to `output` (default: `<outputFile.json>.files.json`) when the run ends. */
export default class FileTimesReporter {
  constructor(options?: { output?: string; now?: () => number });
  onInit(vitest: { config?: { outputFile?: string | Record<string, string> } }): void;
  onTestRunStart(): void;
  onTestModuleEnd(testModule: { moduleId: string; diagnostic(): FileDiagnostic }): void;
  onTestRunEnd(): void;
}
