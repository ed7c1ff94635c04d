/**
 * Whether a process of this machine is alive: signal 0 checks without delivering anything. A
 * process that exists but belongs to another user answers EPERM, which still means alive. The
 * release folders' owners, the job API's dispatch lease and the local stack's file all use it to
 * tell a crashed holder from a live one.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
