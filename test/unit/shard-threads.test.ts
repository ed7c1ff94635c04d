import { describe, expect, it } from "vitest";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { shardThreads } from "../../jobapi/executors/executor.js";

describe("shardThreads: -num_threads per shard", () => {
  it("gives a job of one shard every core", () => {
    expect(shardThreads("auto", 2, 1)).toBe(2);
    expect(shardThreads("auto", 16, 1)).toBe(16);
  });

  it("gives the shards of a job side by side about two threads per core in all, never more than the cores each", () => {
    for (const [slots, shards, each] of [
      [2, 2, 2],
      [2, 3, 2],
      [4, 2, 4],
      [4, 3, 3],
      [16, 4, 8],
      [16, 16, 2],
      [16, 500, 2],
      [1, 5, 1],
    ] as const) {
      const threads = shardThreads("auto", slots, shards);
      expect(threads).toBe(each);
      expect(threads).toBeLessThanOrEqual(slots);
      // While they all run, the machine has at least two threads per core to schedule (one core: one).
      if (slots > 1) expect(threads * Math.min(shards, slots)).toBeGreaterThanOrEqual(2 * slots);
    }
  });

  it("takes a configured number as it is", () => {
    expect(shardThreads(1, 16, 1)).toBe(1);
    expect(shardThreads(3, 2, 2)).toBe(3);
  });

  it("reads JOBAPI_THREADS_PER_SHARD as auto (the default) or 1..64, refusing anything else", () => {
    const base = { JOBAPI_STORAGE_CONNECTION_STRING: "UseDevelopmentStorage=true" };
    expect(loadJobApiConfig(base).threadsPerShard).toBe("auto");
    expect(loadJobApiConfig({ ...base, JOBAPI_THREADS_PER_SHARD: "auto" }).threadsPerShard).toBe("auto");
    expect(loadJobApiConfig({ ...base, JOBAPI_THREADS_PER_SHARD: "4" }).threadsPerShard).toBe(4);
    for (const bad of ["0", "65", "two", "1.5", "Auto"]) {
      expect(() => loadJobApiConfig({ ...base, JOBAPI_THREADS_PER_SHARD: bad })).toThrow(/JOBAPI_THREADS_PER_SHARD/);
    }
  });
});
