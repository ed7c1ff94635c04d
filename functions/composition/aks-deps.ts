import { readFileSync } from "node:fs";
import { ARM_SCOPE, type ArmConnection } from "../../shared/cluster/arm-connection.js";
import { createClusterProvisioning } from "../../shared/cluster/cluster-provisioning.js";
import { type ClusterService, createClusterService } from "../../shared/cluster/cluster-service.js";
import { createWorkspaceDiscovery } from "../../shared/cluster/discovery.js";
import { createImageBuildService, type ImageBuildService } from "../../shared/cluster/image-build.js";
import { createRegistryBuilds, type RegistryBuilds } from "../../shared/cluster/registry-builds.js";
import { createRoleAssignments } from "../../shared/cluster/role-assignments.js";
import { createWorkspaceStore } from "../../shared/workspace/workspace.js";
import { NotFoundError } from "../../shared/errors.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { appContext } from "./app-context.js";
import { databaseCatalog, type ServiceScope, workspaceService } from "./dashboard-deps.js";

/** Resource Manager as the app reaches it: the managed identity, and the endpoint override of the local stack. */
export function armConnection(): ArmConnection {
  const { armEndpoint: endpoint, armCaFile } = appContext.config.cluster;
  // The local Resource Manager's certificate is its own CA's: trusted for ARM's requests only
  // (the Functions host runs in the local stack's process, so NODE_EXTRA_CA_CERTS comes too late).
  const ca = armCaFile ? readFileSync(armCaFile, "utf8") : undefined;
  return {
    credential: appContext.credential,
    ...(endpoint
      ? {
          clientOptions: {
            endpoint,
            credentials: { scopes: [ARM_SCOPE] },
            credentialScopes: [ARM_SCOPE],
            ...(ca ? { tlsOptions: { ca } } : {}),
          },
        }
      : {}),
  };
}

let provisioning: ReturnType<typeof createClusterProvisioning> | undefined;
let roles: ReturnType<typeof createRoleAssignments> | undefined;
let discovery: ReturnType<typeof createWorkspaceDiscovery> | undefined;
let builds: RegistryBuilds | undefined;

/** Registry task runs (the image build's Resource Manager calls; one client per process). */
export function registryBuilds(): RegistryBuilds {
  builds ??= createRegistryBuilds(armConnection());
  return builds;
}

/** The image build service for one request. */
export function imageBuildService(scope: ServiceScope): ImageBuildService {
  const { config } = appContext;
  return createImageBuildService({
    orchestrations: scope.durable(),
    workspace: createWorkspaceStore(config.storage),
    audit: appContext.audit,
    logger: scope.logger,
    settings: {
      contextDir: config.imageBuild.contextDir,
      loginServer: config.jobApiDeploy.registryLoginServer,
      pollSeconds: config.imageBuild.pollSeconds,
      timeoutSeconds: config.imageBuild.timeoutSeconds,
    },
  });
}

/** The cluster's Resource Manager calls (one client per process). */
export function clusterProvisioning() {
  provisioning ??= createClusterProvisioning(armConnection());
  return provisioning;
}

/** Runtime role assignments; a refused write becomes a `role_assignment.missing` event. */
export function roleAssignments() {
  roles ??= createRoleAssignments(armConnection(), {
    onMissing: reportMissingRoles(appContext.events, appContext.logger, "cluster.role_assignments"),
  });
  return roles;
}

/** What the managed identity can see, for the workspace page. */
export function workspaceDiscovery() {
  discovery ??= createWorkspaceDiscovery(armConnection());
  return discovery;
}

/**
 * The saved workspace's cluster's power state, for the submit's B-026 check: read where the
 * Resource Manager is local (`ARM_ENDPOINT`; in Azure a stopped AKS cluster takes the job API with
 * it, and the submit fails reaching it). Undefined when unknown: no workspace, no cluster, or ARM
 * did not answer (logged; the submit goes on).
 */
export async function clusterPower(): Promise<{ cluster_name: string; power_state: string | null } | undefined> {
  const { config, logger } = appContext;
  if (!config.cluster.armEndpoint) return undefined;
  try {
    const { workspace } = await workspaceService().get();
    const summary = await clusterProvisioning().summary({
      subscription_id: workspace.subscription_id,
      resource_group: workspace.resource_group,
      location: workspace.location,
      cluster_name: workspace.cluster_name,
      blast_vm_size: workspace.node_size,
      blast_node_count: workspace.node_count,
      system_vm_size: config.cluster.systemVmSize,
    });
    return summary ? { cluster_name: workspace.cluster_name, power_state: summary.power_state } : undefined;
  } catch (error) {
    if (error instanceof NotFoundError) return undefined;
    logger.warn("cluster power state unknown", { error: error instanceof Error ? error.message : String(error) });
    return undefined;
  }
}

/** The dashboard's cluster operations for one request. */
export function clusterService(scope: ServiceScope): ClusterService {
  const { config } = appContext;
  return createClusterService({
    workspace: () => workspaceService().get(),
    orchestrations: scope.durable(),
    audit: appContext.audit,
    logger: scope.logger,
    databases: async () =>
      (await databaseCatalog().list()).map((entry) => ({
        name: entry.manifest.name,
        bytesToCache: entry.manifest.bytes_to_cache,
      })),
    systemVmSize: config.cluster.systemVmSize,
    summary: (target) => clusterProvisioning().summary(target),
    ...(config.cluster.identityId ? { controlPlaneIdentityId: config.cluster.identityId } : {}),
    ...(config.cluster.workloadPrincipalId ? { workloadPrincipalId: config.cluster.workloadPrincipalId } : {}),
  });
}
