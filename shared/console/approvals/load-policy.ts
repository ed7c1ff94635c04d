import type { Severity } from "../../ops/rules/rule-catalog.js";

/** How an A1 request is delivered (spec §3 approval load rules). */
export type DeliveryPolicy = "send_now" | "deferred" | "grouped";

/** The approval-load policy: quiet hours (minutes after local midnight) and a grouping interval. */
export interface LoadPolicy {
  quietHours?: { startMinute: number; endMinute: number; timeZone: string };
  /** Non-critical requests go out together at the next multiple of this interval; 0 sends them now. */
  groupIntervalSeconds: number;
  /** Severities sent at once, bypassing quiet hours and grouping (default: `critical`). */
  criticalSeverities?: readonly Severity[];
  /**
   * Fatigue caps: they change only how a group's digest reads, never parking or a decision. Above
   * `maxListedMembers` members a digest lists that many and counts the rest (all stay in the queue).
   */
  fatigue?: { maxListedMembers: number };
}

function minutesIn(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).formatToParts(at);
  return (
    Number(parts.find((p) => p.type === "hour")?.value) * 60 + Number(parts.find((p) => p.type === "minute")?.value)
  );
}

/**
 * Chooses the delivery of one parked request, deterministically from its severity and the time:
 * critical (the policy's critical severities) is sent now, bypassing quiet hours and grouping; otherwise a request in quiet hours is
 * deferred to their end, and others are grouped to the next interval boundary (one anchor send
 * per group). Parking and the decision itself are never affected.
 */
export function planDelivery(
  severity: Severity,
  now: Date,
  policy: LoadPolicy,
): { policy: DeliveryPolicy; send_at: string } {
  if ((policy.criticalSeverities ?? ["critical"]).includes(severity))
    return { policy: "send_now", send_at: now.toISOString() };
  const quiet = policy.quietHours;
  if (quiet) {
    const minute = minutesIn(now, quiet.timeZone);
    const inQuiet =
      quiet.startMinute <= quiet.endMinute
        ? minute >= quiet.startMinute && minute < quiet.endMinute
        : minute >= quiet.startMinute || minute < quiet.endMinute;
    if (inQuiet) {
      const wait = (quiet.endMinute - minute + 24 * 60) % (24 * 60);
      const end = new Date(now.getTime() + wait * 60_000);
      end.setUTCSeconds(0, 0);
      return { policy: "deferred", send_at: end.toISOString() };
    }
  }
  if (policy.groupIntervalSeconds <= 0) return { policy: "send_now", send_at: now.toISOString() };
  const interval = policy.groupIntervalSeconds * 1000;
  return { policy: "grouped", send_at: new Date(Math.ceil(now.getTime() / interval) * interval).toISOString() };
}
