import { describe, expect, it } from "vitest";
import {
  decodeWorkerTimings,
  encodeWorkerTimings,
  shardTimeline,
  type WorkerTimings,
} from "../../jobapi/jobs/shard-timings.js";

const worker: WorkerTimings = {
  started: 1_764_300_000_120,
  imported: 1_764_300_000_420,
  cache_ready: 1_764_300_000_480,
  blast_started: 1_764_300_000_500,
  blast_ended: 1_764_300_001_700,
  upload_started: 1_764_300_001_701,
};

describe("shard timings (issue 24 item 3)", () => {
  it("the worker's timings travel as one short ASCII metadata value and come back whole", () => {
    const encoded = encodeWorkerTimings(worker);
    expect(encoded).toBe(
      "started=1764300000120;imported=300;cache_ready=360;blast_started=380;blast_ended=1580;upload_started=1581",
    );
    expect(encoded).toMatch(/^[\x20-\x7e]+$/);
    expect(decodeWorkerTimings(encoded)).toEqual(worker);
  });

  it("anything else on the blob (an older worker, a missing phase, garbage) gives no timings rather than wrong ones", () => {
    expect(decodeWorkerTimings(undefined)).toBeUndefined();
    expect(decodeWorkerTimings("")).toBeUndefined();
    expect(decodeWorkerTimings("started=1;imported=2")).toBeUndefined();
    expect(decodeWorkerTimings(`${encodeWorkerTimings(worker)};x`)).toBeUndefined();
    expect(
      decodeWorkerTimings("started=-1;imported=1;cache_ready=1;blast_started=1;blast_ended=1;upload_started=1"),
    ).toBeUndefined();
    expect(decodeWorkerTimings("a".repeat(600))).toBeUndefined();
  });

  it("a shard's timeline counts from its Job's creation and splits the time into phases; its overhead excludes BLAST", () => {
    const created = 1_764_300_000_000;
    const t = shardTimeline(
      { created, scheduled: created + 5, running: created + 90, completed: created + 1_900 },
      worker,
      created + 1_950,
    );
    expect(t).toEqual({
      scheduled_ms: 5,
      container_running_ms: 90,
      worker_started_ms: 120,
      worker_imported_ms: 420,
      cache_ready_ms: 480,
      blast_started_ms: 500,
      blast_ended_ms: 1_700,
      upload_started_ms: 1_701,
      completed_observed_ms: 1_900,
      recorded_ms: 1_950,
      pod_start_ms: 120,
      import_ms: 300,
      cache_ms: 60,
      query_ms: 20,
      blast_ms: 1_200,
      upload_and_exit_ms: 199,
      record_ms: 50,
      overhead_ms: 750,
    });
  });

  it("an adopted Job (its creation not seen) counts from the worker's start; without the worker's part only what was observed", () => {
    const adopted = shardTimeline({ completed: worker.started + 2_000 }, worker, worker.started + 2_010);
    expect(adopted.worker_started_ms).toBe(0);
    expect(adopted.blast_ms).toBe(1_200);
    expect(adopted).not.toHaveProperty("pod_start_ms");
    expect(adopted).not.toHaveProperty("overhead_ms");
    const bare = shardTimeline({ created: 1_000, scheduled: 1_010, completed: 3_000 }, undefined, 3_020);
    expect(bare).toEqual({ scheduled_ms: 10, completed_observed_ms: 2_000, recorded_ms: 2_020, record_ms: 20 });
  });
});
