/**
 * Fresh authentication for approval decisions (spec operator-console.md §5 item 5: an approval
 * "re-authenticates"). The access token's `auth_time` claim (OpenID Connect Core §2: when the user
 * last signed in interactively) must lie within a stated window; a silently renewed token keeps
 * the old `auth_time`, so only a new interactive sign-in (`prompt=login`) makes it fresh again.
 */

/** The default window: a decision needs a sign-in within the last 5 minutes (`SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS`). */
export const DEFAULT_REAUTH_MAX_AGE_SECONDS = 300;

/** Clock skew tolerated for an `auth_time` slightly in the future (the token validator allows the same). */
const FUTURE_SKEW_SECONDS = 60;

/** Whether a sign-in is recent enough, and if not, why. */
export type Freshness =
  | { fresh: true; age_seconds: number }
  | { fresh: false; reason: "no_auth_time" | "stale" | "future"; age_seconds: number | null };

/**
 * Judges `authTime` (seconds since the epoch, from the token; null or undefined when it carries
 * none) against `maxAgeSeconds` at `nowMs`. A missing claim is never fresh: fail closed.
 */
export function authenticationFreshness(
  authTime: number | null | undefined,
  nowMs: number,
  maxAgeSeconds: number,
): Freshness {
  if (typeof authTime !== "number" || !Number.isFinite(authTime))
    return { fresh: false, reason: "no_auth_time", age_seconds: null };
  const age = Math.floor(nowMs / 1000 - authTime);
  if (age < -FUTURE_SKEW_SECONDS) return { fresh: false, reason: "future", age_seconds: age };
  if (age > maxAgeSeconds) return { fresh: false, reason: "stale", age_seconds: age };
  return { fresh: true, age_seconds: Math.max(0, age) };
}

/** The sentence a refused decision carries (the same on every route and in the console). */
export function reauthenticationText(maxAgeSeconds: number): string {
  return `re-authentication required: sign in again (within the last ${maxAgeSeconds} s) to decide an approval. Nothing was decided.`;
}
