import { existsSync, readFileSync } from "node:fs";
import { inject } from "vitest";
import type { BuildOutcome } from "./global-setup.js";

/*
 * Set-up file of every test file that uses the build (dist/): waits until the global set-up's build
 * has ended (it runs while the unit tests do), and fails the file with the build's output if the
 * build failed. Only a hang guard bounds the wait: the build itself never takes this long.
 */
const outcomeFile = inject("buildOutcome");
const deadline = Date.now() + 20 * 60_000;
while (!existsSync(outcomeFile)) {
  if (Date.now() > deadline) throw new Error(`the build did not end within 20 minutes (no ${outcomeFile})`);
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const outcome = JSON.parse(readFileSync(outcomeFile, "utf8")) as BuildOutcome;
if (!outcome.ok) throw new Error(`the build failed, so this file cannot run:\n${outcome.output}`);
