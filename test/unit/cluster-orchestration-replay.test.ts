import { beforeAll, describe, expect, it } from "vitest";
import type { ClusterOperationInput } from "../../shared/cluster/cluster-operation.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import {
  ActionType,
  loadOrchestrations,
  OrchestrationHistory,
  type OrchestrationReplayer,
} from "../support/orchestration-replay.js";

/** The cluster operation (provision, scale, stop, start, delete) replayed through the real durable-functions library. */
const MODULE = "functions/orchestrations/cluster-ops.ts";

let replayer: OrchestrationReplayer;
let activities: { startStep: string; pollStep: string; assignRoles: string; summary: string };
let timeoutSeconds: number;

beforeAll(async () => {
  replayer = await loadOrchestrations([MODULE]);
  activities = replayer.modules[MODULE]?.ClusterActivities as typeof activities;
  timeoutSeconds = replayer.modules[MODULE]?.STEP_TIMEOUT_SECONDS as number;
});

const target = {
  subscription_id: "11111111-2222-4333-8444-555555555555",
  resource_group: "rg-blast",
  location: "eastus",
  cluster_name: "aks-blast",
  blast_vm_size: "Standard_E8s_v5",
  blast_node_count: 2,
  system_vm_size: "Standard_D2s_v5",
};
const provision: ClusterOperationInput = { action: "provision", target, roles: { registry: "blastacr01" } };
const started = {
  kind: "started",
  poll_url: "https://management.azure.com/op/1?api-version=x",
  retry_after_seconds: 7,
};
const summary = { fqdn: "aks.example", power_state: "Running", provisioning_state: "Succeeded" };

function activity(name: string, input: unknown) {
  return { actionType: ActionType.CallActivity, functionName: name, input };
}

const history = (input: ClusterOperationInput = provision) =>
  new OrchestrationHistory(Orchestrations.provisionCluster, input);

describe("cluster operation orchestration (replay)", () => {
  it("B-003 B-011 starts the cluster step first and reports each step's progress", async () => {
    const state = await replayer.replay(history());
    expect(state.newActions).toEqual([activity(activities.startStep, { ...provision, step: "cluster" })]);
    expect(state.customStatus).toEqual({
      phase: "cluster",
      action: "provision",
      cluster: "aks-blast",
      steps: [
        { name: "cluster", state: "running" },
        { name: "blast_pool", state: "pending" },
        { name: "role_assignments", state: "pending" },
      ],
    });
  });

  it("polls an accepted change on durable timers, waiting what Retry-After says each time", async () => {
    const h = history().activityCompleted(activities.startStep, started);
    let state = await replayer.replay(h);
    expect(state.newActions).toEqual([{ actionType: ActionType.CreateTimer, fireAt: h.fireAt(7), isCanceled: false }]);
    h.timerFired(7);
    state = await replayer.replay(h);
    expect(state.newActions).toEqual([
      activity(activities.pollStep, { ...provision, step: "cluster", start: started }),
    ]);
    h.activityCompleted(activities.pollStep, { status: "InProgress", retry_after_seconds: 3 });
    state = await replayer.replay(h);
    expect(state.newActions).toEqual([{ actionType: ActionType.CreateTimer, fireAt: h.fireAt(3), isCanceled: false }]);
    // Retry-After 0 still waits a second: the orchestrator never spins.
    h.timerFired(3).activityCompleted(activities.pollStep, { status: "InProgress", retry_after_seconds: 0 });
    state = await replayer.replay(h);
    expect(state.newActions).toEqual([{ actionType: ActionType.CreateTimer, fireAt: h.fireAt(1), isCanceled: false }]);
  });

  it("runs every step in order and ends succeeded with the cluster and the role assignments", async () => {
    const assignments = [{ role: "AcrPull", state: "missing", command: "az role assignment create …" }];
    const h = history()
      .activityCompleted(activities.startStep, started)
      .timerFired(7)
      .activityCompleted(activities.pollStep, { status: "Succeeded", retry_after_seconds: 0 });
    let state = await replayer.replay(h);
    expect(state.newActions).toEqual([activity(activities.startStep, { ...provision, step: "blast_pool" })]);
    h.activityCompleted(activities.startStep, { kind: "done" });
    state = await replayer.replay(h);
    expect(state.newActions).toEqual([activity(activities.assignRoles, provision)]);
    h.activityCompleted(activities.assignRoles, assignments);
    state = await replayer.replay(h);
    expect(state.newActions).toEqual([activity(activities.summary, provision)]);
    h.activityCompleted(activities.summary, summary);
    state = await replayer.replay(h);
    expect(state.isDone).toBe(true);
    expect(state.output).toEqual({
      outcome: "succeeded",
      cluster: summary,
      missing_role_assignments: 1,
      steps: [
        { name: "cluster", state: "succeeded" },
        { name: "blast_pool", state: "succeeded" },
        { name: "role_assignments", state: "succeeded", assignments },
      ],
    });
  });

  it("ARM failing mid-operation ends it failed, naming the step and ARM's reason", async () => {
    const h = history()
      .activityCompleted(activities.startStep, { kind: "done" })
      .activityCompleted(activities.startStep, started)
      .timerFired(7)
      .activityCompleted(activities.pollStep, {
        status: "Failed",
        retry_after_seconds: 0,
        error: "QuotaExceeded: Operation could not be completed as it results in exceeding approved quota.",
      });
    const state = await replayer.replay(h);
    expect(state.isDone).toBe(true);
    expect(state.output).toMatchObject({
      outcome: "failed",
      step: "blast_pool",
      error:
        "step blast_pool failed: QuotaExceeded: Operation could not be completed as it results in exceeding approved quota.",
    });
  });

  it("missing Contributor: the start activity's role message becomes the operation's error for that step", async () => {
    const message =
      "AuthorizationFailed: the managed identity does not have authorization to perform Microsoft.ContainerService/managedClusters/write over /subscriptions/x/resourceGroups/rg-blast; assign it the Contributor role on /subscriptions/x/resourceGroups/rg-blast (a new role assignment takes 1 to 5 minutes to take effect)";
    const state = await replayer.replay(history().activityFailed(activities.startStep, message));
    expect(state.output).toMatchObject({
      outcome: "failed",
      step: "cluster",
      error: `step cluster failed: ${message}`,
    });
  });

  it("a host restart mid-provision replays to the same point: the next action is the poll, not a second start", async () => {
    const h = history().activityCompleted(activities.startStep, started).timerFired(7);
    const first = await replayer.replay(h);
    const again = await replayer.replay(h);
    expect(again.newActions).toEqual(first.newActions);
    expect(again.newActions).toEqual([
      activity(activities.pollStep, { ...provision, step: "cluster", start: started }),
    ]);
    expect(again.actions.filter((a) => a.functionName === activities.startStep)).toHaveLength(1);
  });

  it("gives up on a step Resource Manager never finishes", async () => {
    const h = history().activityCompleted(activities.startStep, {
      kind: "running",
      resource: "cluster",
      retry_after_seconds: timeoutSeconds,
    });
    h.timerFired(timeoutSeconds).activityCompleted(activities.pollStep, {
      status: "InProgress",
      retry_after_seconds: 10,
    });
    const state = await replayer.replay(h);
    expect(state.output).toMatchObject({
      outcome: "failed",
      step: "cluster",
      error: `step cluster failed: Resource Manager did not finish within ${timeoutSeconds} seconds`,
    });
  });

  it("scale runs the BLAST pool step alone; delete ends without a summary", async () => {
    const scale = await replayer.replay(history({ action: "scale", target }));
    expect(scale.newActions).toEqual([activity(activities.startStep, { action: "scale", target, step: "blast_pool" })]);
    const deleted = await replayer.replay(
      history({ action: "delete", target }).activityCompleted(activities.startStep, { kind: "done" }),
    );
    expect(deleted.output).toEqual({
      outcome: "succeeded",
      cluster: null,
      missing_role_assignments: 0,
      steps: [{ name: "delete", state: "succeeded" }],
    });
  });
});
