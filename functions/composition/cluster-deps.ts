import { explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import { applyManifests, readRollout } from "../../shared/cluster/job-api-deploy.js";
import { createJobApiDeployService, type JobApiDeployService } from "../../shared/cluster/job-api-deploy-service.js";
import { renderJobApiManifests } from "../../shared/cluster/job-api-manifests.js";
import { DependencyUnavailableError, DomainError } from "../../shared/errors.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { createWorkspaceStore } from "../../shared/workspace/workspace.js";
import { appContext } from "./app-context.js";
import { clusterKubeConfig, jobApiNamespace } from "./cluster-kube.js";
import { notifyConfig } from "./console-deps.js";
import type { ServiceScope } from "./dashboard-deps.js";

export { clusterKubeConfig, jobApiNamespace };

/** The job API deploy service for one request. */
export function jobApiDeployService(scope: Pick<ServiceScope, "logger" | "durable">): JobApiDeployService {
  const { config } = appContext;
  return createJobApiDeployService({
    orchestrations: scope.durable(),
    workspace: createWorkspaceStore(config.storage),
    audit: appContext.audit,
    logger: scope.logger,
    settings: {
      namespace: jobApiNamespace(),
      registryLoginServer: config.jobApiDeploy.registryLoginServer,
      workloadIdentityClientId: config.jobApiDeploy.workloadIdentityClientId,
      keyVaultUrl: config.jobApiDeploy.keyVaultUrl,
      appSubnetCidr: config.jobApiDeploy.appSubnetCidr,
      authClientId: config.auth.clientId,
      authTenantId: config.auth.tenantId,
      // The console's links and the terminal page live in the same web app.
      webAppOrigin: notifyConfig.consoleBaseUrl ? new URL(notifyConfig.consoleBaseUrl).origin : undefined,
      terminalIngress: config.jobApiDeploy.terminalIngress,
      rolloutTimeoutSeconds: config.jobApiDeploy.rolloutTimeoutSeconds,
      pollSeconds: config.jobPollIntervalSeconds,
    },
    // A refusal for want of a role names the role (and is reported as role_assignment.missing).
    dryRun: explainCloudAuthorization(
      async (values, force) => {
        await applyManifests(await clusterKubeConfig(), renderJobApiManifests(values), { force, dryRun: true });
      },
      reportMissingRoles(appContext.events, scope.logger, "functions.http"),
    ),
    readRollout: explainCloudAuthorization(
      async (namespace: string) => {
        try {
          return await readRollout(await clusterKubeConfig(), namespace, "blastplane-jobapi");
        } catch (error) {
          if (error instanceof DomainError) throw error;
          // A refusal for want of a role is explained by the wrapper; anything else means unreachable.
          if ((error as { code?: unknown }).code === 403) throw error;
          throw new DependencyUnavailableError("the cluster's API server could not be reached", undefined, {
            cause: error,
          });
        }
      },
      reportMissingRoles(appContext.events, scope.logger, "functions.http"),
    ),
  });
}
