import type { ChildProcess } from "node:child_process";

/** Asks a child to stop (SIGTERM, so it can save its state), then forces it after `graceMs`. */
export async function stopChild(child: ChildProcess, exited: Promise<void>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timeout = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timeout);
}
