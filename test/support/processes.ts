import { readFileSync } from "node:fs";

/** Direct children of `pid`, from /proc (empty once the process is gone). */
export function childPids(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return text ? text.split(/\s+/).map(Number) : [];
  } catch {
    return [];
  }
}

/** A process that exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** The job API process among the direct children of a local stack's process, if one is running. */
export function jobApiPidOf(stackPid: number): number | undefined {
  return childPids(stackPid).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("jobapi/server.js") && alive(pid);
    } catch {
      return false;
    }
  });
}
