import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import * as df from "durable-functions";
import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import type { ClusterOperationInput, ClusterStep, StepProgress } from "../../shared/cluster/cluster-operation.js";
import { stepsOf } from "../../shared/cluster/cluster-operation.js";
import type { ClusterSummary, StepPoll, StepStart } from "../../shared/cluster/cluster-provisioning.js";
import type { AssignmentResult } from "../../shared/cluster/role-assignments.js";
import { runtimeAssignments } from "../../shared/cluster/role-assignments.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { clusterProvisioning, roleAssignments } from "../composition/aks-deps.js";

export const ClusterActivities = {
  startStep: "startClusterStep",
  pollStep: "pollClusterStep",
  assignRoles: "assignClusterRoles",
  summary: "readClusterSummary",
} as const;

/** How long one step may run before the operation gives up on it (AKS creates in 5–15 minutes). */
export const STEP_TIMEOUT_SECONDS = 60 * 60;
/** The shortest wait between polls, whatever Retry-After says (0 would spin the orchestrator). */
export const MIN_POLL_SECONDS = 1;

type StepInput = ClusterOperationInput & { step: ClusterStep };
type PollInput = StepInput & { start: StepStart };

/** An activity whose refusals for want of a role name the role and become `role_assignment.missing` events. */
function explained<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return explainCloudAuthorization(fn, reportMissingRoles(appContext.events, appContext.logger, "cluster.activity"));
}

const startStepActivity = df.app.activity(ClusterActivities.startStep, {
  handler: explained(async (input: StepInput): Promise<StepStart> => {
    const arm = clusterProvisioning();
    switch (input.step) {
      case "cluster":
        return arm.startCluster(input.target);
      case "blast_pool":
        return arm.startBlastPool(input.target);
      case "stop":
      case "start":
      case "delete":
        return arm.startClusterAction(input.target, input.step);
      default:
        throw new Error(`step ${input.step} has no Resource Manager change`);
    }
  }),
});

const pollStepActivity = df.app.activity(ClusterActivities.pollStep, {
  handler: explained(async (input: PollInput): Promise<StepPoll> => {
    const arm = clusterProvisioning();
    if (input.start.kind === "started") return arm.pollOperation(input.target, input.start.poll_url);
    if (input.start.kind === "running") return arm.pollResource(input.target, input.start.resource);
    return { status: "Succeeded", retry_after_seconds: 0 };
  }),
});

const assignRolesActivity = df.app.activity(ClusterActivities.assignRoles, {
  handler: explained(async (input: ClusterOperationInput): Promise<AssignmentResult[]> => {
    const summary = await clusterProvisioning().summary(input.target);
    const wanted = runtimeAssignments({
      subscription_id: input.target.subscription_id,
      resource_group: input.target.resource_group,
      cluster_name: input.target.cluster_name,
      ...input.roles,
      kubelet_object_id: summary?.kubelet_object_id ?? null,
    });
    return roleAssignments().assign(wanted);
  }),
});

const summaryActivity = df.app.activity(ClusterActivities.summary, {
  handler: explained(
    (input: ClusterOperationInput): Promise<ClusterSummary | null> => clusterProvisioning().summary(input.target),
  ),
});

/** The library words an activity failure as "<reason> \n <details>": keep the reason alone. */
function reason(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error);
}

/**
 * A cluster operation (provision, scale the BLAST pool, stop, start, delete): its steps in order,
 * each reported in the custom status. A Resource Manager change is started by a short activity and
 * then polled on durable timers, waiting what ARM's `Retry-After` says, so the host may restart at
 * any point: the orchestration replays to where it was and polls on. A failed step ends the
 * operation `failed`, naming the step and ARM's reason; running it again resumes there, because
 * every step first reads what exists and changes only what differs.
 */
const clusterOperation: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<ClusterOperationInput>();
  const steps: StepProgress[] = stepsOf(input.action).map((name) => ({ name, state: "pending" }));
  const report = (phase: string) =>
    context.df.setCustomStatus({ phase, action: input.action, cluster: input.target.cluster_name, steps });
  const fail = (step: StepProgress, error: string) => {
    step.state = "failed";
    step.error = error;
    report("failed");
    return { outcome: "failed", step: step.name, error: `step ${step.name} failed: ${error}`, steps };
  };
  for (const step of steps) {
    step.state = "running";
    report(step.name);
    try {
      if (step.name === "role_assignments") {
        const assignments: AssignmentResult[] = yield assignRolesActivity(input);
        step.assignments = assignments;
        step.state = "succeeded";
        continue;
      }
      const start: StepStart = yield startStepActivity({ ...input, step: step.name });
      if (start.kind !== "done") {
        const deadline = context.df.currentUtcDateTime.getTime() + STEP_TIMEOUT_SECONDS * 1000;
        let poll: StepPoll = { status: "InProgress", retry_after_seconds: start.retry_after_seconds };
        while (poll.status === "InProgress") {
          if (context.df.currentUtcDateTime.getTime() >= deadline)
            return fail(step, `Resource Manager did not finish within ${STEP_TIMEOUT_SECONDS} seconds`);
          const wait = Math.max(MIN_POLL_SECONDS, poll.retry_after_seconds);
          yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + wait * 1000));
          poll = yield pollStepActivity({ ...input, step: step.name, start });
        }
        if (poll.status !== "Succeeded") return fail(step, poll.error ?? `the operation ended ${poll.status}`);
      }
      step.state = "succeeded";
    } catch (error) {
      return fail(step, reason(error));
    }
  }
  report("summarising");
  let cluster: ClusterSummary | null = null;
  try {
    cluster = input.action === "delete" ? null : yield summaryActivity(input);
  } catch {
    // The change is done; a summary that could not be read leaves the result without it.
  }
  report("succeeded");
  const missing = steps.flatMap((s) => s.assignments ?? []).filter((a) => a.state === "missing");
  return { outcome: "succeeded", cluster, steps, missing_role_assignments: missing.length };
};

df.app.orchestration(Orchestrations.provisionCluster, clusterOperation);
