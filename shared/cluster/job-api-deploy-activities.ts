import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "../logging/logger.js";
import { type AppliedObject, applyManifests, readRollout, type RolloutView } from "./job-api-deploy.js";
import { deploymentOf, type JobApiValues, jobApiValuesSchema, renderJobApiManifests } from "./job-api-manifests.js";

/** The deploy orchestration's input: what to render, and whether to take over fields others own. */
export interface DeployJobApiInput {
  values: JobApiValues;
  force: boolean;
  /** How long the rollout may take before the operation fails with the pods' reasons. */
  rollout_timeout_seconds: number;
  /** How long the orchestration waits between two reads of the rollout. */
  poll_seconds: number;
}

/** What the apply activity returns: the objects written and the Deployment whose rollout to wait for. */
export interface AppliedJobApi {
  applied: AppliedObject[];
  deployment: { namespace: string; name: string };
}

/** What the deploy activities are built from. */
export interface JobApiDeployDependencies {
  /**
   * The cluster's client configuration, made per call: on AKS it carries a fresh Entra token of the
   * managed identity for the cluster's server application (never a static admin kubeconfig).
   */
  kubeConfig: () => Promise<KubeConfig>;
  logger: Logger;
}

/**
 * Renders the job API's manifests with the input's values and server-side applies them (field
 * manager `blastplane`). Applying the same values again changes nothing, so a resumed or retried
 * deploy is safe.
 */
export function createApplyJobApiActivity(deps: JobApiDeployDependencies) {
  return async (input: Pick<DeployJobApiInput, "values" | "force">): Promise<AppliedJobApi> => {
    const values = jobApiValuesSchema.parse(input.values);
    const objects = renderJobApiManifests(values);
    const deployment = deploymentOf(objects);
    const applied = await applyManifests(await deps.kubeConfig(), objects, { force: input.force });
    deps.logger.info("job API manifests applied", {
      namespace: values.namespace,
      objects: applied.length,
      image_digest: values.image_digest,
      force: input.force,
    });
    return {
      applied,
      deployment: { namespace: values.namespace, name: deployment.metadata.name },
    };
  };
}

/** Reads the job API Deployment's rollout and its pods' reasons. */
export function createReadJobApiRolloutActivity(deps: JobApiDeployDependencies) {
  return async (input: { namespace: string; name: string }): Promise<RolloutView> =>
    readRollout(await deps.kubeConfig(), input.namespace, input.name);
}
