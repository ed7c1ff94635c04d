import type { KubeConfig } from "@kubernetes/client-node";
import { z } from "zod";
import { DependencyUnavailableError } from "../../shared/errors.js";
import { actionSettingsShape } from "../../shared/ops/actions/action-settings.js";

/**
 * The cluster settings, validated by the same rules as the console's configuration (which reads
 * them too, for its `redeploy_job_api`): read here without the console's composition, which the
 * app context (a user of these) must not import.
 */
const settings = z
  .object({
    SVC_KUBECONFIG: actionSettingsShape.SVC_KUBECONFIG,
    SVC_JOB_API_NAMESPACE: actionSettingsShape.SVC_JOB_API_NAMESPACE,
  })
  .parse(process.env);

/**
 * The cluster's client configuration for the deploy: the kubeconfig `SVC_KUBECONFIG` names (the
 * local stack writes one for its local cluster). Without one there is no cluster to deploy to.
 */
export async function clusterKubeConfig(): Promise<KubeConfig> {
  if (!settings.SVC_KUBECONFIG) throw new DependencyUnavailableError("no cluster is configured (SVC_KUBECONFIG)");
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromFile(settings.SVC_KUBECONFIG);
  return kc;
}

/** Whether a cluster is configured (`SVC_KUBECONFIG`). */
export function clusterConfigured(): boolean {
  return settings.SVC_KUBECONFIG !== undefined;
}

/** The namespace the job API is deployed into (`SVC_JOB_API_NAMESPACE`). */
export function jobApiNamespace(): string {
  return settings.SVC_JOB_API_NAMESPACE;
}
