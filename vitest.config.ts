import { readdirSync } from "node:fs";
import { configDefaults, defineConfig } from "vitest/config";

/** Unit test files that read the build's output (dist/): they run with the files that wait for it. */
const UNIT_FILES_USING_THE_BUILD = ["test/unit/jobapi-image.test.ts"];
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
    // Integration files start their own stacks; two at a time suits a 2-core machine.
    maxWorkers: 2,
    // One queue of files for both projects, `unit` first (the sequencer orders projects by name):
    // the unit tests run while the build does, then the files that need it.
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...UNIT_FILES_USING_THE_BUILD],
        },
      },
      {
        extends: true,
        test: {
          name: "with-build",
          include: ["test/**/*.test.ts"],
          exclude: [
            ...configDefaults.exclude,
            ...UNIT_FILES.filter((file) => !UNIT_FILES_USING_THE_BUILD.includes(file)),
          ],
          setupFiles: ["test/support/wait-for-build.ts"],
        },
      },
    ],
  },
});
