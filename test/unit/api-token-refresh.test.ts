import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ApiTokenService, createFileSecretStore, type SecretStore } from "../../shared/secrets/api-tokens.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** One secrets folder seen by two processes: the job API (checks tokens) and the dashboard backend (regenerates). */
function twoProcesses() {
  const dir = mkdtempSync(path.join(tmpdir(), "bp-token-refresh-"));
  dirs.push(dir);
  const store = createFileSecretStore(dir);
  let reads = 0;
  const counted: SecretStore = {
    get: (name) => {
      reads++;
      return store.get(name);
    },
    set: (name, value) => store.set(name, value),
  };
  // A cache far longer than the test: only the refresh on an unknown token can see the new one.
  return {
    jobApi: new ApiTokenService(counted, { cacheMs: 600_000 }),
    dashboard: new ApiTokenService(store),
    reads: () => reads,
  };
}

describe("job API token checks after a regenerate by another process", () => {
  it("B-201 accepts the regenerated token at once, not only after its cache expires, and still refuses a wrong one", async () => {
    const { jobApi, dashboard } = twoProcesses();
    await dashboard.ensure();
    const first = (await dashboard.state())?.current.value as string;
    expect(await jobApi.isValid(first)).toBe(true);
    const rotated = await dashboard.rotate(60);
    expect(await jobApi.isValid(rotated.current.value)).toBe(true);
    expect(await jobApi.isValid(first)).toBe(true);
    expect(await jobApi.isValid(`${rotated.current.value}x`)).toBe(false);
  });

  it("a burst of wrong tokens shares store reads instead of reading once per request", async () => {
    const { jobApi, dashboard, reads } = twoProcesses();
    await dashboard.ensure();
    await jobApi.state();
    const before = reads();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => jobApi.isValid(`bpt_wrong_${i}`)));
    expect(answers.every((ok) => ok === false)).toBe(true);
    expect(reads() - before).toBeLessThanOrEqual(2);
  });
});
