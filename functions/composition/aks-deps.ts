import { ARM_SCOPE, type ArmConnection } from "../../shared/cluster/arm-connection.js";
import { createClusterProvisioning } from "../../shared/cluster/cluster-provisioning.js";
import { type ClusterService, createClusterService } from "../../shared/cluster/cluster-service.js";
import { createWorkspaceDiscovery } from "../../shared/cluster/discovery.js";
import { createRoleAssignments } from "../../shared/cluster/role-assignments.js";
import { reportMissingRoles } from "../../shared/ops/emitters/signal-events.js";
import { appContext } from "./app-context.js";
import { databaseCatalog, type ServiceScope, workspaceService } from "./dashboard-deps.js";

/** Resource Manager as the app reaches it: the managed identity, and the endpoint override of the local stack. */
export function armConnection(): ArmConnection {
  const endpoint = appContext.config.cluster.armEndpoint;
  return {
    credential: appContext.credential,
    ...(endpoint
      ? { clientOptions: { endpoint, credentials: { scopes: [ARM_SCOPE] }, credentialScopes: [ARM_SCOPE] } }
      : {}),
  };
}

let provisioning: ReturnType<typeof createClusterProvisioning> | undefined;
let roles: ReturnType<typeof createRoleAssignments> | undefined;
let discovery: ReturnType<typeof createWorkspaceDiscovery> | undefined;

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
    ...(config.cluster.identityId ? { controlPlaneIdentityId: config.cluster.identityId } : {}),
    ...(config.cluster.workloadPrincipalId ? { workloadPrincipalId: config.cluster.workloadPrincipalId } : {}),
  });
}
