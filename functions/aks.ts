import { z } from "zod";
import { errorResponse, jsonBody, ok, parametersOf, retryLater, validationFailed } from "../shared/http/openapi.js";
import { scaleRequestSchema } from "../shared/cluster/cluster-schemas.js";
import { DISCOVERY_KINDS } from "../shared/cluster/discovery.js";
import { runtimeAssignments } from "../shared/cluster/role-assignments.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody, parsePath, parseQuery } from "../shared/http/validation.js";
import { appContext } from "./composition/app-context.js";
import { clusterService, imageBuildService, roleAssignments, workspaceDiscovery } from "./composition/aks-deps.js";
import { workspaceService } from "./composition/dashboard-deps.js";
import { callerOf, type RouteScope, route } from "./composition/http-route.js";

/** A cluster operation the route started, or the one already running (200, spec §4.1 provision row). */
function operationResult(operation: OperationView, scope: RouteScope) {
  return jsonResult(
    200,
    { operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } },
    scope.requestId,
  );
}

const started = {
  ...ok("the operation started, or the cluster operation already running", "OperationStarted"),
  "404": errorResponse("no workspace has been saved yet"),
};

route(
  "aksProvision",
  {
    methods: ["POST"],
    route: "aks/provision",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Provision (create or update) the cluster from the saved workspace, as an operation",
      description:
        "Creates or updates the managed cluster (system pool, OIDC issuer, workload identity, Entra RBAC), the BLAST pool sized from the workspace, and the runtime role assignments; 200 when the operation is started (or one is already running: that one is answered). A BLAST pool too small for the largest prepared database is refused (422).",
      responses: { ...started, ...validationFailed },
    },
  },
  async (_request, scope) =>
    operationResult(await clusterService(scope).provision(callerOf(scope), { requestId: scope.requestId }), scope),
);

route(
  "aksCluster",
  {
    methods: ["GET"],
    route: "aks/cluster",
    role: "Reader",
    durable: true,
    openapi: {
      summary:
        "The cluster: the pools a provision asks for, the cluster as Resource Manager has it, its latest operation",
      description:
        "plan.pools are the system pool and the BLAST pool (the workspace's node size and count); plan.fits says whether a BLAST node holds the largest prepared database (plan.detail says why not, with the remedies: a provision would be refused). cluster is the managed cluster (power state, provisioning state, BLAST pool) or null when it does not exist; cluster_error says why it could not be read. operation is the cluster's latest operation, running or finished.",
      responses: {
        ...ok("the cluster's plan, state and latest operation", "ClusterStatus"),
        "404": errorResponse("no workspace has been saved yet"),
      },
    },
  },
  async (_request, scope) => {
    const status = await clusterService(scope).status();
    return jsonResult(200, { ...status, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

route(
  "imagesLatestBuild",
  {
    methods: ["GET"],
    route: "images/build",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "The workspace registry's latest image build (running or finished)",
      description:
        "The build operation as GET /api/operations/{id} reports it (progress: step, run, log tail; at the end image_digest and image), or null when the registry never had a build or no workspace is saved.",
      responses: ok("the latest build, or null", "LatestImageBuild"),
    },
  },
  async (_request, scope) => {
    const operation = await imageBuildService(scope).latest();
    return jsonResult(200, { operation, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

route(
  "imagesBuild",
  {
    methods: ["POST"],
    route: "images/build",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Build the job API image in the workspace's registry (a registry run), as an operation",
      description:
        "Uploads the build context through the registry's upload URL, schedules a registry run of jobapi/Dockerfile and polls it; the operation's progress carries the run, its state and its log's tail, and at the end the image pinned by digest (progress.image_digest, what POST /api/jobapi/deploy takes). A failed run fails the operation with the run's error and the last lines of its log. 200 when started; a build already running in the registry is answered instead. Audited as images.build.",
      responses: {
        ...ok("the operation started, or the build already running", "OperationStarted"),
        "409": errorResponse("no workspace has been saved yet"),
        "503": retryLater("image builds are not configured (IMAGE_BUILD_CONTEXT_DIR)"),
      },
    },
  },
  async (_request, scope) =>
    operationResult(await imageBuildService(scope).build(callerOf(scope), { requestId: scope.requestId }), scope),
);

const actionPath = z.object({ action: z.enum(["stop", "start", "delete"]) });

route(
  "aksAction",
  {
    methods: ["POST"],
    route: "aks/cluster/{action}",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Stop, start or delete the cluster, as an operation",
      parameters: parametersOf(actionPath, "path"),
      responses: { ...started, "400": errorResponse("unknown action") },
    },
  },
  async (request, scope) => {
    const { action } = parsePath(request, actionPath);
    return operationResult(
      await clusterService(scope).act(callerOf(scope), action, { requestId: scope.requestId }),
      scope,
    );
  },
);

route(
  "aksScale",
  {
    methods: ["POST"],
    route: "aks/pools/blast/scale",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Set the BLAST pool's node count, as an operation",
      requestBody: jsonBody("ScaleRequest"),
      responses: { ...started, ...validationFailed },
    },
  },
  async (request, scope) => {
    const { node_count } = await parseJsonBody(request, scaleRequestSchema);
    return operationResult(
      await clusterService(scope).scale(callerOf(scope), node_count, { requestId: scope.requestId }),
      scope,
    );
  },
);

route(
  "aksRoleAssignmentsCheck",
  {
    methods: ["POST"],
    route: "aks/role-assignments/check",
    role: "Contributor",
    openapi: {
      summary: "Re-check the runtime role assignments (after someone ran the shown commands)",
      description:
        "Lists, for the saved workspace, each runtime role assignment of spec §5 and whether it exists now; a missing one carries the az command that makes it. A new assignment takes 1 to 5 minutes to take effect.",
      responses: {
        ...ok("each assignment and its state", "RoleAssignmentCheck"),
        "404": errorResponse("no workspace"),
      },
    },
  },
  async (_request, scope) => {
    const { workspace } = await workspaceService().get();
    const caller = callerOf(scope);
    const assignments = await roleAssignments().check(
      runtimeAssignments({
        subscription_id: workspace.subscription_id,
        resource_group: workspace.resource_group,
        cluster_name: workspace.cluster_name,
        registry: workspace.registry,
        storage_account: workspace.storage_account,
        workload_principal_id: appContext.config.cluster.workloadPrincipalId ?? null,
        user_object_id: caller.oid,
      }),
    );
    return jsonResult(200, { assignments, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

const kindPath = z.object({ kind: z.enum(DISCOVERY_KINDS) });
const discoveryQuery = z.strictObject({
  subscription_id: z
    .string()
    .regex(
      /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
      "must be a subscription GUID",
    )
    .optional(),
  resource_group: z
    .string()
    .regex(/^[-\w._()]{1,90}$/, "must be a resource group name")
    .optional(),
});

route(
  "workspaceChoices",
  {
    methods: ["GET"],
    route: "workspace/choices/{kind}",
    role: "Contributor",
    openapi: {
      summary: "What the managed identity can see in Azure, for the workspace form's choices",
      description:
        "Subscriptions, resource groups, storage accounts, registries, clusters or vaults (all pages; at most 500). Every kind but subscriptions needs subscription_id. A list Azure refuses answers 502 naming the role to assign and its scope.",
      parameters: [...parametersOf(kindPath, "path"), ...parametersOf(discoveryQuery, "query")],
      responses: {
        ...ok("the choices", "DiscoveryPage"),
        "400": errorResponse("unknown kind"),
        ...validationFailed,
        "502": errorResponse("Azure refused the list (the role to assign and its scope)"),
        "503": retryLater("Azure could not be reached"),
      },
    },
  },
  async (request, scope) => {
    const { kind } = parsePath(request, kindPath);
    const query = parseQuery(request, discoveryQuery);
    if (kind !== "subscriptions" && !query.subscription_id)
      return jsonResult(
        422,
        {
          detail: [{ loc: ["query", "subscription_id"], msg: "required for this kind", type: "missing" }],
          request_id: scope.requestId,
        },
        scope.requestId,
      );
    const page = await workspaceDiscovery().list(kind, query.subscription_id, query.resource_group);
    return jsonResult(200, { ...page, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);
