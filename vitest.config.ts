import { readdirSync } from "node:fs";
import { configDefaults, defineConfig } from "vitest/config";

/**
 * Unit test files that run after the build, with the files that wait for it: one reads the build's
 * output (dist/); two run BLAST+ for seconds within a test's time limit, and beside the build (which
 * takes most of both cores for its first minute) a tblastn run took over 30 s instead of ~7 s.
 */
const UNIT_FILES_AFTER_THE_BUILD = [
  "test/unit/jobapi-image.test.ts",
  "test/unit/blast-options.test.ts",
  "test/unit/fasta.test.ts",
];
/**
 * Unit test files that need a fresh module graph of their own: they register Functions triggers or
 * orchestrations on import (replays, the app's route registry), set process.env, or replace a global
 * (spies on console or setTimeout, fetch). The other unit files share their worker's modules.
 */
const UNIT_FILES_NEEDING_ISOLATION = [
  "test/unit/api-descriptions.test.ts",
  "test/unit/approval-request-replay.test.ts",
  "test/unit/build-images-replay.test.ts",
  "test/unit/catalog-build-validation.test.ts",
  "test/unit/channel-progress-stream.test.ts",
  "test/unit/cluster-orchestration-replay.test.ts",
  "test/unit/config.test.ts",
  "test/unit/database-orchestrations-replay.test.ts",
  "test/unit/deploy-job-api-replay.test.ts",
  "test/unit/durable-functions-pin.test.ts",
  "test/unit/http-connection.test.ts",
  "test/unit/http-kit.test.ts",
  "test/unit/infra-bicep.test.ts",
  "test/unit/jobapi-http.test.ts",
  "test/unit/narrator-adapter.test.ts",
  "test/unit/ops-snapshots.test.ts",
  "test/unit/storage-connection.test.ts",
  "test/unit/submit-blast-job-replay.test.ts",
  "test/unit/terminal-ingress.test.ts",
  "test/unit/thin-triggers.test.ts",
  "test/unit/timer-scheduler.test.ts",
];
const UNIT_FILES = readdirSync(new URL("test/unit", import.meta.url), { recursive: true, encoding: "utf8" })
  .filter((file) => file.endsWith(".test.ts"))
  .map((file) => `test/unit/${file.replaceAll("\\", "/")}`);

export default defineConfig({
  test: {
    // The global set-up builds the product in the background (test/support/global-setup.ts).
    globalSetup: ["test/support/global-setup.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Integration files start their own stacks and spend most of their time waiting on them
    // (Azurite, BLAST+, the Functions host, the kubelet's processes): three at a time keep a 2-core
    // machine busy where two left it idle (docs/testing.md, "Where the suite's time goes").
    maxWorkers: 3,
    // One queue of files for the three projects, in the order of their names (vitest's sequencer):
    // the unit tests run while the build does, then the files that need it.
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...UNIT_FILES_AFTER_THE_BUILD, ...UNIT_FILES_NEEDING_ISOLATION],
          // A worker runs one file after another without starting afresh (~0.4 s a file) and keeps
          // the modules it loaded (zod schemas, the shared domain) for the next file.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: "unit-isolated",
          include: UNIT_FILES_NEEDING_ISOLATION,
        },
      },
      {
        extends: true,
        test: {
          name: "with-build",
          include: ["test/**/*.test.ts"],
          exclude: [
            ...configDefaults.exclude,
            ...UNIT_FILES.filter((file) => !UNIT_FILES_AFTER_THE_BUILD.includes(file)),
          ],
          setupFiles: ["test/support/wait-for-build.ts"],
        },
      },
    ],
  },
});
