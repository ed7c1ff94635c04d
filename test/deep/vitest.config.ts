import { defineConfig } from "vitest/config";

/**
 * The opt-in deep runs (docs/test-deep-runs.md): `npx vitest run --config test/deep/vitest.config.ts`.
 * `npm test` never includes them (its pattern is test/**\/*.test.ts; these are *.deep.ts). The
 * root is the repository's, and the global setup (the product's bundle) is the suite's own.
 */
export default defineConfig({
  root: new URL("../..", import.meta.url).pathname,
  test: {
    include: ["test/deep/**/*.deep.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // The global set-up builds in the background: wait for it.
    setupFiles: ["test/support/wait-for-build.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 300_000,
    // One deep run at a time: each starts its own stack and runs for many minutes.
    maxWorkers: 1,
  },
});
