import { z } from "zod";
import { ROLES } from "../auth/roles.js";
import { databaseSchema, storingProgressSchema } from "../jobs/schemas.js";

/**
 * The dashboard API's response bodies as zod schemas: what `GET /api/openapi.json` publishes as
 * components (request bodies and parameters come from the schemas that validate them). Objects do
 * not forbid other properties: responses may gain fields additively.
 */

const timestamp = z.string().describe("ISO 8601 timestamp");
const meta = z.object({ request_id: z.string() });
const actor = z.object({ oid: z.string(), name: z.string() });

export const operationSchema = z.object({
  operation_id: z.string(),
  operation_type: z.string(),
  state: z.enum(["queued", "running", "succeeded", "failed", "cancelled"]),
  created_at: timestamp,
  updated_at: timestamp,
  poll_after_seconds: z.number().int().describe("wait this long before polling again (0 once terminal)"),
  links: z.object({ self: z.string(), target: z.string().optional() }),
  target: z.record(z.string(), z.unknown()).optional(),
  progress: z.record(z.string(), z.unknown()).optional(),
  error: z
    .object({
      detail: z.string(),
      issues: z
        .array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() }))
        .optional(),
    })
    .optional(),
});

export const operationResponseSchema = operationSchema.extend({ meta });

export const dashboardJobSchema = z.object({
  job_id: z.string().describe("the dashboard job UUID"),
  job_id_kind: z.literal("dashboard"),
  openapi_job_id: z.string().nullable().describe("the job API's id, once the job reached it"),
  status: z.string(),
  title: z.string(),
  program: z.string(),
  db: z.string(),
  execution_profile: z.enum(["standard", "sharded"]),
  priority: z.union([z.number(), z.string()]).nullable(),
  options: z.record(z.string(), z.unknown()),
  query_count: z.number().int(),
  created_by: actor,
  created_at: timestamp,
  updated_at: timestamp,
  status_times: z
    .record(z.string(), timestamp)
    .optional()
    .describe("when the dashboard first saw the job in each status it reached (ISO 8601), keyed by status"),
  error: z.string(),
  progress: z
    .object({
      total: z.number().int(),
      succeeded: z.number().int(),
      failed: z.number().int(),
      active: z.number().int(),
    })
    .nullable(),
  result_bytes: z
    .object({ xml: z.number().int(), gzip: z.number().int() })
    .nullable()
    .optional()
    .describe("the result's size once the search completed: BLAST XML bytes, and stored gzip bytes"),
  storing: storingProgressSchema
    .nullable()
    .optional()
    .describe("while the results are stored (BLAST finished, not yet completed): merged XML bytes stored so far"),
  operation_status_url: z.string(),
});

/** §2.7: the job's fields with its operation, target, admission and meta. */
export const dashboardJobEnvelopeSchema = dashboardJobSchema.extend({
  operation: operationSchema,
  target: z.object({
    resource_type: z.literal("blast_job"),
    job_id_kind: z.literal("dashboard"),
    dashboard_job_id: z.string(),
    openapi_job_id: z.string().nullable(),
  }),
  admission: z.object({ decision: z.string(), reason: z.string() }),
  meta,
});

export const dashboardJobListSchema = z.object({
  jobs: z.array(dashboardJobSchema),
  page: z.number().int(),
  page_size: z.number().int(),
  total: z.number().int(),
  meta,
});

export const dashboardJobDetailSchema = dashboardJobSchema.extend({ meta });

export const databaseListingSchema = databaseSchema.omit({ location: true }).extend({
  warm_state: z.string().optional(),
  warmed_at: z.string().nullable().optional(),
  update_available: z.boolean().optional(),
  latest_release: z.string().nullable().optional(),
  checked_at: z.string().nullable().optional(),
});

export const databaseListSchema = z.object({ databases: z.array(databaseListingSchema), meta });

export const operationStartedSchema = z.object({
  operation: operationSchema,
  operation_status_url: z.string(),
  meta,
});

/** `GET /api/databases/adding`: what adding a database needs (issue 23, item 5). */
export const databaseAddingSchema = z.object({
  prepare: z
    .object({ available: z.boolean(), reason: z.string().nullable() })
    .describe("whether Prepare works here, and what it needs when it does not (DATABASE_SOURCE_URL)"),
  upload: z.object({
    available: z.boolean(),
    reason: z.string().nullable(),
    max_bytes: z.number().int().describe("largest FASTA accepted (DATABASE_UPLOAD_MAX_BYTES); 413 beyond"),
  }),
  node: z
    .object({ memory_bytes: z.number().int(), usable_bytes: z.number().int() })
    .nullable()
    .describe("a search node's memory and what one search may cache (the job API's view); null when unknown"),
  meta,
});

/** `POST /api/databases/uploads`: the build started and what the uploaded FASTA holds. */
export const databaseUploadStartedSchema = operationStartedSchema.extend({
  upload: z.object({
    bytes: z.number().int(),
    sequences: z.number().int(),
    letters: z.number().int(),
    header_bytes: z.number().int(),
    detected_type: z.enum(["nucl", "prot"]).nullable().describe("the molecule the sequence letters look like"),
  }),
});

const podReportSchema = z.object({
  name: z.string(),
  phase: z.string(),
  ready: z.boolean(),
  reason: z
    .string()
    .optional()
    .describe("why it is not running and ready: ImagePullBackOff, CrashLoopBackOff, Unschedulable…"),
  message: z.string().optional(),
  restarts: z.number().int(),
});

/** `GET /api/jobapi/deployment`: the job API's rollout on the cluster. */
export const jobApiDeploymentSchema = z.object({
  namespace: z.string(),
  rollout: z.object({
    state: z.enum(["complete", "progressing", "missing"]),
    generation: z.number().int(),
    observed_generation: z.number().int(),
    replicas: z.number().int(),
    updated_replicas: z.number().int(),
    available_replicas: z.number().int(),
    pods: z.array(podReportSchema),
  }),
  running_operation: operationSchema.nullable().describe("the deploy running now, if any"),
  meta,
});

const poolPlanSchema = z.object({
  name: z.enum(["system", "blast"]),
  vm_size: z.string(),
  node_count: z.number().int(),
  memory_gib: z.number().nullable(),
  vcpus: z.number().int().nullable(),
});

/** `GET /api/aks/cluster`. */
export const clusterStatusSchema = z.object({
  cluster_name: z.string(),
  plan: z.object({
    pools: z.array(poolPlanSchema).describe("what a provision asks for: the system pool, then the BLAST pool"),
    largest_database: z.object({ name: z.string(), bytes_to_cache: z.number().int() }).nullable(),
    usable_bytes_per_node: z.number().int().nullable().describe("memory a BLAST node leaves to pods"),
    fits: z.boolean().describe("whether a BLAST node holds the largest prepared database"),
    detail: z.string().optional().describe("why it does not fit, with the remedies"),
  }),
  cluster: z
    .object({
      fqdn: z.string().nullable(),
      power_state: z.string().nullable(),
      provisioning_state: z.string().nullable(),
      oidc_issuer_url: z.string().nullable(),
      kubelet_object_id: z.string().nullable(),
      blast_pool: z.object({ vm_size: z.string().nullable(), count: z.number().int().nullable() }).nullable(),
    })
    .nullable()
    .describe("the managed cluster as Resource Manager has it; null when it does not exist"),
  cluster_error: z.string().optional().describe("why the cluster could not be read"),
  operation: operationSchema.nullable().describe("the cluster's latest operation, running or finished"),
  meta,
});

/** `GET /api/images/build`. */
export const latestImageBuildSchema = z.object({
  operation: operationSchema.nullable().describe("the latest build (its progress has image_digest once it succeeded)"),
  meta,
});

export const storedWorkspaceSchema = z.object({
  workspace: z.record(z.string(), z.unknown()).describe("the saved configuration (the PUT body)"),
  etag: z.string(),
  updated_at: timestamp,
  updated_by: actor,
});

export const apiTokenStatusSchema = z.object({
  configured: z.boolean(),
  last_four: z.string().nullable(),
  created_at: z.string().nullable(),
  rotated_at: z.string().nullable(),
  previous_valid_until: z.string().nullable(),
});

export const apiTokenRevealSchema = z.object({ api_token: z.string() });

export const apiTokenRegeneratedSchema = z.object({
  api_token: z.string().describe("the new token, shown once"),
  created_at: timestamp,
  previous_valid_until: z.string().nullable().describe("until when the old token is still accepted"),
});

export const healthSchema = z.object({ status: z.literal("ok"), service: z.string().optional() });

export const readinessSchema = z.object({ status: z.literal("ready"), checks: z.record(z.string(), z.literal("ok")) });

export const callerSchema = z.object({
  caller: z.object({
    oid: z.string(),
    name: z.string(),
    tenant_id: z.string(),
    roles: z.array(z.enum(ROLES)),
  }),
});

export const queueDiagnosticsSchema = z.object({
  task_app_id: z.number().int(),
  celery_app_id: z.number().int(),
  current_app_id: z.number().int(),
  task_app_main: z.string(),
  task_app_routes: z.record(z.string(), z.object({ queue: z.string() })),
  task_app_default_queue: z.string(),
  resolved_route: z.object({ queue: z.string() }),
  queues: z.record(z.string(), z.number().int()),
  redis_keys_db0: z.array(z.string()),
});

export const noopEnqueuedSchema = queueDiagnosticsSchema.extend({
  task_id: z.string(),
  status: z.literal("PENDING"),
});

export const noopResultSchema = z.object({
  task_id: z.string(),
  status: z.string().describe("PENDING, STARTED, SUCCESS or FAILURE"),
  result: z.object({ message: z.unknown() }).nullable(),
  error: z.string().optional(),
});

export const chatReplySchema = z.object({
  text: z.string(),
  kind: z.string(),
  intent: z.unknown(),
  tool_results: z.array(z.record(z.string(), z.unknown())),
  evidence_refs: z.array(z.string()),
  audit_ids: z.array(z.string()),
  approval_id: z.string().optional(),
  request_id: z.string(),
});

export const chatHealthSchema = z.object({
  status: z.literal("ok"),
  narrator: z.string(),
  narrator_ready: z.boolean(),
  deterministic_ready: z.literal(true),
});

export const agentActivitySchema = z.object({
  activities: z.array(
    z.object({
      kind: z.string(),
      activity: z.string(),
      input_kind: z.string(),
      tool: z.string(),
      status: z.string(),
      authority: z.string(),
      started_at: timestamp,
      audit_id: z.string(),
    }),
  ),
  limit: z.number().int(),
});

/** A read investigation's answer, as a direct run returns it and a detached one once it ended. */
const investigationAnswerSchema = z.object({
  outcome: z.enum(["answered", "abstained"]),
  text: z.string(),
  activities: z.array(z.record(z.string(), z.unknown())),
  tool_results: z.array(z.record(z.string(), z.unknown())),
  evidence_refs: z.array(z.string()),
  audit_ids: z.array(z.string()),
});

/** `POST /api/read-investigations` (direct or detached; streamed answers `text/event-stream`). */
export const readInvestigationSchema = z.object({
  investigation_id: z.string(),
  mode: z.enum(["direct", "streamed", "detached"]),
  decision: z.object({
    mode: z.enum(["direct", "streamed", "detached"]),
    reason: z.enum(["fast_history", "no_latency_evidence", "moderate_history", "slow_history"]),
    estimate_ms: z.number().nullable().describe("sum of each read's p90 duration_ms; null when a tool has no history"),
    latency: z.array(z.object({ tool: z.string(), samples: z.number().int(), p90_ms: z.number().nullable() })),
    thresholds: z.object({ direct_max_ms: z.number().int(), streamed_max_ms: z.number().int() }),
  }),
  result: investigationAnswerSchema.optional().describe("direct: the reads' result"),
  operation: z.record(z.string(), z.unknown()).optional().describe("detached: the operation running the reads"),
  operation_status_url: z.string().optional(),
  meta: z.object({ request_id: z.string() }),
});

/** `GET /api/read-investigations/{investigation_id}`: a detached investigation's status and result. */
export const readInvestigationResultSchema = z.object({
  investigation_id: z.string(),
  mode: z.literal("detached"),
  status: z.enum(["running", "succeeded", "failed"]),
  started_at: timestamp,
  result: investigationAnswerSchema.optional().describe("once the operation ended"),
  operation_status_url: z.string(),
  meta: z.object({ request_id: z.string() }),
});

/** `GET /api/approvals`: the count for everyone; the items from Approver up. */
export const approvalsQueueSchema = z.object({
  role: z.enum(ROLES),
  count: z.number().int().describe("pending approvals not yet past their expiry"),
  details: z.enum(["count_only", "full"]),
  items: z.array(
    z.object({
      approval_id: z.string(),
      proposed_action: z.string(),
      target: z.string(),
      params: z.record(z.string(), z.unknown()),
      action_hash: z.string(),
      requester: z.object({ oid: z.string(), name: z.string() }),
      reason: z.string(),
      severity: z.string(),
      created_at: timestamp,
      expires_at: timestamp,
      may_decide: z.boolean(),
      required_role: z.enum(ROLES),
      refusal: z.enum(["no_self_approval", "decider_role_below_action_floor"]).optional(),
    }),
  ),
});

/** `POST /api/approvals/{approval_id}/decision`: the decision as recorded (or the existing one, or the timeout). */
export const approvalDecisionSchema = z.object({
  outcome: z
    .enum(["recorded", "existing", "timeout"])
    .describe("existing: the same decider and decision were recorded before; timeout: it expired first"),
  approval_id: z.string(),
  state: z.string(),
  decision: z.record(z.string(), z.unknown()).nullable(),
  execution: z.record(z.string(), z.unknown()).nullable(),
  timed_out_at: z.string().nullable(),
  meta: z.object({ request_id: z.string() }),
});

export const rpcResponseSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number()]),
  result: z.record(z.string(), z.unknown()).describe("tools.search: {role, tools}; tools.describe: one descriptor"),
});

/** `GET /api/notifications/preview`: one template rendered as the email channel would send it. */
export const notificationPreviewSchema = z.object({
  template: z.string(),
  locale: z.enum(["en", "ko"]),
  subject: z.string(),
  text: z.string(),
  html: z.string().describe("the HTML part; parameters are HTML-escaped"),
});

/** `POST /api/notifications/test`: the test message's overall state and each channel's receipt. */
export const notificationTestResultSchema = z.object({
  route: z.string(),
  correlation_id: z.string(),
  state: z.enum(["delivered", "definitive_failure", "ambiguous"]),
  confirmed: z.boolean(),
  channels: z.array(
    z.object({
      channel: z.string(),
      kind: z.string(),
      operation: z.string(),
      state: z.enum(["delivered", "definitive_failure", "ambiguous"]),
      vendor_message_id: z.string().optional(),
      text_degraded: z.boolean(),
      attempts: z.number().int(),
      reason: z.string().optional(),
      at: timestamp,
    }),
  ),
});

/** Chat platform B's answer to Slack: empty, or the `url_verification` challenge echoed. */
export const slackAckSchema = z.object({ challenge: z.string().optional() });

/** Chat platform A's answer to Bot Service: an empty object (the reply goes out through Bot Connector). */
export const teamsAckSchema = z.object({});

/** An inbound generic webhook recorded as a shadow event for the operations core. */
export const webhookAcceptedSchema = z.object({
  event_id: z.string(),
  event_type: z.string(),
  target_agent: z.string(),
  mode: z.literal("shadow"),
});

/** A pairing an approver made: the sender now resolves to the principal (identity only, no role). */
export const pairingApprovedSchema = z.object({
  channel: z.enum(["platform_a", "platform_b"]),
  vendor_user_id: z.string(),
  principal_oid: z.string(),
});

/** A cross-channel identity link (a record; nothing merged). */
export const identityLinkSchema = z.object({
  link_id: z.string(),
  principal_oid: z.string(),
  endpoints: z.array(z.object({ channel: z.enum(["platform_a", "platform_b"]), vendor_user_id: z.string() })),
  approved_by: z.string(),
  approved_at: timestamp,
});

/** `POST /api/terminal/tickets` request: no fields today (unknown ones are refused). */
export const terminalTicketRequestSchema = z.strictObject({});

/** A terminal ticket (decision 0020): answered once, single use, valid until `expires_at`. */
export const terminalTicketSchema = z.object({
  ticket: z.string().describe("offer it as the WebSocket subprotocol ticket.<ticket> on GET /v1/terminal"),
  expires_at: timestamp,
  expires_in_seconds: z.number().int(),
  meta,
});

/** `POST /api/blast/jobs/{uuid}/results/ticket` (issue 23): a single-use download link. */
export const downloadTicketSchema = z.object({
  ticket: z.string().describe("single use; only its digest is stored"),
  expires_at: timestamp,
  download_url: z
    .string()
    .describe("GET it (relative to the dashboard) without an Authorization header: the results as an attachment"),
  meta,
});
