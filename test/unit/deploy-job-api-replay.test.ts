import { beforeAll, describe, expect, it } from "vitest";
import type { RolloutView } from "../../shared/cluster/job-api-deploy.js";
import type { DeployJobApiInput } from "../../shared/cluster/job-api-deploy-activities.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { sampleJobApiValues } from "../support/job-api-values.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/**
 * The job API deploy orchestration replayed through the real durable-functions library against
 * hand-built histories: each test is one branch of `functions/orchestrations/deploy-job-api.ts`.
 */
const MODULE = "functions/orchestrations/deploy-job-api.ts";
const START = new Date("2026-01-05T10:00:00.000Z");
const DIGEST = `sha256:${"a".repeat(64)}`;
const INPUT: DeployJobApiInput = {
  values: sampleJobApiValues({ image_digest: DIGEST, web_app_origin: "https://portal.example" }),
  force: false,
  rollout_timeout_seconds: 60,
  poll_seconds: 10,
};
const DEPLOYMENT = { namespace: "blastplane", name: "blastplane-jobapi" };
const APPLIED = { applied: [{ kind: "Deployment", name: "blastplane-jobapi", generation: 2 }], deployment: DEPLOYMENT };

let replayer: OrchestrationReplayer;
let activities: { apply: string; readRollout: string };
beforeAll(async () => {
  replayer = await loadOrchestrations([MODULE]);
  activities = replayer.modules[MODULE]?.DeployJobApiActivities as typeof activities;
});

const started = (input: DeployJobApiInput = INPUT) =>
  new OrchestrationHistory(Orchestrations.deployJobApi, input, START);

function rollout(state: RolloutView["state"], pods: RolloutView["pods"] = []): RolloutView {
  return {
    state,
    generation: 2,
    observed_generation: state === "complete" ? 2 : 1,
    replicas: 1,
    updated_replicas: state === "complete" ? 1 : 0,
    available_replicas: state === "complete" ? 1 : 0,
    pods,
  };
}
const pulling = rollout("progressing", [
  {
    name: "blastplane-jobapi-0123456789-abcde",
    phase: "Pending",
    ready: false,
    reason: "ImagePullBackOff",
    message: `Back-off pulling image "blastplanecr.azurecr.io/blastplane-jobapi@${DIGEST}"`,
    restarts: 0,
  },
]);

describe("deployJobApi replay", () => {
  it("B-027 first applies the manifests with the digest-pinned values, reporting the step", async () => {
    const state = await replayer.replay(started());
    expect(state.isDone).toBe(false);
    expect(state.newActions).toEqual([
      {
        actionType: ActionType.CallActivity,
        functionName: activities.apply,
        input: { values: INPUT.values, force: false },
      },
    ]);
    expect(state.customStatus).toEqual({ step: "apply", image_digest: DIGEST, namespace: "blastplane" });
  });

  it("a refused apply (a field another manager owns) fails the operation at the apply step with the refusal, and reads nothing", async () => {
    const conflict =
      'the apply conflicts with changes made by another field manager: Deployment/blastplane-jobapi .spec.replicas (owned by "kubectl"); deploy again with force to take these fields over';
    const state = await replayer.replay(started().activityFailed(activities.apply, conflict));
    expect(state.isDone).toBe(true);
    expect(state.newActions).toEqual([]);
    expect(state.output).toEqual({
      outcome: "failed",
      step: "apply",
      error: conflict,
      image_digest: DIGEST,
      namespace: "blastplane",
    });
  });

  it("after the apply it reads the rollout (retried on transient failures), and waits a poll interval while it progresses", async () => {
    const applied = started().activityCompleted(activities.apply, APPLIED);
    const first = await replayer.replay(applied);
    expect(first.newActions).toEqual([
      expect.objectContaining({
        actionType: ActionType.CallActivityWithRetry,
        functionName: activities.readRollout,
        input: DEPLOYMENT,
      }),
    ]);
    const progressing = applied.activityCompleted(activities.readRollout, pulling, 2);
    const waiting = await replayer.replay(progressing);
    expect(waiting.newActions).toEqual([
      expect.objectContaining({ actionType: ActionType.CreateTimer, fireAt: progressing.fireAt(10) }),
    ]);
    expect(waiting.customStatus).toMatchObject({
      step: "rollout",
      rollout: { state: "progressing", pods: pulling.pods },
    });
  });

  it("a complete rollout succeeds the operation with the rollout it saw", async () => {
    const state = await replayer.replay(
      started()
        .activityCompleted(activities.apply, APPLIED)
        .activityCompleted(activities.readRollout, pulling)
        .timerFired(10)
        .activityCompleted(activities.readRollout, rollout("complete")),
    );
    expect(state.isDone).toBe(true);
    expect(state.output).toMatchObject({
      outcome: "succeeded",
      step: "done",
      image_digest: DIGEST,
      objects: 1,
      rollout: { state: "complete", available_replicas: 1 },
    });
  });

  it("a rollout still not ready at the timeout fails the operation naming each pod's reason (ImagePullBackOff)", async () => {
    let history = started().activityCompleted(activities.apply, APPLIED);
    // Reads every 10 s from 1 s after the start; the sixth wait ends at the deadline (60 s).
    for (let i = 0; i < 5; i++) history = history.activityCompleted(activities.readRollout, pulling, 0).timerFired(10);
    history = history.activityCompleted(activities.readRollout, pulling, 0).timerFired(9);
    const state = await replayer.replay(history.activityCompleted(activities.readRollout, pulling, 0));
    expect(state.isDone).toBe(true);
    expect(state.output).toMatchObject({ outcome: "failed", step: "rollout" });
    expect((state.output as { error: string }).error).toBe(
      `the job API did not become ready within 60 s: blastplane-jobapi-0123456789-abcde: ImagePullBackOff (Back-off pulling image "blastplanecr.azurecr.io/blastplane-jobapi@${DIGEST}")`,
    );
  });

  it("the last wait ends at the deadline, not a whole poll interval after it", async () => {
    const slow = { ...INPUT, rollout_timeout_seconds: 15 };
    const history = started(slow)
      .activityCompleted(activities.apply, APPLIED, 1)
      .activityCompleted(activities.readRollout, pulling, 1)
      .timerFired(10)
      .activityCompleted(activities.readRollout, pulling, 1);
    const state = await replayer.replay(history);
    // 13 s after the start: the deadline is 2 s away, so the timer fires then.
    expect(state.newActions).toEqual([
      expect.objectContaining({ actionType: ActionType.CreateTimer, fireAt: history.fireAt(2) }),
    ]);
  });

  it("a Deployment gone during the rollout is applied once more (idempotent), and gone twice fails the operation", async () => {
    const gone = started()
      .activityCompleted(activities.apply, APPLIED)
      .activityCompleted(activities.readRollout, rollout("missing"));
    const again = await replayer.replay(gone);
    expect(again.newActions).toEqual([
      {
        actionType: ActionType.CallActivity,
        functionName: activities.apply,
        input: { values: INPUT.values, force: false },
      },
    ]);
    expect(again.customStatus).toMatchObject({ step: "apply", reapplied: true });
    const twice = await replayer.replay(
      gone.activityCompleted(activities.apply, APPLIED).activityCompleted(activities.readRollout, rollout("missing")),
    );
    expect(twice.output).toMatchObject({
      outcome: "failed",
      step: "rollout",
      error: "the job API Deployment is gone from the cluster",
    });
  });
});
