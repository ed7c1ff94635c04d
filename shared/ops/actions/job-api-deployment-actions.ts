import type { AppsV1Api, V1Deployment } from "@kubernetes/client-node";
import { ActionNotConfiguredError, ActionStateChangedError } from "./action-executor.js";
import { type ActionHandler, actionHandler } from "./action-runner.js";

/** The annotation `kubectl rollout restart` sets on the pod template; changing it rolls every pod. */
export const RESTARTED_AT_ANNOTATION = "kubectl.kubernetes.io/restartedAt";

/** The job API's Deployment on a cluster, through `@kubernetes/client-node` (loaded on first use). */
export interface JobApiDeploymentOptions {
  /** A kubeconfig file (`SVC_KUBECONFIG`) naming the cluster and the credentials the Functions app uses. */
  kubeconfigPath: string;
  namespace: string;
  deployment: string;
}

export function createJobApiDeployment(options: JobApiDeploymentOptions) {
  let api: Promise<{ apps: AppsV1Api; patchOptions: unknown; isNotFound: (error: unknown) => boolean }> | undefined;
  const client = () => {
    api ??= import("@kubernetes/client-node").then(
      ({ KubeConfig, AppsV1Api, ApiException, PatchStrategy, setHeaderOptions }) => {
        const kc = new KubeConfig();
        kc.loadFromFile(options.kubeconfigPath);
        return {
          apps: kc.makeApiClient(AppsV1Api),
          // What kubectl sends: a strategic merge patch.
          patchOptions: setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
          isNotFound: (error: unknown) => error instanceof ApiException && error.code === 404,
        };
      },
    );
    return api;
  };
  return {
    namespace: options.namespace,
    deployment: options.deployment,
    /** The Deployment, or undefined when the namespace has none of that name. */
    async read(): Promise<V1Deployment | undefined> {
      const { apps, isNotFound } = await client();
      try {
        return await apps.readNamespacedDeployment({ name: options.deployment, namespace: options.namespace });
      } catch (error) {
        if (isNotFound(error)) return undefined;
        throw error;
      }
    },
    /** Sets the pod template's restartedAt annotation to `at`, as `kubectl rollout restart` does (the same value twice is one rollout). */
    async restart(at: string): Promise<V1Deployment> {
      const { apps, patchOptions } = await client();
      const body = { spec: { template: { metadata: { annotations: { [RESTARTED_AT_ANNOTATION]: at } } } } };
      return apps.patchNamespacedDeployment(
        { name: options.deployment, namespace: options.namespace, body },
        patchOptions as never,
      );
    },
  };
}

export type JobApiDeployment = ReturnType<typeof createJobApiDeployment>;

/** What redeploy_job_api will do: the restartedAt value, fixed in the plan so a resumed execution rolls once. */
export interface RedeployPlan {
  namespace: string;
  deployment: string;
  restarted_at: string;
}

export const REDEPLOY_JOB_API_SETTINGS = ["SVC_KUBECONFIG"] as const;

/**
 * redeploy_job_api: a rollout restart of the job API Deployment. Without a cluster configured
 * (the local stack: the job API is one process its launcher supervises) it answers not configured.
 */
export function createRedeployJobApiHandler(deps: {
  deployment: JobApiDeployment | undefined;
  now?: () => Date;
}): ActionHandler<unknown> {
  const now = deps.now ?? (() => new Date());
  return actionHandler<RedeployPlan>({
    async plan(action) {
      if (!deps.deployment) throw new ActionNotConfiguredError(action.action_type, REDEPLOY_JOB_API_SETTINGS);
      const current = await deps.deployment.read();
      if (!current)
        throw new ActionStateChangedError(
          action.action_type,
          action.target,
          { exists: false },
          `the Deployment ${deps.deployment.namespace}/${deps.deployment.deployment} no longer exists`,
        );
      return {
        namespace: deps.deployment.namespace,
        deployment: deps.deployment.deployment,
        restarted_at: now().toISOString(),
      };
    },
    async apply(plan) {
      if (!deps.deployment) throw new ActionNotConfiguredError("redeploy_job_api", REDEPLOY_JOB_API_SETTINGS);
      const patched = await deps.deployment.restart(plan.restarted_at);
      return {
        namespace: plan.namespace,
        deployment: plan.deployment,
        restarted_at: plan.restarted_at,
        generation: patched.metadata?.generation ?? null,
      };
    },
  });
}
