import { terminalTicketRequestSchema } from "../shared/dashboard/api-schemas.js";
import { errorResponse, jsonBody, jsonContent, validationFailed } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody } from "../shared/http/validation.js";
import { TERMINAL_TICKET_TTL_SECONDS } from "../shared/terminal/terminal-tickets.js";
import { terminalTicketService } from "./composition/dashboard-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** A ticket is a credential for 30 s: never kept by browsers or proxies. */
const NO_STORE = { "Cache-Control": "no-store" };

/**
 * Issues a terminal ticket (decision 0020): Contributor or higher, single use, bound to the caller
 * and the page's `Origin`, valid for 30 s; only its digest is stored. The route's floor is Reader so
 * that a Reader's refusal is audited with who asked (`terminal.ticket`, `denied`).
 */
route(
  "terminalTicket",
  {
    methods: ["POST"],
    route: "terminal/tickets",
    role: "Reader",
    openapi: {
      summary: "Issue a single-use ticket for the browser terminal (Contributor; audited, also when refused)",
      description:
        "Send the page's Origin header (browsers do). The ticket opens one WebSocket at the job API's GET /v1/terminal within 30 s, from the same origin, together with the caller's own access token. Readers are refused (403).",
      requestBody: jsonBody("TerminalTicketRequest"),
      responses: {
        "201": { description: "the ticket (Cache-Control: no-store)", content: jsonContent("TerminalTicket") },
        "400": errorResponse("malformed JSON, wrong content type, or no Origin header"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
      },
    },
  },
  async (request, scope) => {
    const service = terminalTicketService();
    const caller = callerOf(scope);
    await service.requireTerminalRole(caller, { requestId: scope.requestId });
    await parseJsonBody(request, terminalTicketRequestSchema, 1024);
    const issued = await service.issue(caller, request.headers.get("origin"), {
      requestId: scope.requestId,
    });
    return jsonResult(
      201,
      { ...issued, expires_in_seconds: TERMINAL_TICKET_TTL_SECONDS, meta: { request_id: scope.requestId } },
      scope.requestId,
      NO_STORE,
    );
  },
);
