import { type Caller, hasRoleAtLeast } from "../shared/auth/roles.js";
import { jsonResult } from "../shared/http/envelope.js";
import { ForbiddenError, NotFoundError } from "../shared/errors.js";
import type { AuditInput } from "../shared/ops/audit.js";
import { appContext } from "./app-context.js";
import { callerOf, type RouteScope, route } from "./http-route.js";

const audit = appContext.audit;
const events = appContext.events;

/** Responses carrying the token must not be kept by browsers or proxies. */
const NO_STORE = { "Cache-Control": "no-store" };
const TARGET = "api_token";

type Action = "api_token.reveal" | "api_token.regenerate";

function auditBase(caller: Caller, action: Action, requestId: string): Omit<AuditInput, "outcome"> {
  return { actor: { oid: caller.oid, name: caller.name }, action, target: TARGET, request_id: requestId };
}

/**
 * The Owner check of reveal and regenerate. These routes register with the Reader floor (which
 * still refuses a missing or invalid token with 401) and check Owner here, because `route()`'s
 * floor refuses before the handler runs, and a refused attempt at the shared token must be audited
 * (`denied`) with who tried it.
 */
async function requireOwner(caller: Caller, action: Action, requestId: string): Promise<void> {
  if (hasRoleAtLeast(caller.roles, "Owner")) return;
  await audit.record({ ...auditBase(caller, action, requestId), outcome: "denied", details: { roles: caller.roles } });
  throw new ForbiddenError("this action needs the Owner role");
}

function lastFour(token: string): string {
  return token.slice(-4);
}

/** The token panel's status (Reader): never the token itself. */
route("apiTokenStatus", { methods: ["GET"], route: "settings/api-token", role: "Reader" }, async (_request, { requestId }) => {
  const state = await appContext.apiTokens.state();
  const previousValidUntil = state?.previous?.valid_until;
  return jsonResult(
    200,
    {
      configured: state !== undefined,
      last_four: state ? lastFour(state.current.value) : null,
      created_at: state?.current.created_at ?? null,
      // The last rotation that kept a predecessor valid (null for a first token or a no-grace rotation).
      rotated_at: state?.previous?.rotated_at ?? null,
      // Only while the predecessor is still accepted.
      previous_valid_until: previousValidUntil && new Date(previousValidUntil) > new Date() ? previousValidUntil : null,
    },
    requestId,
  );
});

/** Reveals the current token (Owner; audited, also when denied). */
route("apiTokenReveal", { methods: ["POST"], route: "settings/api-token/reveal", role: "Reader" }, async (_request, scope: RouteScope) => {
  const caller = callerOf(scope);
  await requireOwner(caller, "api_token.reveal", scope.requestId);
  const state = await appContext.apiTokens.state();
  if (!state) throw new NotFoundError("no API token is configured yet: regenerate to create one");
  // Audited before the token leaves: no record, no reveal.
  await audit.record({
    ...auditBase(caller, "api_token.reveal", scope.requestId),
    outcome: "succeeded",
    details: { last_four: lastFour(state.current.value) },
  });
  return jsonResult(200, { api_token: state.current.value }, scope.requestId, NO_STORE);
});

/**
 * Rotates the token (Owner; audited, also when denied or failed). The new token is returned once;
 * the old one stays valid for `API_TOKEN_GRACE_SECONDS` so running clients can switch over.
 */
route("apiTokenRegenerate", { methods: ["POST"], route: "settings/api-token/regenerate", role: "Reader" }, async (_request, scope: RouteScope) => {
  const caller = callerOf(scope);
  const base = auditBase(caller, "api_token.regenerate", scope.requestId);
  await requireOwner(caller, "api_token.regenerate", scope.requestId);
  const graceSeconds = appContext.config.apiTokenGraceSeconds;
  let state: Awaited<ReturnType<typeof appContext.apiTokens.rotate>>;
  try {
    state = await appContext.apiTokens.rotate(graceSeconds);
  } catch (error) {
    await audit.record({ ...base, outcome: "failed", details: { grace_seconds: graceSeconds } });
    throw error;
  }
  const previousValidUntil = state.previous?.valid_until ?? null;
  // The rotation has happened: if recording it fails the caller gets a 500 and can reveal the token.
  const entry = await audit.record({
    ...base,
    outcome: "succeeded",
    details: { last_four: lastFour(state.current.value), grace_seconds: graceSeconds, previous_valid_until: previousValidUntil },
  });
  await events.record({
    idempotency_key: `api_token.regenerate/${entry.audit_id}`,
    source: "dashboard",
    event_type: "token.rotated",
    detected_at: state.current.created_at,
    correlation_id: scope.requestId,
    resource_ref: TARGET,
    payload: { audit_id: entry.audit_id, rotated_at: state.current.created_at, previous_valid_until: previousValidUntil, actor_oid: caller.oid },
  });
  scope.logger.info("API token regenerated", { audit_id: entry.audit_id, grace_seconds: graceSeconds });
  return jsonResult(
    200,
    { api_token: state.current.value, created_at: state.current.created_at, previous_valid_until: previousValidUntil },
    scope.requestId,
    NO_STORE,
  );
});
