import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import * as df from "durable-functions";
import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import {
  type AppliedJobApi,
  createApplyJobApiActivity,
  createReadJobApiRolloutActivity,
  type DeployJobApiInput,
} from "../../shared/cluster/job-api-deploy-activities.js";
import { type RolloutView, rolloutFailure } from "../../shared/cluster/job-api-deploy.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { clusterKubeConfig } from "../composition/cluster-deps.js";

export const DeployJobApiActivities = {
  apply: "applyJobApiManifests",
  readRollout: "readJobApiRollout",
} as const;

const deps = () => ({ kubeConfig: clusterKubeConfig, logger: appContext.logger });

/** An activity whose refusals for want of a role name the role and become `role_assignment.missing` events. */
function explained<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return explainCloudAuthorization(fn, reportMissingRoles(appContext.events, appContext.logger, "functions.activity"));
}

const applyJobApi = df.app.activity(DeployJobApiActivities.apply, {
  handler: explained((input: Pick<DeployJobApiInput, "values" | "force">) => createApplyJobApiActivity(deps())(input)),
});
// Called by name with retries (`callActivityWithRetry`), so its handle is not kept.
df.app.activity(DeployJobApiActivities.readRollout, {
  handler: explained(async (input: { namespace: string; name: string }) => {
    const view = await createReadJobApiRolloutActivity(deps())(input);
    // The rollout done, the dashboard's next job-API call looks for the deployed job API again.
    if (view.state === "complete") appContext.jobApiTargets.invalidate();
    return view;
  }),
});

/** Reads of the rollout retried on a transient failure (an API server restarting, a 429). */
const READ_RETRY = new df.RetryOptions(5000, 3);

/** The library words an activity failure as "<reason> \n <details>": keep the reason alone. */
function reasonOf(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error);
}

function rolloutSummary(view: RolloutView) {
  return {
    state: view.state,
    generation: view.generation,
    observed_generation: view.observed_generation,
    replicas: view.replicas,
    updated_replicas: view.updated_replicas,
    available_replicas: view.available_replicas,
    pods: view.pods,
  };
}

/**
 * Deploys the job API: server-side apply of its manifests (the Deployment pinned by digest), then
 * waits on durable timers for the rollout (the new generation observed, every replica updated and
 * available). A rollout not done within the timeout fails the operation with each pod's reason
 * (ImagePullBackOff, CrashLoopBackOff, Unschedulable…). The step reached is the custom status, so
 * the operation shows it; a host restart resumes from the history (the apply is not repeated, and
 * repeating it would change nothing).
 */
export const deployJobApi: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<DeployJobApiInput>();
  const started = context.df.currentUtcDateTime.getTime();
  const base = { image_digest: input.values.image_digest, namespace: input.values.namespace };
  context.df.setCustomStatus({ step: "apply", ...base });
  let applied: AppliedJobApi;
  try {
    applied = yield applyJobApi({ values: input.values, force: input.force });
  } catch (error) {
    return { outcome: "failed", step: "apply", error: reasonOf(error), ...base };
  }
  const deadline = started + input.rollout_timeout_seconds * 1000;
  let reapplied = false;
  for (;;) {
    let view: RolloutView;
    try {
      view = yield context.df.callActivityWithRetry(DeployJobApiActivities.readRollout, READ_RETRY, applied.deployment);
    } catch (error) {
      return { outcome: "failed", step: "rollout", error: reasonOf(error), ...base };
    }
    context.df.setCustomStatus({ step: "rollout", ...base, rollout: rolloutSummary(view) });
    if (view.state === "complete")
      return {
        outcome: "succeeded",
        step: "done",
        ...base,
        objects: applied.applied.length,
        rollout: rolloutSummary(view),
      };
    const now = context.df.currentUtcDateTime.getTime();
    // The Deployment gone mid-rollout (deleted by hand, or a cluster that came back empty, as the
    // local one does after a restart): applied once more, since applying is idempotent; gone twice fails.
    if (view.state === "missing" && !reapplied && now < deadline) {
      reapplied = true;
      context.df.setCustomStatus({ step: "apply", ...base, reapplied: true });
      try {
        applied = yield applyJobApi({ values: input.values, force: input.force });
      } catch (error) {
        return { outcome: "failed", step: "apply", error: reasonOf(error), ...base };
      }
      continue;
    }
    if (view.state === "missing" || now >= deadline)
      return {
        outcome: "failed",
        step: "rollout",
        error: rolloutFailure(view, input.rollout_timeout_seconds),
        ...base,
        rollout: rolloutSummary(view),
      };
    yield context.df.createTimer(new Date(Math.min(deadline, now + input.poll_seconds * 1000)));
  }
};

df.app.orchestration(Orchestrations.deployJobApi, deployJobApi);
