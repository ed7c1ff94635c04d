import type { HttpRequest } from "@azure/functions";
import { z } from "zod";
import type { Role } from "../shared/auth/roles.js";
import { agentActivity, agentFramesOf } from "../shared/console/activity.js";
import { approvalIdSchema } from "../shared/console/approvals/approval-store.js";
import { streamChatTurn } from "../shared/console/chat-stream.js";
import type { LiveCursor } from "../shared/console/live-feed.js";
import { followAudit, LIVE_EVENT_ID, parseCursor, relayAudit, relayLive } from "../shared/console/live-feed.js";
import {
  chooseFromHistory,
  detachedInvestigationView,
  type InvestigationResult,
  investigationView,
  planInvestigation,
  type ReadInvestigationInput,
  readInvestigationBody,
  recordInvestigation,
  runInvestigation,
} from "../shared/console/read-investigations.js";
import { decisionView, pendingApprovalView } from "../shared/console/tools/approval-tools.js";
import { effectiveRole, meetsFloor, ToolError } from "../shared/console/tools/tool.js";
import {
  ConflictError,
  ForbiddenError,
  NotFoundError,
  ReauthenticationRequiredError,
  ValidationError,
} from "../shared/errors.js";
import { errorResult, jsonResult } from "../shared/http/envelope.js";
import {
  errorResponse,
  jsonBodyOf,
  ok,
  parametersOf,
  refusedBeforeRouting,
  validationFailed,
} from "../shared/http/openapi.js";
import { createSseStream, SSE_HEADERS, type SseChannel } from "../shared/http/sse.js";
import { parseJsonBody, parsePath, zodIssues } from "../shared/http/validation.js";
import { getOperation, newOperationId } from "../shared/orchestrations/operations.js";
import { Orchestrations } from "../shared/orchestrations/queue-labels.js";
import { appContext } from "./composition/app-context.js";
import { approvalHooks } from "./composition/approval-hooks.js";
import { consoleParts } from "./composition/console-deps.js";
import { callerOf, type RouteScope, route } from "./composition/http-route.js";

/** A chat turn: bounded text and the optional agent selections of coordinator rule 8. */
const turnBody = z.strictObject({
  text: z.string().trim().min(1).max(8000),
  target_agent: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,63}$/)
    .optional(),
  incident_agent: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,63}$/)
    .optional(),
});

/** The two RPC methods (spec §4): descriptors only; a caller-supplied role is ignored. */
const rpcBody = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string().max(100), z.number().int()]),
  method: z.enum(["tools.search", "tools.describe"]),
  params: z
    .object({
      query: z.string().max(200).optional(),
      name: z
        .string()
        .regex(/^[a-z][a-z0-9_]{0,63}$/)
        .optional(),
    })
    .loose()
    .default({}),
});

// A principal with no application role never reaches the coordinator (spec §5.1): the Reader floor blocks it.
route(
  "consoleChat",
  {
    methods: ["POST"],
    route: "chat",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "One operator-console turn: the coordinator's reply",
      requestBody: jsonBodyOf(turnBody),
      responses: {
        ...ok("the reply", "ChatReply"),
        "400": errorResponse("malformed JSON"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const turn = await parseJsonBody(request, turnBody, 64 * 1024);
    const reply = await (await consoleParts()).coordinator.handleTurn(
      callerOf(scope),
      turn,
      scope.requestId,
      approvalHooks(scope),
    );
    return jsonResult(200, reply, scope.requestId);
  },
);

/** An idle event stream sends a comment this often (proxies and browsers keep it open). */
const HEARTBEAT_MS = 15_000;
/** A chat answer a client leaves unread beyond this is dropped (the stream ends). */
const CHAT_STREAM_MAX_BACKLOG_BYTES = 1024 * 1024;

route(
  "consoleChatStream",
  {
    methods: ["POST"],
    route: "chat/stream",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "One operator-console turn as server-sent events (turn, delta, activity, answer, final, error)",
      description:
        "The turn's frames as `text/event-stream`: `turn`, provisional `delta`s from a narrator, one `activity` per tool result, `answer` (the reply `POST /api/chat` returns), then `final` with the presentation plan (an alternative plan is awaited at most 5 s; the deterministic plan is kept on timeout, cancellation, invalid output or provider failure). SSE comment heartbeats every 15 s while idle. A failure after the stream opened is an `error` frame. Closing the stream cancels the turn's provider work. See docs/web-chat.md.",
      requestBody: jsonBodyOf(turnBody),
      responses: {
        "200": {
          description: "the turn's event stream",
          content: { "text/event-stream": { schema: { type: "string" } } },
        },
        "400": errorResponse("malformed JSON"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const turn = await parseJsonBody(request, turnBody, 64 * 1024);
    const caller = callerOf(scope);
    const { coordinator } = await consoleParts();
    const connection = scope.connection();
    const { body, channel } = createSseStream({
      heartbeatMs: HEARTBEAT_MS,
      clientAbortSignal: connection.abortSignal,
      backlogBytes: connection.backlogBytes,
      maxBacklogBytes: CHAT_STREAM_MAX_BACKLOG_BYTES,
    });
    const narrator = coordinator.narrator;
    // Started here, inside the invocation (its durable client is found through this async context).
    void streamChatTurn(channel, scope.requestId, {
      handleTurn: (streamHooks) =>
        coordinator.handleTurn(caller, turn, scope.requestId, { ...approvalHooks(scope), ...streamHooks }),
      planner: narrator.planPresentation
        ? { planPresentation: (input) => narrator.planPresentation?.(input) ?? Promise.resolve(undefined) }
        : undefined,
      onError: (error) => scope.logger.error("chat stream turn failed", { error }),
    });
    void channel.ended.then((end) => {
      if (end !== "completed") scope.logger.info("chat stream ended early", { end });
    });
    return { status: 200, headers: { ...SSE_HEADERS }, body };
  },
);

/** How often `/live/stream` reads the audit log for new core-stage entries. */
const LIVE_POLL_MS = 2000;
/** A `Last-Event-ID` older than this resumes from this far back (the stated retention window). */
const LIVE_RETENTION_MS = 60 * 60 * 1000;
/** One connection lasts at most this long; the client reconnects with `Last-Event-ID` and misses nothing. */
const LIVE_CONNECTION_MS = 10 * 60 * 1000;
/** Frames a live client leaves unread beyond this are not held: the client is dropped and resumes. */
const LIVE_MAX_BACKLOG_BYTES = 256 * 1024;

const liveHeaders = z.strictObject({
  "last-event-id": z
    .string()
    .regex(LIVE_EVENT_ID, "must be an id this stream sent (<RFC 3339 time>~<audit id>)")
    .optional(),
});
/** The resume header of both audit streams, as their API description states it. */
const lastEventIdParameter = {
  name: "Last-Event-ID",
  in: "header",
  required: false,
  schema: { type: "string", pattern: LIVE_EVENT_ID.source },
} as const;

route(
  "liveStream",
  {
    methods: ["GET"],
    route: "live/stream",
    role: "Reader",
    openapi: {
      summary: "Verified core-stage frames as server-sent events (resumable by Last-Event-ID)",
      description:
        "Frames named `live` whose data has `kind` (`event_ingested`, `verdict`, `severity_changed`, `approval_needed`, `approval_decided`, `denied`, `failed_result`, `action_succeeded`), `audit_id`, `at`, `replay` and bounded allow-listed ids, read from the durable audit log and filtered by the caller's role. `Last-Event-ID` resumes after the given frame (frames within the last hour are replayed with `replay: true`); a `gap` frame says more than 1000 entries were missed. Comment heartbeats every 15 s; a connection ends after 10 minutes or when the client leaves 256 KiB unread, and the client resumes. See docs/web-chat.md.",
      parameters: [lastEventIdParameter],
      responses: {
        "200": { description: "the event stream", content: { "text/event-stream": { schema: { type: "string" } } } },
        ...validationFailed,
      },
    },
  },
  async (request, scope) =>
    auditStream(request, scope, (channel, options) =>
      relayLive(channel, { ...options, audit: appContext.audit, pollMs: LIVE_POLL_MS, retentionMs: LIVE_RETENTION_MS }),
    ),
);

/**
 * The shared shape of the two audit-following streams (`/live/stream`, `/agents/stream`): the
 * `Last-Event-ID` header checked, the caller's role, and a resumable SSE stream whose relay ends
 * with the connection (client gone, slow reader, or lifetime over).
 */
async function auditStream(
  request: HttpRequest,
  scope: RouteScope,
  relay: (channel: SseChannel, options: { role: Role; after?: LiveCursor }) => Promise<void>,
) {
  const parsed = liveHeaders.safeParse({ "last-event-id": request.headers.get("last-event-id") ?? undefined });
  if (!parsed.success) throw new ValidationError(zodIssues(parsed.error, "header", {}));
  const role = effectiveRole(callerOf(scope));
  if (!role) throw new ForbiddenError("this action needs the Reader role or higher");
  const lastEventId = parsed.data["last-event-id"];
  const connection = scope.connection();
  const { body, channel } = createSseStream({
    heartbeatMs: HEARTBEAT_MS,
    clientAbortSignal: AbortSignal.any([connection.abortSignal, AbortSignal.timeout(LIVE_CONNECTION_MS)]),
    backlogBytes: connection.backlogBytes,
    maxBacklogBytes: LIVE_MAX_BACKLOG_BYTES,
    retryMs: 2000,
  });
  const after = lastEventId ? parseCursor(lastEventId) : undefined;
  void relay(channel, { role, ...(after ? { after } : {}) }).catch((error: unknown) =>
    scope.logger.warn("event stream ended by an error", { error }),
  );
  return { status: 200, headers: { ...SSE_HEADERS }, body };
}

route(
  "agentsStream",
  {
    methods: ["GET"],
    route: "agents/stream",
    role: "Reader",
    openapi: {
      summary: "Agent runtime-state frames as server-sent events (resumable by Last-Event-ID)",
      description:
        "First a `runtime` frame (`broker: absent`, `source: audit_log`, `keepalive_ms`): this product has no message broker, so frames come from the durable audit log and SSE comment keep-alives go out every 15 s while idle. Then frames named `agent` — the `/agents/activity` entry of each inventory scan, ontology conversion, current-state read and read investigation, with `state` (`completed`, `failed`, `refused`), `at`, `audit_id` and `replay`, in audit order and filtered by the caller's role. `Last-Event-ID` resumes like `/live/stream` (1-hour window, `gap` frame beyond 1000 entries); a connection ends after 10 minutes or when the client leaves 256 KiB unread. See docs/web-chat.md.",
      parameters: [lastEventIdParameter],
      responses: {
        "200": { description: "the event stream", content: { "text/event-stream": { schema: { type: "string" } } } },
        ...validationFailed,
      },
    },
  },
  async (request, scope) =>
    auditStream(request, scope, (channel, options) => {
      // No message broker in this product (spec §4): say so, then follow the durable audit log.
      channel.send({
        event: "runtime",
        data: { broker: "absent", source: "audit_log", keepalive_ms: HEARTBEAT_MS, poll_ms: LIVE_POLL_MS },
      });
      return relayAudit(
        channel,
        "agent",
        followAudit(
          { audit: appContext.audit, pollMs: LIVE_POLL_MS, retentionMs: LIVE_RETENTION_MS },
          { ...options, abortSignal: channel.abortSignal },
          agentFramesOf,
        ),
      );
    }),
);

/** A read investigation's body is small: three commands of at most 2,000 characters. */
const INVESTIGATION_BODY_LIMIT_BYTES = 16 * 1024;
/** A streamed investigation a client leaves unread beyond this is dropped (its reads stop). */
const INVESTIGATION_MAX_BACKLOG_BYTES = 1024 * 1024;

route(
  "readInvestigations",
  {
    methods: ["POST"],
    route: "read-investigations",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "Run one to three canonical read commands: direct, streamed or detached, chosen from recorded latency",
      description:
        "Every command is checked before anything runs (an installed read-class tool the caller's role holds, valid arguments, no duplicates; a tool above the role is 403). The execution is chosen from the 90th-percentile `duration_ms` of each tool's latest 20 audited calls, summed: at most 2 s runs `direct` (JSON answer); at most 30 s, or a tool with no history, answers `streamed` (`text/event-stream`: `decision`, one `activity` per read, `result`); above that `detached` (a durable operation; poll `operation_status_url`; the result is the `console.read_investigation` audit entry). Reads run serially; a failed or unavailable read stops the rest and the result is the deterministic unverified abstention. See docs/web-chat.md.",
      requestBody: jsonBodyOf(readInvestigationBody),
      responses: {
        ...ok("a direct result, or a detached operation (`mode` says which)", "ReadInvestigation"),
        "400": errorResponse("malformed JSON"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const body = await parseJsonBody(request, readInvestigationBody, INVESTIGATION_BODY_LIMIT_BYTES);
    const caller = callerOf(scope);
    const role = effectiveRole(caller);
    if (!role) throw new ForbiddenError("this action needs the Reader role or higher");
    const { registry, coordinator } = await consoleParts();
    const plan = planInvestigation(registry, role, body.commands);
    const choice = await chooseFromHistory(appContext.audit, plan);
    const investigationId = newOperationId();
    const decision = {
      mode: choice.mode,
      reason: choice.reason,
      estimate_ms: choice.estimate_ms,
      latency: choice.latency,
      thresholds: choice.thresholds,
    };
    const head = { investigation_id: investigationId, mode: choice.mode, decision };
    const record = (result: InvestigationResult) =>
      recordInvestigation(appContext.audit, {
        caller,
        investigationId,
        requestId: scope.requestId,
        plan,
        choice,
        result,
      });

    if (choice.mode === "direct") {
      const result = await runInvestigation(coordinator, { caller, plan, requestId: scope.requestId });
      const entry = await record(result);
      return jsonResult(
        200,
        { ...head, result: investigationView(result, entry.audit_id), meta: { request_id: scope.requestId } },
        scope.requestId,
      );
    }

    if (choice.mode === "detached") {
      const input: ReadInvestigationInput = {
        investigation_id: investigationId,
        request_id: scope.requestId,
        caller,
        plan,
        choice: { mode: choice.mode, estimate_ms: choice.estimate_ms, reason: choice.reason },
      };
      await scope.durable().startNew(Orchestrations.readInvestigation, { instanceId: investigationId, input });
      const operation = await getOperation(scope.durable(), investigationId, {
        pollAfterSeconds: appContext.config.jobPollIntervalSeconds,
      });
      return jsonResult(
        200,
        { ...head, operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } },
        scope.requestId,
      );
    }

    const connection = scope.connection();
    const { body: stream, channel } = createSseStream({
      heartbeatMs: HEARTBEAT_MS,
      clientAbortSignal: connection.abortSignal,
      backlogBytes: connection.backlogBytes,
      maxBacklogBytes: INVESTIGATION_MAX_BACKLOG_BYTES,
    });
    channel.send({ event: "decision", data: { ...head, request_id: scope.requestId } });
    void (async () => {
      try {
        const result = await runInvestigation(coordinator, {
          caller,
          plan,
          requestId: scope.requestId,
          abortSignal: channel.abortSignal,
          onActivity: (activity) => channel.send({ event: "activity", data: activity }),
        });
        const entry = await record(result);
        channel.send({ event: "result", data: { ...head, result: investigationView(result, entry.audit_id) } });
      } catch (error) {
        scope.logger.error("streamed read investigation failed", { error });
        channel.send({ event: "error", data: { detail: "the investigation failed", request_id: scope.requestId } });
      } finally {
        channel.close();
      }
    })();
    return { status: 200, headers: { ...SSE_HEADERS }, body: stream };
  },
);

/** A detached investigation's id (an operation id). */
const investigationPath = z.strictObject({
  investigation_id: z.string().regex(/^op-[0-9a-f]{32}$/, "an investigation id (op- and 32 hex digits)"),
});

route(
  "readInvestigationResult",
  {
    methods: ["GET"],
    route: "read-investigations/{investigation_id}",
    role: "Reader",
    durable: true,
    openapi: {
      summary: "The result of a detached read investigation, for the principal that started it",
      description:
        "`status` is `running` until the durable operation ends, then `succeeded` (every read answered) or `failed` (a read failed or was unavailable: `result.outcome` is `abstained`, the deterministic unverified abstention) with `result` as a direct answer carries it (`outcome`, `text`, `activities`, `tool_results`, `evidence_refs`, `audit_ids` ending with the investigation's own `console.read_investigation` entry). Only the principal that started it reads it, and only while its role still holds the plan's highest tool floor (403 naming it); an unknown id and another principal's investigation are both 404, so ids reveal nothing. See docs/web-chat.md.",
      parameters: parametersOf(investigationPath, "path"),
      responses: {
        ...ok("the investigation's status and, when it ended, its result", "ReadInvestigationResult"),
        "400": errorResponse("malformed investigation id"),
        "404": errorResponse("no such investigation of the caller"),
      },
    },
  },
  async (request, scope) => {
    const { investigation_id: investigationId } = parsePath(request, investigationPath);
    const caller = callerOf(scope);
    const role = effectiveRole(caller);
    if (!role) throw new ForbiddenError("this action needs the Reader role or higher");
    const view = detachedInvestigationView(
      investigationId,
      await scope.durable().getInstance(investigationId),
      caller,
      role,
    );
    const operation = await getOperation(scope.durable(), investigationId, {
      pollAfterSeconds: appContext.config.jobPollIntervalSeconds,
    });
    return jsonResult(
      200,
      {
        investigation_id: investigationId,
        mode: "detached",
        ...view,
        operation_status_url: operation.links.self,
        meta: { request_id: scope.requestId },
      },
      scope.requestId,
    );
  },
);

// Spec §4 projections this product has no model for (docs/decisions/0021): a typed unavailable
// answer (§7 item 1: optional projections treat 501 as unavailable), after the Reader check. Not in
// the OpenAPI description: an operation with no success answer has nothing for a client to call.
for (const [name, path, what] of [
  ["forecastLearning", "forecast-learning", "forecast closure and publishing state"],
  ["dynamicAssurance", "dynamic-assurance", "scalar and graph model summaries and trajectory closure counts"],
] as const)
  route(
    name,
    {
      methods: ["GET"],
      route: path,
      role: "Reader",
    },
    async (_request, scope) =>
      errorResult(
        501,
        `unavailable: this product keeps no ${what}; its operations core is deterministic rules and a verifier (docs/decisions/0021-no-forecast-or-assurance-models.md)`,
        scope.requestId,
      ),
  );

route(
  "consoleChatHealth",
  {
    methods: ["GET"],
    route: "chat/health",
    role: "Reader",
    openapi: { summary: "Whether the console's narrator is ready", responses: ok("status", "ChatHealth") },
  },
  async (_request, scope) => {
    const narrator = (await consoleParts()).coordinator.narrator;
    // Read from the process directly: "none" has no worker, so the deterministic path is what is ready.
    return jsonResult(
      200,
      { status: "ok", narrator: narrator.name, narrator_ready: narrator.available(), deterministic_ready: true },
      scope.requestId,
    );
  },
);

route(
  "agentsActivity",
  {
    methods: ["GET"],
    route: "agents/activity",
    role: "Reader",
    openapi: { summary: "Recent agent activity, newest first", responses: ok("activity", "AgentActivity") },
  },
  async (_request, scope) => jsonResult(200, await agentActivity(appContext.audit), scope.requestId),
);

route(
  "approvalsQueue",
  {
    methods: ["GET"],
    route: "approvals",
    role: "Reader",
    openapi: {
      summary: "The pending approvals queue as the caller may see it",
      description:
        "Readers get only the existence and count of queued approvals (spec §2.2). Approvers and Owners get each pending item (target, proposed action, requester, reason, severity, times and `action_hash`, which a decision presents) with `may_decide` and, when false, why (`no_self_approval`, `decider_role_below_action_floor`) and the role it needs — the approval authority's answer, which `approve_hil` checks again. Decide with `POST /api/approvals/{approval_id}/decision` after a fresh sign-in (or `approve_hil … action_hash=…` through `POST /api/chat`, which needs the same fresh sign-in). See docs/web-chat.md.",
      responses: ok("the queue", "ApprovalsQueue"),
    },
  },
  async (_request, scope) => {
    const caller = callerOf(scope);
    const role = effectiveRole(caller);
    if (!role) throw new ForbiddenError("this action needs the Reader role or higher");
    const { approvalStore, approvals } = await consoleParts();
    const now = Date.now();
    // An item past its expiry is timing out (its orchestration's timer settles it): not decidable.
    const pending = (await approvalStore.listPending()).filter((i) => Date.parse(i.expires_at) > now);
    if (!meetsFloor(role, "Approver"))
      return jsonResult(200, { role, count: pending.length, details: "count_only", items: [] }, scope.requestId);
    const items = pending.map((i) => {
      const authority = approvals.authority.mayDecide(
        { oid: caller.oid, role },
        { requesterOid: i.requester.oid, actionType: i.action.action_type },
      );
      return {
        ...pendingApprovalView(i),
        may_decide: authority.allowed,
        required_role: authority.required_role,
        ...(authority.allowed ? {} : { refusal: authority.reason }),
      };
    });
    return jsonResult(200, { role, count: pending.length, details: "full", items }, scope.requestId);
  },
);

/** A decision from the console's approvals queue: the item's `action_hash` is required here. */
const decisionPath = z.strictObject({ approval_id: approvalIdSchema });
const decisionBody = z.strictObject({
  decision: z.enum(["approve", "reject"]),
  justification: z.string().trim().min(3, "give a short justification").max(500),
  action_hash: z.string().regex(/^[0-9a-f]{64}$/, "the item's action_hash (64 hex digits)"),
});

/** The HTTP answer of a tool refusal of `approve_hil` (the same invariants, in the spec's envelopes). */
function decisionRefusal(error: ToolError): Error {
  switch (error.type) {
    case "reauthentication_required":
      return new ReauthenticationRequiredError(Number(error.details?.max_age_seconds), error.message);
    case "not_found":
      return new NotFoundError(error.message);
    case "self_approval":
    case "forbidden":
      return new ForbiddenError(error.message);
    case "conflict":
    case "verifier_abstained":
    case "verifier_denied":
      return new ConflictError(error.message);
    default:
      return error;
  }
}

route(
  "approvalDecision",
  {
    methods: ["POST"],
    route: "approvals/{approval_id}/decision",
    role: "Approver",
    durable: true,
    openapi: {
      summary: "Decide one queued approval, with a fresh sign-in and the item's action_hash",
      description:
        "The console's approvals queue decides through this route (spec §5 item 5: the authenticated round trip re-authenticates and re-validates `action_hash`). The bearer token's `auth_time` (the last interactive sign-in) must be at most `SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS` old (default 300): otherwise 401 with `WWW-Authenticate: Bearer error=\"insufficient_user_authentication\", max_age=…` (RFC 9470) and nothing is decided; the web app then signs in again with `prompt=login`. The same invariants as `approve_hil`: self-approval and a role below the action's floor 403, an unknown id 404, a different `action_hash` or a verifier that no longer finds the action eligible 409; a decision after expiry answers the existing timeout, the same decider and decision again the existing evidence. See docs/web-chat.md.",
      parameters: parametersOf(decisionPath, "path"),
      requestBody: jsonBodyOf(decisionBody),
      responses: {
        ...ok("the decision as recorded", "ApprovalDecision"),
        "400": errorResponse("malformed JSON or approval id"),
        "404": errorResponse("no such approval"),
        "409": errorResponse("the action_hash differs, or the verifier no longer finds the action eligible"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const { approval_id: approvalId } = parsePath(request, decisionPath);
    const body = await parseJsonBody(request, decisionBody, 16 * 1024);
    const caller = callerOf(scope);
    const { approvals } = await consoleParts();
    let result: Awaited<ReturnType<typeof approvals.decide>>;
    try {
      result = await approvals.decide({
        approvalId,
        actor: { oid: caller.oid, name: caller.name },
        role: effectiveRole(caller),
        decision: body.decision,
        justification: body.justification,
        actionHash: body.action_hash,
        requestId: scope.requestId,
        now: new Date(),
        // A bearer token without the claim is never fresh.
        authTime: caller.auth_time ?? null,
      });
    } catch (error) {
      throw error instanceof ToolError ? decisionRefusal(error) : error;
    }
    return jsonResult(200, { ...decisionView(result), meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

route(
  "healthz",
  {
    methods: ["GET"],
    route: "healthz",
    openapi: { summary: "Console liveness (public)", responses: { ...ok("alive", "Health"), ...refusedBeforeRouting } },
  },
  async (_request, scope) => jsonResult(200, { status: "ok" }, scope.requestId),
);

route(
  "consoleRpc",
  {
    methods: ["POST"],
    route: "rpc",
    role: "Reader",
    openapi: {
      summary: "JSON-RPC 2.0: tools.search and tools.describe (descriptors only)",
      requestBody: jsonBodyOf(rpcBody),
      responses: {
        ...ok("the result", "RpcResponse"),
        "400": errorResponse("malformed JSON"),
        "404": errorResponse("no such tool for the caller's role"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const call = await parseJsonBody(request, rpcBody, 16 * 1024);
    const role = effectiveRole(callerOf(scope));
    if (!role) throw new ForbiddenError("this action needs the Reader role or higher");
    const { registry } = await consoleParts();
    if (call.method === "tools.search")
      return jsonResult(
        200,
        { jsonrpc: "2.0", id: call.id, result: { role, tools: registry.search(role, call.params.query) } },
        scope.requestId,
      );
    const descriptor = call.params.name ? registry.describe(role, call.params.name) : undefined;
    if (!descriptor) throw new NotFoundError(`no tool ${call.params.name ?? "(none given)"} for the ${role} role`);
    return jsonResult(200, { jsonrpc: "2.0", id: call.id, result: descriptor }, scope.requestId);
  },
);
