/** One test file of vitest's JSON report and how long it took. */
export interface FileTime {
  file: string;
  seconds: number;
}
/** The `count` (15) slowest test files of a vitest JSON report, slowest first, paths relative to `root`. */
export function slowestFiles(report: unknown, root: string, count?: number): FileTime[];
/** The lines `npm test` prints for them (a heading and one line a file; none when empty). */
export function slowestFilesLines(files: readonly FileTime[]): string[];
/** How busy the run kept its workers (seconds); null for a report without file times. */
export interface FileOccupancy {
  run_seconds: number;
  file_seconds: number;
  most_at_once: number;
  under_seconds: number;
  tail_seconds: number;
}
/** The run's file time, workers, time with a worker free and tail after the last file started. */
export function fileOccupancy(report: unknown): FileOccupancy | null;
/** The line `npm test` prints for it (none for null). */
export function fileOccupancyLines(occupancy: FileOccupancy | null): string[];
