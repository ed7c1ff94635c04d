// Preloaded into child processes of the local stack (node --require). When the parent dies, even
// by SIGKILL, the stdin pipe it held closes; the child then shuts down gracefully (SIGTERM lets
// Azurite save its data) instead of living on as an orphan.
"use strict";
process.stdin.on("end", () => process.kill(process.pid, "SIGTERM"));
process.stdin.on("error", () => process.kill(process.pid, "SIGTERM"));
process.stdin.resume();
