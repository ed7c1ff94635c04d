import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { processAlive } from "../../shared/process-alive.js";

describe("processAlive (release owners, the dispatch lease, the local stack file)", () => {
  it("a running process is alive; one that has exited is not", async () => {
    expect(processAlive(process.pid)).toBe(true);
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    const pid = child.pid as number;
    await once(child, "exit");
    expect(processAlive(pid)).toBe(false);
  });
});
