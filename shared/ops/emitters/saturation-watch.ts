import type { Logger } from "../../logging/logger.js";
import type { EventLog } from "../events.js";
import { recordSignal } from "./signal-events.js";

/** What the job API's admission tells the watch: each 429 and each admitted submit. */
export interface AdmissionSignals {
  /** A submit refused because the queue is full (`queued` jobs waiting). */
  refused(queued: number): void;
  /** A submit admitted: the queue had room, so any streak of refusals is over. */
  admitted(): void;
}

export interface SaturationWatchOptions {
  events: Pick<EventLog, "record">;
  logger: Pick<Logger, "warn">;
  /** Refusals within `windowMs` that make a streak (`JOBAPI_SATURATION_STREAK`). */
  threshold: number;
  /** The rolling window (`JOBAPI_SATURATION_WINDOW_SECONDS`). */
  windowMs: number;
  /** Names this job API instance in the key, so two replicas' streaks are two events. */
  instance: string;
  retryAfterSeconds: number;
  now?: () => number;
}

/**
 * Turns the job API's 429s into `queue.saturated` events, one per streak: `threshold` refusals
 * within `windowMs` open a streak and record its event (keyed by the instance and the streak's
 * first refusal, so a repeat records nothing more); further refusals extend it silently. A streak
 * ends when a submit is admitted or when no refusal came for a whole window; the next streak is a
 * new event. Recording never delays or fails the 429 itself.
 */
export function createSaturationWatch(
  options: SaturationWatchOptions,
): AdmissionSignals & { settled(): Promise<void> } {
  const now = options.now ?? Date.now;
  let refusals: number[] = [];
  let streakStartedAt: number | undefined;
  let pending: Promise<void> = Promise.resolve();
  return {
    refused(queued) {
      const at = now();
      if (streakStartedAt !== undefined && at - (refusals.at(-1) ?? at) > options.windowMs) streakStartedAt = undefined;
      refusals = [...refusals.filter((t) => at - t <= options.windowMs), at];
      if (streakStartedAt !== undefined || refusals.length < options.threshold) return;
      streakStartedAt = refusals[0] as number;
      const started = new Date(streakStartedAt).toISOString();
      const event = {
        idempotency_key: `queue.saturated/${options.instance}/${started}`,
        source: "jobapi.admission",
        event_type: "queue.saturated",
        detected_at: new Date(at),
        correlation_id: `${options.instance}/${started}`.slice(0, 200),
        resource_ref: "admission_queue/jobapi",
        payload: {
          instance: options.instance,
          streak_started_at: started,
          refusals: refusals.length,
          window_seconds: options.windowMs / 1000,
          queued,
          retry_after_seconds: options.retryAfterSeconds,
        },
      };
      options.logger.warn("queue saturated", {
        refusals: refusals.length,
        window_seconds: options.windowMs / 1000,
        queued,
        streak_started_at: started,
      });
      pending = pending.then(() => recordSignal(options.events, event, options.logger));
    },
    admitted() {
      refusals = [];
      streakStartedAt = undefined;
    },
    /** Resolves once every event the watch started recording is recorded (for a clean stop). */
    settled: () => pending,
  };
}
