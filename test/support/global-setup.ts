import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { build } from "esbuild";
import type { TestProject } from "vitest/node";
import { type SharedAzurite, startSharedAzurite } from "./shared-azurite.js";

const root = path.resolve(import.meta.dirname, "../..");

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the first stack leaves its demo database for the later ones (test/support/local-stack.ts). */
    demoDatabaseTemplate: string;
    /** The file the build's outcome is written to when it ends (test/support/wait-for-build.ts). */
    buildOutcome: string;
    /** The run's shared Azurite (test/support/shared-azurite.ts); undefined if it did not start. */
    sharedAzurite: SharedAzurite | undefined;
  }
}

/** What the build left in `buildOutcome`: whether it succeeded, and what it printed if not. */
export interface BuildOutcome {
  ok: boolean;
  output: string;
}

/** `node scripts/build.mjs` (the product's bundles and the web app), with what it printed. */
function buildProduct(): Promise<BuildOutcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, "scripts/build.mjs")], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.once("error", (error) => resolve({ ok: false, output: `${output}${String(error)}` }));
    child.once("exit", (code, signal) =>
      resolve({
        ok: code === 0,
        output: code === 0 ? output : `${output}\nscripts/build.mjs exited with ${code ?? signal}`,
      }),
    );
  });
}

/** The durable test app (test/fixtures/durable-app), bundled as the Functions app is. */
async function buildDurableTestApp(): Promise<BuildOutcome> {
  try {
    await build({
      entryPoints: [path.join(root, "test/fixtures/durable-app/index.ts")],
      outfile: path.join(root, "dist/test/durable-app.js"),
      bundle: true,
      platform: "node",
      target: "node20",
      format: "esm",
      external: ["@azure/functions-core"],
      banner: { js: 'import { createRequire as __c } from "node:module"; const require = __c(import.meta.url);' },
      logLevel: "warning",
    });
    return { ok: true, output: "" };
  } catch (error) {
    return { ok: false, output: String(error) };
  }
}

/**
 * Bundles the product and the durable test app once per run, and makes the folder that shares one
 * built demo database among the run's stacks.
 *
 * The build runs while the first test files do: the unit tests need no bundle and run first (the
 * `unit` project, vitest.config.ts); every file of the other project waits for the build's outcome
 * before it starts (test/support/wait-for-build.ts), and fails with the build's output if it failed.
 * The run ends only after the build has, and fails if the build did, whatever files ran.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scratch = mkdtempSync(path.join(tmpdir(), "bp-test-run-"));
  const template = path.join(scratch, "demo-template");
  mkdirSync(template);
  const outcomeFile = path.join(scratch, "build-outcome.json");
  project.provide("demoDatabaseTemplate", template);
  project.provide("buildOutcome", outcomeFile);
  const started = Date.now();
  const built = Promise.all([buildProduct(), buildDurableTestApp()]).then((outcomes) => {
    const outcome: BuildOutcome = {
      ok: outcomes.every((o) => o.ok),
      output: outcomes
        .map((o) => o.output)
        .filter(Boolean)
        .join("\n"),
    };
    // Written whole, then renamed: a waiting file never reads half of it.
    writeFileSync(`${outcomeFile}.tmp`, JSON.stringify(outcome));
    renameSync(`${outcomeFile}.tmp`, outcomeFile);
    process.stdout.write(
      `${outcome.output}${outcome.output.endsWith("\n") ? "" : "\n"}build ${outcome.ok ? "ok" : "FAILED"} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`,
    );
    return outcome;
  });
  // The storage-only files share one Azurite, an account each; without it each starts its own.
  const claims = path.join(scratch, "azurite-accounts");
  mkdirSync(claims);
  const shared = await startSharedAzurite(claims, root).catch((error: unknown) => {
    process.stdout.write(`shared Azurite not started (each file starts its own): ${String(error)}\n`);
    return undefined;
  });
  project.provide("sharedAzurite", shared?.shared);
  return async () => {
    const outcome = await built;
    await shared?.stop();
    rmSync(scratch, { recursive: true, force: true });
    if (!outcome.ok) throw new Error(`the build failed:\n${outcome.output}`);
  };
}
