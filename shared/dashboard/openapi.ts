import type { z } from "zod";
import type { Role } from "../auth/roles.js";
import { FASTA_LIMITS } from "../blast/fasta.js";
import { errorResponse, jsonSchemaOf, type Operation, openApiDocument } from "../http/openapi.js";
import { discoveryPageSchema, roleAssignmentCheckSchema, scaleRequestSchema } from "../cluster/cluster-schemas.js";
import { workspaceSchema } from "../workspace/workspace.js";
import { hitDetailSchema, hitPageSchema, queryPageSchema } from "../jobs/result-page-schemas.js";
import {
  agentActivitySchema,
  apiTokenRegeneratedSchema,
  apiTokenRevealSchema,
  apiTokenStatusSchema,
  callerSchema,
  chatHealthSchema,
  chatReplySchema,
  notificationTestResultSchema,
  notificationPreviewSchema,
  dashboardJobDetailSchema,
  dashboardJobEnvelopeSchema,
  dashboardJobListSchema,
  databaseListSchema,
  healthSchema,
  jobApiDeploymentSchema,
  clusterStatusSchema,
  latestImageBuildSchema,
  noopEnqueuedSchema,
  noopResultSchema,
  operationResponseSchema,
  operationStartedSchema,
  queueDiagnosticsSchema,
  readinessSchema,
  readInvestigationSchema,
  readInvestigationResultSchema,
  approvalsQueueSchema,
  approvalDecisionSchema,
  databaseAddingSchema,
  databaseUploadStartedSchema,
  rpcResponseSchema,
  storedWorkspaceSchema,
  slackAckSchema,
  teamsAckSchema,
  webhookAcceptedSchema,
  pairingApprovedSchema,
  identityLinkSchema,
  terminalTicketRequestSchema,
  terminalTicketSchema,
  downloadTicketSchema,
} from "./api-schemas.js";
import { dashboardSubmitSchema } from "./schemas.js";

export const DASHBOARD_API_VERSION = "1.0.0";

/** The bearer token of the dashboard's app registration (Entra ID), as every protected route takes it. */
export const bearer = [{ EntraBearer: [] }];

/** One registered dashboard route, as the route kit records it. */
export interface DescribedRoute {
  /** The function's name: the operation's id. */
  name: string;
  methods: readonly string[];
  /** The Functions route template, under the `api` prefix (`blast/jobs/{uuid}`). */
  route: string;
  role?: Role;
  /** The route's operation object without what the kit knows (operationId, security, 401/403). */
  openapi?: Operation;
}

/** Request bodies and responses refer to these by name. */
const SCHEMAS: Record<string, z.ZodType> = {
  Workspace: workspaceSchema,
  StoredWorkspace: storedWorkspaceSchema,
  DashboardSubmitRequest: dashboardSubmitSchema,
  DashboardJob: dashboardJobDetailSchema,
  DashboardJobEnvelope: dashboardJobEnvelopeSchema,
  DashboardJobList: dashboardJobListSchema,
  ResultQueryPage: queryPageSchema,
  ResultHitPage: hitPageSchema,
  ResultHit: hitDetailSchema,
  Operation: operationResponseSchema,
  OperationStarted: operationStartedSchema,
  DatabaseList: databaseListSchema,
  DatabaseAdding: databaseAddingSchema,
  DatabaseUploadStarted: databaseUploadStartedSchema,
  ApiTokenStatus: apiTokenStatusSchema,
  ApiTokenReveal: apiTokenRevealSchema,
  ApiTokenRegenerated: apiTokenRegeneratedSchema,
  Health: healthSchema,
  Readiness: readinessSchema,
  Caller: callerSchema,
  QueueDiagnostics: queueDiagnosticsSchema,
  NoopEnqueued: noopEnqueuedSchema,
  NoopResult: noopResultSchema,
  ChatReply: chatReplySchema,
  ChatHealth: chatHealthSchema,
  AgentActivity: agentActivitySchema,
  ReadInvestigation: readInvestigationSchema,
  ReadInvestigationResult: readInvestigationResultSchema,
  ApprovalsQueue: approvalsQueueSchema,
  ApprovalDecision: approvalDecisionSchema,
  RpcResponse: rpcResponseSchema,
  NotificationTestResult: notificationTestResultSchema,
  NotificationPreview: notificationPreviewSchema,
  SlackAck: slackAckSchema,
  TeamsAck: teamsAckSchema,
  WebhookAccepted: webhookAcceptedSchema,
  PairingApproved: pairingApprovedSchema,
  IdentityLink: identityLinkSchema,
  DiscoveryPage: discoveryPageSchema,
  RoleAssignmentCheck: roleAssignmentCheckSchema,
  ScaleRequest: scaleRequestSchema,
  JobApiDeployment: jobApiDeploymentSchema,
  ClusterStatus: clusterStatusSchema,
  LatestImageBuild: latestImageBuildSchema,
  TerminalTicketRequest: terminalTicketRequestSchema,
  TerminalTicket: terminalTicketSchema,
  DownloadTicket: downloadTicketSchema,
};

/**
 * The dashboard API's OpenAPI 3.1 document (`GET /api/openapi.json`), from the routes the kit
 * registered: each route's operation object, with its name as `operationId`, the bearer scheme
 * and 401/403 when it has a role floor (or says it authenticates), and the components from the
 * zod schemas that validate requests and describe responses.
 */
export function buildDashboardOpenApi(routes: readonly DescribedRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {};
  for (const r of routes) {
    if (!r.openapi) continue;
    const { security, responses, description, ...rest } = r.openapi;
    const floor = r.role ? `Role floor: ${r.role} (or higher).` : undefined;
    const operation: Operation = {
      operationId: r.name,
      ...rest,
      ...(description || floor ? { description: [description, floor].filter(Boolean).join(" ") } : {}),
      security: r.role ? bearer : (security ?? []),
      responses: {
        ...responses,
        ...(r.role ? { "403": errorResponse(`the caller's roles do not include ${r.role} or higher`) } : {}),
      },
    };
    const path = `/${r.route}`;
    for (const method of r.methods) {
      paths[path] ??= {};
      (paths[path] as Record<string, Operation>)[method.toLowerCase()] = operation;
    }
  }
  return openApiDocument({
    title: "blastplane dashboard API",
    version: DASHBOARD_API_VERSION,
    description: `The backend of the browser dashboard and the operator console (Azure Functions): workspace, searches, databases, operations, settings, the console's chat and the queue diagnostics. Protected routes take an Entra ID access token for the app (Authorization: Bearer); each states its role floor. Search queries up to ${FASTA_LIMITS.maxBytes} bytes of FASTA.`,
    servers: [{ url: "/api", description: "the Functions app's route prefix (host.json extensions.http.routePrefix)" }],
    securitySchemes: {
      EntraBearer: {
        type: "http",
        scheme: "bearer",
        bearerFormat: "JWT",
        description:
          "An Entra ID access token for the dashboard's app registration; its roles claim carries the app roles",
      },
    },
    schemas: Object.fromEntries(Object.entries(SCHEMAS).map(([name, schema]) => [name, jsonSchemaOf(schema)])),
    paths: Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b))),
  });
}
