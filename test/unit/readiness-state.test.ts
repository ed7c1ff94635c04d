import { describe, expect, it } from "vitest";
import { createReadinessState, READINESS_MAX_AGE_MS } from "../../jobapi/routes/readiness-state.js";

describe("job API readiness state", () => {
  it("B-161 serves a flood of reads from one check, never older than its bound, and reports a change after it", async () => {
    let t = 0;
    let checks = 0;
    let value = "ready";
    let release!: () => void;
    let gate = Promise.resolve();
    const state = createReadinessState(
      async () => {
        checks++;
        await gate;
        return value;
      },
      () => t,
    );
    // A hundred reads at once with nothing known yet: one check answers them all.
    expect(new Set(await Promise.all(Array.from({ length: 100 }, () => state.current())))).toEqual(new Set(["ready"]));
    expect(checks).toBe(1);
    // Within the bound, reads answer at once from what is known, while one refresh runs.
    value = "not ready";
    gate = new Promise((r) => {
      release = r;
    });
    t = READINESS_MAX_AGE_MS - 1;
    expect(await Promise.all([state.current(), state.current()])).toEqual(["ready", "ready"]);
    expect(checks).toBe(2);
    release();
    await new Promise((r) => setImmediate(r));
    // Past the bound nothing older is served: the change shows.
    t += 1;
    expect(await state.current()).toBe("not ready");
  });
});
