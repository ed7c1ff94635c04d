// Preloaded into child processes of the local stack (node --require). When the parent dies, even
// by SIGKILL, the stdin pipe it held closes; the child then shuts down gracefully (SIGTERM lets
// Azurite save its data) instead of living on as an orphan. Its stdout/stderr pipes died with the
// parent, so writes to them are dropped rather than crashing the shutdown with EPIPE. The stdin
// pipe is unref'd so it never keeps the child alive by itself.
"use strict";
function orphaned() {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", () => {});
    stream.write = (_chunk, encoding, callback) => {
      const done = typeof encoding === "function" ? encoding : callback;
      if (typeof done === "function") done();
      return true;
    };
  }
  process.kill(process.pid, "SIGTERM");
}
process.stdin.on("end", orphaned);
process.stdin.on("error", orphaned);
process.stdin.resume();
if (typeof process.stdin.unref === "function") process.stdin.unref();
