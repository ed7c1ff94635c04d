import { errorResponse, jsonBodyOf, ok, refusedBeforeRouting, validationFailed } from "../shared/http/openapi.js";
import { z } from "zod";
import { agentActivity } from "../shared/console/activity.js";
import { streamChatTurn } from "../shared/console/chat-stream.js";
import { LIVE_EVENT_ID, parseCursor, relayLive } from "../shared/console/live-feed.js";
import { createSseStream, SSE_HEADERS } from "../shared/http/sse.js";
import { effectiveRole } from "../shared/console/tools/tool.js";
import { ForbiddenError, NotFoundError, ValidationError } from "../shared/errors.js";
import { errorResult, jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody, zodIssues } from "../shared/http/validation.js";
import { appContext } from "./composition/app-context.js";
import { approvalHooks } from "./composition/approval-hooks.js";
import { consoleParts } from "./composition/console-deps.js";
import { callerOf, route } from "./composition/http-route.js";

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
      parameters: [
        {
          name: "Last-Event-ID",
          in: "header",
          required: false,
          schema: { type: "string", pattern: LIVE_EVENT_ID.source },
        },
      ],
      responses: {
        "200": { description: "the event stream", content: { "text/event-stream": { schema: { type: "string" } } } },
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
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
    void relayLive(channel, {
      audit: appContext.audit,
      pollMs: LIVE_POLL_MS,
      retentionMs: LIVE_RETENTION_MS,
      role,
      after: lastEventId ? parseCursor(lastEventId) : undefined,
    }).catch((error: unknown) => scope.logger.warn("live stream ended by an error", { error }));
    return { status: 200, headers: { ...SSE_HEADERS }, body };
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
