import { beforeAll, describe, expect, it } from "vitest";
import type { BuildImagesInput, RunPoll, UploadedContext } from "../../shared/cluster/image-build.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/**
 * The image build orchestration replayed through the real durable-functions library against
 * hand-built histories: each test is one branch of `functions/orchestrations/build-images.ts`.
 */
const MODULE = "functions/orchestrations/build-images.ts";
const START = new Date("2026-01-05T10:00:00.000Z");
const DIGEST = `sha256:${"b".repeat(64)}`;
const INPUT: BuildImagesInput = {
  registry: { subscription_id: "00000000-0000-4000-8000-000000000001", resource_group: "rg", name: "blastplanecr" },
  login_server: "blastplanecr.azurecr.io",
  repository: "blastplane-jobapi",
  dockerfile: "jobapi/Dockerfile",
  timeout_seconds: 600,
  poll_seconds: 10,
};
const UPLOADED: UploadedContext = {
  source_location: "source/20260105/ctx.tar.gz",
  context_digest: `sha256:${"c".repeat(64)}`,
  files: 120,
  bytes: 1_000_000,
};
const poll = (status: RunPoll["status"], extra: Partial<RunPoll> = {}): RunPoll => ({
  run_id: "ca1",
  status,
  terminal: ["Succeeded", "Failed", "Canceled", "Error", "Timeout"].includes(status),
  log_tail: "Queued a build with ID: ca1",
  ...extra,
});

let replayer: OrchestrationReplayer;
let activities: { upload: string; schedule: string; read: string };
beforeAll(async () => {
  replayer = await loadOrchestrations([MODULE]);
  activities = replayer.modules[MODULE]?.BuildImagesActivities as typeof activities;
});

const started = () => new OrchestrationHistory(Orchestrations.buildImages, INPUT, START);
const scheduled = () =>
  started().activityCompleted(activities.upload, UPLOADED).activityCompleted(activities.schedule, { run_id: "ca1" });

describe("buildImages replay", () => {
  it("B-012 uploads the build context first (retried on transient failures), reporting the step", async () => {
    const state = await replayer.replay(started());
    expect(state.isDone).toBe(false);
    expect(state.newActions).toEqual([
      expect.objectContaining({
        actionType: ActionType.CallActivityWithRetry,
        functionName: activities.upload,
        input: INPUT,
      }),
    ]);
    expect(state.customStatus).toEqual({ step: "upload" });
  });

  it("then schedules the run of the uploaded context, then waits a poll interval before reading it", async () => {
    const uploaded = started().activityCompleted(activities.upload, UPLOADED);
    const schedule = await replayer.replay(uploaded);
    expect(schedule.newActions).toEqual([
      expect.objectContaining({
        functionName: activities.schedule,
        input: {
          ...INPUT,
          source_location: UPLOADED.source_location,
          run_name: expect.stringMatching(/^bp-[0-9a-f]{40}$/),
        },
      }),
    ]);
    // B-004 The run's name is the same on every replay (a re-run schedule finds the run the registry accepted).
    const again = await replayer.replay(uploaded);
    expect((again.newActions[0] as unknown as { input: { run_name: string } }).input.run_name).toBe(
      (schedule.newActions[0] as unknown as { input: { run_name: string } }).input.run_name,
    );
    const history = scheduled();
    const waiting = await replayer.replay(history);
    expect(waiting.newActions).toEqual([
      expect.objectContaining({ actionType: ActionType.CreateTimer, fireAt: history.fireAt(10) }),
    ]);
    expect(waiting.customStatus).toEqual({
      step: "run",
      context_digest: UPLOADED.context_digest,
      run_id: "ca1",
      run_status: "Queued",
    });
  });

  it("B-004 a run in progress shows its state and log tail; a succeeded run ends with the image pinned by digest", async () => {
    const running = scheduled().timerFired(10).activityCompleted(activities.read, poll("Running"));
    const mid = await replayer.replay(running);
    expect(mid.customStatus).toMatchObject({
      step: "run",
      run_status: "Running",
      log_tail: "Queued a build with ID: ca1",
    });
    const done = await replayer.replay(
      running
        .timerFired(10)
        .activityCompleted(
          activities.read,
          poll("Succeeded", { output_image: { repository: "blastplane-jobapi", tag: "ca1", digest: DIGEST } }),
        ),
    );
    expect(done.isDone).toBe(true);
    expect(done.output).toMatchObject({
      outcome: "succeeded",
      step: "done",
      run_id: "ca1",
      image_digest: DIGEST,
      image: `blastplanecr.azurecr.io/blastplane-jobapi@${DIGEST}`,
    });
  });

  it("a failed run fails the operation with the run's error and its log's last lines", async () => {
    const log =
      "step 1\nstep 2\nfailed to solve: failed to read dockerfile: open jobapi/Dockerfile: no such file or directory";
    const state = await replayer.replay(
      scheduled()
        .timerFired(10)
        .activityCompleted(
          activities.read,
          poll("Failed", { error: "failed during run, err: exit status 1", log_tail: log }),
        ),
    );
    expect(state.isDone).toBe(true);
    expect(state.output).toMatchObject({
      outcome: "failed",
      step: "run",
      run_id: "ca1",
      error:
        "registry run ca1 failed: failed during run, err: exit status 1; log: step 1 | step 2 | failed to solve: failed to read dockerfile: open jobapi/Dockerfile: no such file or directory",
    });
  });

  it("a run that does not end within its timeout (and a minute's grace) fails the operation naming the timeout", async () => {
    const quick = { ...INPUT, timeout_seconds: 1 };
    // Upload and schedule take 2 s; the deadline is 61 s after the start; the run stays Running.
    let history = new OrchestrationHistory(Orchestrations.buildImages, quick, START)
      .activityCompleted(activities.upload, UPLOADED)
      .activityCompleted(activities.schedule, { run_id: "ca1" }, 1);
    for (let i = 0; i < 5; i++) history = history.timerFired(10).activityCompleted(activities.read, poll("Running"), 0);
    history = history.timerFired(9).activityCompleted(activities.read, poll("Running"), 0);
    const state = await replayer.replay(history);
    expect(state.isDone).toBe(true);
    expect(state.output).toMatchObject({
      outcome: "failed",
      step: "run",
      error: "registry run ca1 did not finish within 1 s",
    });
  });
});
