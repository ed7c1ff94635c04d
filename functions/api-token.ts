import { errorResponse, ok, retryLater } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { apiTokenSettings } from "./composition/dashboard-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** Responses carrying the token must not be kept by browsers or proxies. */
const NO_STORE = { "Cache-Control": "no-store" };

/** The token panel's status (Reader): never the token itself. */
route(
  "apiTokenStatus",
  {
    methods: ["GET"],
    route: "settings/api-token",
    role: "Reader",
    openapi: { summary: "The job API token's status (never the token)", responses: ok("status", "ApiTokenStatus") },
  },
  async (_request, scope) => jsonResult(200, await apiTokenSettings(scope).getStatus(), scope.requestId),
);

/**
 * Reveals the current token (Owner; audited, also when denied). The route's floor is Reader so that
 * the service can audit a refused attempt with who tried it.
 */
route(
  "apiTokenReveal",
  {
    methods: ["POST"],
    route: "settings/api-token/reveal",
    role: "Reader",
    openapi: {
      summary: "Reveal the job API token (Owner; audited, also when refused)",
      responses: {
        ...ok("the token (Cache-Control: no-store)", "ApiTokenReveal"),
        "404": errorResponse("no token is configured"),
        "503": retryLater("the secret store is unavailable"),
      },
    },
  },
  async (_request, scope) => {
    const token = await apiTokenSettings(scope).reveal(callerOf(scope), { requestId: scope.requestId });
    return jsonResult(200, { api_token: token }, scope.requestId, NO_STORE);
  },
);

/**
 * Rotates the token (Owner; audited, also when denied or failed). The new token is returned once;
 * the old one stays valid for `API_TOKEN_GRACE_SECONDS` so running clients can switch over.
 */
route(
  "apiTokenRegenerate",
  {
    methods: ["POST"],
    route: "settings/api-token/regenerate",
    role: "Reader",
    openapi: {
      summary: "Rotate the job API token (Owner; audited, also when refused or failed)",
      description: "The new token is answered once; the old one stays valid for API_TOKEN_GRACE_SECONDS.",
      responses: {
        ...ok("the new token (Cache-Control: no-store)", "ApiTokenRegenerated"),
        "503": retryLater("the secret store is unavailable"),
      },
    },
  },
  async (_request, scope) => {
    const state = await apiTokenSettings(scope).regenerate(callerOf(scope), { requestId: scope.requestId });
    return jsonResult(
      200,
      {
        api_token: state.current.value,
        created_at: state.current.created_at,
        previous_valid_until: state.previous?.valid_until ?? null,
      },
      scope.requestId,
      NO_STORE,
    );
  },
);
