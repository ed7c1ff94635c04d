import type { CloudAuthorizationFailure } from "../../auth/cloud-authorization.js";
import type { Logger } from "../../logging/logger.js";
import type { EventInput, EventLog } from "../events.js";

/**
 * The control plane's own signals as events (issue 13 §1, DESIGN §9), one builder per signal so
 * every source words an event the same way: a deterministic `idempotency_key` (a repeat of the same
 * happening is recorded once), the `resource_ref` whose type the rule catalog matches
 * (`config/ops-rules.json`), and a payload of data only, with failure texts cut to their first line
 * and URLs removed (a storage URL never reaches the event log).
 */

/** An error's first line, without URLs, at most 500 characters: what an event may say of a failure. */
export function failureText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return (text.split("\n")[0] ?? "")
    .replace(/[a-z][a-z0-9+.-]*:\/\/\S+/gi, "[url]")
    .trim()
    .slice(0, 500);
}

/**
 * A database warm-up that failed. `attempt` names the warm-up (the operation's id), so a retried
 * activity or a replayed orchestration of the same warm-up records one event and the next
 * warm-up that fails records its own.
 */
export function warmupFailedEvent(input: {
  database: string;
  release: string;
  attempt: string;
  mode: "local" | "cluster";
  reason: string;
  failedNodes?: readonly string[];
}): EventInput {
  return {
    idempotency_key: `database.warmup_failed/${input.database}/${input.release}/${input.attempt}`,
    source: `database.warmup.${input.mode}`,
    event_type: "database.warmup_failed",
    correlation_id: input.attempt,
    resource_ref: `blast_database/${input.database}`,
    payload: { release: input.release, mode: input.mode, reason: input.reason, failed_nodes: input.failedNodes ?? [] },
  };
}

/**
 * An identity refused by Azure for want of a role. One event per (role, scope) per UTC day: the
 * operator hears of a missing assignment once a day while it stays missing, not on every refusal.
 */
export function roleAssignmentMissingEvent(
  failure: CloudAuthorizationFailure,
  input: { source: string; at: Date },
): EventInput {
  const day = input.at.toISOString().slice(0, 10);
  const subject = `${failure.role}@${failure.scope}`;
  return {
    idempotency_key: `role_assignment.missing/${subject}/${day}`,
    source: input.source,
    event_type: "role_assignment.missing",
    detected_at: input.at,
    correlation_id: subject.slice(0, 200),
    resource_ref: `role_assignment/${subject}`.slice(0, 500),
    payload: { code: failure.code, role: failure.role, scope: failure.scope, message: failure.message },
  };
}

/**
 * Records a signal's event without letting the recording fail the work that observed the signal:
 * the signal's own error (a failed warm-up, a refusal) is what its caller must see. A recording
 * that fails is logged.
 */
export async function recordSignal(
  events: Pick<EventLog, "record">,
  input: EventInput,
  logger: Pick<Logger, "warn">,
): Promise<void> {
  try {
    await events.record(input);
  } catch (error) {
    logger.warn("signal event not recorded", {
      event_type: input.event_type,
      resource_ref: input.resource_ref,
      error: failureText(error),
    });
  }
}

/** A refusal observer for `explainCloudAuthorization`: each refusal becomes a `role_assignment.missing` event. */
export function reportMissingRoles(
  events: Pick<EventLog, "record">,
  logger: Pick<Logger, "warn">,
  source: string,
  now: () => Date = () => new Date(),
) {
  return (failure: CloudAuthorizationFailure) =>
    recordSignal(events, roleAssignmentMissingEvent(failure, { source, at: now() }), logger);
}
