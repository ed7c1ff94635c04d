import { type Caller, hasRoleAtLeast } from "../auth/roles.js";
import { ForbiddenError, NotFoundError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { AuditInput, AuditLog } from "../ops/audit.js";
import type { EventLog } from "../ops/events.js";
import type { ApiTokenService, ApiTokenState } from "./api-tokens.js";

/** What the API token settings are built from. */
export interface ApiTokenSettingsDependencies {
  /** The job API's shared token, in the secret store both deployables read. */
  tokens: Pick<ApiTokenService, "state" | "rotate">;
  audit: Pick<AuditLog, "record">;
  events: Pick<EventLog, "record">;
  /** The request's logger. */
  logger: Logger;
  /** How long a regenerated token's predecessor stays valid. */
  graceSeconds: number;
  /** The clock (tests set it). */
  now?: () => Date;
}

/** Options of the privileged acts: the request they are audited under. */
export interface ApiTokenActOptions {
  requestId: string;
}

/** The token panel's status: never the token itself. */
export interface ApiTokenStatus {
  configured: boolean;
  last_four: string | null;
  created_at: string | null;
  /** The last rotation that kept a predecessor valid (null for a first token or a no-grace rotation). */
  rotated_at: string | null;
  /** Only while the predecessor is still accepted. */
  previous_valid_until: string | null;
}

type Action = "api_token.reveal" | "api_token.regenerate";

const TARGET = "api_token";

function lastFour(token: string): string {
  return token.slice(-4);
}

/**
 * The dashboard's API token panel: the status (any reader), and reveal and regenerate (Owner
 * only). Reveal and regenerate are audited with the caller, also when refused or failed: a refused
 * attempt at the shared token is itself worth knowing about.
 */
export function createApiTokenSettings(dependencies: ApiTokenSettingsDependencies) {
  const { tokens, audit, events, logger, graceSeconds } = dependencies;
  const now = dependencies.now ?? (() => new Date());

  function auditBase(caller: Caller, action: Action, options: ApiTokenActOptions): Omit<AuditInput, "outcome"> {
    return { actor: { oid: caller.oid, name: caller.name }, action, target: TARGET, request_id: options.requestId };
  }

  /**
   * The Owner check of reveal and regenerate. Their routes admit any reader (a missing or invalid
   * token is still 401) so that a refusal here can be audited (`denied`) with who tried.
   */
  async function requireOwner(caller: Caller, action: Action, options: ApiTokenActOptions): Promise<void> {
    if (hasRoleAtLeast(caller.roles, "Owner")) return;
    await audit.record({ ...auditBase(caller, action, options), outcome: "denied", details: { roles: caller.roles } });
    throw new ForbiddenError("this action needs the Owner role");
  }

  return {
    /** Whether a token is configured, its last four characters and its rotation times. */
    async getStatus(): Promise<ApiTokenStatus> {
      const state = await tokens.state();
      const previousValidUntil = state?.previous?.valid_until;
      return {
        configured: state !== undefined,
        last_four: state ? lastFour(state.current.value) : null,
        created_at: state?.current.created_at ?? null,
        rotated_at: state?.previous?.rotated_at ?? null,
        previous_valid_until: previousValidUntil && new Date(previousValidUntil) > now() ? previousValidUntil : null,
      };
    },

    /** The current token (Owner; audited before it leaves: no record, no reveal). */
    async reveal(caller: Caller, options: ApiTokenActOptions): Promise<string> {
      await requireOwner(caller, "api_token.reveal", options);
      const state = await tokens.state();
      if (!state) throw new NotFoundError("no API token is configured yet: regenerate to create one");
      await audit.record({
        ...auditBase(caller, "api_token.reveal", options),
        outcome: "succeeded",
        details: { last_four: lastFour(state.current.value) },
      });
      return state.current.value;
    },

    /**
     * Replaces the token (Owner; audited, also when it fails) and records a `token.rotated` event.
     * The predecessor stays valid for the grace period so running clients can switch over.
     */
    async regenerate(caller: Caller, options: ApiTokenActOptions): Promise<ApiTokenState> {
      const base = auditBase(caller, "api_token.regenerate", options);
      await requireOwner(caller, "api_token.regenerate", options);
      let state: ApiTokenState;
      try {
        state = await tokens.rotate(graceSeconds);
      } catch (error) {
        await audit.record({ ...base, outcome: "failed", details: { grace_seconds: graceSeconds } });
        throw error;
      }
      const previousValidUntil = state.previous?.valid_until ?? null;
      // The rotation has happened: if recording it fails the caller gets a 500 and can reveal the token.
      const entry = await audit.record({
        ...base,
        outcome: "succeeded",
        details: {
          last_four: lastFour(state.current.value),
          grace_seconds: graceSeconds,
          previous_valid_until: previousValidUntil,
        },
      });
      await events.record({
        idempotency_key: `api_token.regenerate/${entry.audit_id}`,
        source: "dashboard",
        event_type: "token.rotated",
        detected_at: state.current.created_at,
        correlation_id: options.requestId,
        resource_ref: TARGET,
        payload: {
          audit_id: entry.audit_id,
          rotated_at: state.current.created_at,
          previous_valid_until: previousValidUntil,
          actor_oid: caller.oid,
        },
      });
      logger.info("API token regenerated", { audit_id: entry.audit_id, grace_seconds: graceSeconds });
      return state;
    },
  };
}

/** The API token settings' interface. */
export type ApiTokenSettings = ReturnType<typeof createApiTokenSettings>;
