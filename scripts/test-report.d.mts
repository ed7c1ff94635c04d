/** One test file of vitest's JSON report and how long it took. */
export interface FileTime {
  file: string;
  seconds: number;
}
/** The `count` (15) slowest test files of a vitest JSON report, slowest first, paths relative to `root`. */
export function slowestFiles(report: unknown, root: string, count?: number): FileTime[];
/** The lines `npm test` prints for them (a heading and one line a file; none when empty). */
export function slowestFilesLines(files: readonly FileTime[]): string[];
