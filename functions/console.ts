import { errorResponse, jsonBodyOf, ok, refusedBeforeRouting, validationFailed } from "../shared/http/openapi.js";
import { z } from "zod";
import { agentActivity } from "../shared/console/activity.js";
import { effectiveRole } from "../shared/console/tools/tool.js";
import { ForbiddenError, NotFoundError } from "../shared/errors.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody } from "../shared/http/validation.js";
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
