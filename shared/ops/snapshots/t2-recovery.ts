import type { AttemptLog, FailureClass, ProposerAttempt, RouteRole } from "./attempt-log.js";

/**
 * Recovery of proposed actions the verifier did not find eligible, judged per (action type,
 * target) over the retained attempts:
 * - `none`: no retained attempt failed;
 * - `recovering`: a key's latest attempts failed, fewer than RECOVERY_ATTEMPT_LIMIT in a row;
 * - `recovered`: every key that failed has since had an eligible attempt;
 * - `exhausted`: a key failed RECOVERY_ATTEMPT_LIMIT times in a row and has not recovered.
 * The whole answer is the worst key's state (exhausted > recovering > recovered > none).
 */
export const RECOVERY_STATES = ["none", "recovered", "recovering", "exhausted"] as const;
export type RecoveryState = (typeof RECOVERY_STATES)[number];
export const RECOVERY_ATTEMPT_LIMIT = 3;
export const T2_RECOVERY_SCHEMA_VERSION = 1;
/** How many of the newest sanitized attempts the snapshot carries besides the summary. */
const RECENT_ATTEMPTS = 20;

export interface T2RecoverySummary {
  retained_attempt_count: number;
  recovery_state: RecoveryState;
  /** The route role and failure class of the latest attempt of the key that set the state (of the latest attempt for `none`). */
  route_role: RouteRole | null;
  failure_class: FailureClass | null;
  /** When the attempt that set the state was made. */
  last_attempt_at: string | null;
  legacy_detail_gap: boolean;
  recent_attempts: ProposerAttempt[];
}

/** Summarises retained attempts (newest first) into the T2 recovery snapshot's body. */
export function summariseRecovery(attempts: readonly ProposerAttempt[], legacy_detail_gap: boolean): T2RecoverySummary {
  const byKey = new Map<string, ProposerAttempt[]>();
  for (const a of attempts) {
    const key = `${a.action_type} ${a.target_ref}`;
    byKey.set(key, [...(byKey.get(key) ?? []), a]);
  }
  let state: RecoveryState = "none";
  let decisive: ProposerAttempt | undefined = attempts[0];
  for (const keyAttempts of byKey.values()) {
    // Newest first: the failure streak is the run of failures before the first eligible one.
    const streak = keyAttempts.findIndex((a) => a.failure_class === "none");
    const failuresInARow = streak === -1 ? keyAttempts.length : streak;
    const everFailed = keyAttempts.some((a) => a.failure_class !== "none");
    const keyState: RecoveryState =
      failuresInARow >= RECOVERY_ATTEMPT_LIMIT
        ? "exhausted"
        : failuresInARow > 0
          ? "recovering"
          : everFailed
            ? "recovered"
            : "none";
    const latest = keyAttempts[0];
    const worse = RECOVERY_STATES.indexOf(keyState) > RECOVERY_STATES.indexOf(state);
    const sameButNewer =
      keyState === state &&
      keyState !== "none" &&
      latest !== undefined &&
      decisive !== undefined &&
      latest.attempted_at > decisive.attempted_at;
    if (worse || sameButNewer) {
      state = keyState;
      decisive = latest;
    }
  }
  return {
    retained_attempt_count: attempts.length,
    recovery_state: state,
    route_role: decisive?.route_role ?? null,
    failure_class: decisive?.failure_class ?? null,
    last_attempt_at: decisive?.attempted_at ?? null,
    legacy_detail_gap,
    recent_attempts: attempts.slice(0, RECENT_ATTEMPTS),
  };
}

/** Prunes attempts past retention, then reads the retained attempt log and summarises it. */
export async function observeRecovery(log: AttemptLog): Promise<T2RecoverySummary> {
  await log.prune();
  const { attempts, legacy_detail_gap } = await log.retained();
  return summariseRecovery(attempts, legacy_detail_gap);
}
