import type { OrchestrationContext, OrchestrationHandler } from "durable-functions";
import * as df from "durable-functions";
import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import {
  type BuildImagesInput,
  buildRunName,
  createImageBuildActivities,
  lastLines,
  type RunPoll,
  type UploadedContext,
} from "../../shared/cluster/image-build.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { appContext } from "../composition/app-context.js";
import { registryBuilds } from "../composition/aks-deps.js";

export const BuildImagesActivities = {
  upload: "uploadBuildContext",
  schedule: "scheduleImageRun",
  read: "readImageRun",
} as const;

const activities = createImageBuildActivities({
  registry: registryBuilds,
  contextDir: () => appContext.config.imageBuild.contextDir,
});

/** An activity whose refusals for want of a role name the role and become `role_assignment.missing` events. */
function explained<A extends unknown[], R>(fn: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return explainCloudAuthorization(fn, reportMissingRoles(appContext.events, appContext.logger, "images.activity"));
}

// Called by name with retries (`callActivityWithRetry`), so their handles are not kept.
df.app.activity(BuildImagesActivities.upload, { handler: explained(activities.upload) });
df.app.activity(BuildImagesActivities.schedule, { handler: explained(activities.schedule) });
df.app.activity(BuildImagesActivities.read, { handler: explained(activities.read) });

/** Each activity is retried on a transient failure (a 429, a 5xx, a connection reset): 3 attempts, 5 s apart. */
export const BUILD_RETRY = new df.RetryOptions(5000, 3);
/** The orchestration waits this much beyond the run's own timeout before it gives up on the run. */
export const RUN_GRACE_SECONDS = 60;

/** The library words an activity failure as "<reason> \n <details>": keep the reason alone. */
function reasonOf(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? "").trim() : String(error);
}

/**
 * Builds the job API / shard worker image in the workspace's registry (spec §1 items 1 and 3;
 * ledger B-004, B-012): uploads the build context through the registry's upload URL, schedules a
 * registry run of `jobapi/Dockerfile`, then polls the run on durable timers, its state and the
 * tail of its log in the custom status. The result is the image pinned by digest (never a moving
 * tag), what `POST /api/jobapi/deploy` takes. A failed run fails the operation with the run's
 * error and its log's last lines. A host restart replays to where the orchestration was: the
 * upload and the run are not repeated once their results are in the history, and the run is
 * scheduled under a name of this build's ({@link buildRunName}), so a schedule interrupted after
 * the registry accepted it finds that run when it runs again.
 */
export const buildImages: OrchestrationHandler = function* (context: OrchestrationContext) {
  const input = context.df.getInput<BuildImagesInput>();
  const started = context.df.currentUtcDateTime.getTime();
  const failed = (step: string, error: string, extra: Record<string, unknown> = {}) => {
    const result = { outcome: "failed", step, error, ...extra };
    context.df.setCustomStatus(result);
    return result;
  };
  context.df.setCustomStatus({ step: "upload" });
  let uploaded: UploadedContext;
  try {
    uploaded = yield context.df.callActivityWithRetry(BuildImagesActivities.upload, BUILD_RETRY, input);
  } catch (error) {
    return failed("upload", `the build context could not be uploaded: ${reasonOf(error)}`);
  }
  const base = { context_digest: uploaded.context_digest };
  context.df.setCustomStatus({ step: "schedule", ...base });
  let run: { run_id: string };
  try {
    run = yield context.df.callActivityWithRetry(BuildImagesActivities.schedule, BUILD_RETRY, {
      ...input,
      source_location: uploaded.source_location,
      // One name per build: a schedule run again (a host killed before it was recorded) finds its run.
      run_name: buildRunName(context.df.instanceId, new Date(started).toISOString(), uploaded.context_digest),
    });
  } catch (error) {
    return failed("schedule", `the registry refused the build run: ${reasonOf(error)}`, base);
  }
  const at = { ...base, run_id: run.run_id };
  context.df.setCustomStatus({ step: "run", ...at, run_status: "Queued" });
  const deadline = started + (input.timeout_seconds + RUN_GRACE_SECONDS) * 1000;
  let poll: RunPoll;
  for (;;) {
    const now = context.df.currentUtcDateTime.getTime();
    if (now >= deadline)
      return failed("run", `registry run ${run.run_id} did not finish within ${input.timeout_seconds} s`, at);
    yield context.df.createTimer(new Date(Math.min(deadline, now + input.poll_seconds * 1000)));
    try {
      poll = yield context.df.callActivityWithRetry(BuildImagesActivities.read, BUILD_RETRY, {
        registry: input.registry,
        run_id: run.run_id,
      });
    } catch (error) {
      return failed("run", `registry run ${run.run_id} could not be read: ${reasonOf(error)}`, at);
    }
    context.df.setCustomStatus({ step: "run", ...at, run_status: poll.status, log_tail: poll.log_tail });
    if (poll.terminal) break;
  }
  const log = { run_status: poll.status, log_tail: poll.log_tail };
  if (poll.status !== "Succeeded")
    return failed(
      "run",
      `registry run ${run.run_id} ${poll.status.toLowerCase()}${poll.error ? `: ${poll.error}` : ""}` +
        `${poll.log_tail ? `; log: ${lastLines(poll.log_tail)}` : ""}`,
      { ...at, ...log },
    );
  if (!poll.output_image?.digest.startsWith("sha256:"))
    return failed("run", `registry run ${run.run_id} succeeded but reported no image digest`, { ...at, ...log });
  const result = {
    outcome: "succeeded",
    step: "done",
    ...at,
    ...log,
    image_digest: poll.output_image.digest,
    image: `${input.login_server}/${input.repository}@${poll.output_image.digest}`,
  };
  context.df.setCustomStatus(result);
  return result;
};

df.app.orchestration(Orchestrations.buildImages, buildImages);
