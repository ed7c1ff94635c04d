import type { HistoryEvent } from "./store.js";

/** History event and action type numbers of the Durable Task protocol (durable-functions 3.x). */
export const EventType = {
  ExecutionStarted: 0,
  ExecutionTerminated: 3,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  SubOrchestrationInstanceCreated: 7,
  SubOrchestrationInstanceCompleted: 8,
  SubOrchestrationInstanceFailed: 9,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
  OrchestratorCompleted: 13,
  EventRaised: 15,
  ContinueAsNew: 16,
  ExecutionSuspended: 19,
  ExecutionResumed: 20,
} as const;

export const ActionType = {
  CallActivity: 0,
  CallActivityWithRetry: 1,
  CallSubOrchestrator: 2,
  CallSubOrchestratorWithRetry: 3,
  ContinueAsNew: 4,
  CreateTimer: 5,
  WaitForExternalEvent: 6,
  WhenAny: 11,
  WhenAll: 12,
} as const;

/** Builds a history event; `EventId` is -1 for events that complete or notify rather than schedule. */
export function historyEvent(
  type: number,
  fields: Record<string, unknown> = {},
  eventId = -1,
  at = new Date(),
): HistoryEvent {
  return { EventType: type, EventId: eventId, IsPlayed: false, Timestamp: at.toISOString(), ...fields };
}

/** Ids of scheduled work (activities, timers, sub-orchestrations) in a history. */
export function scheduledIds(events: readonly HistoryEvent[]): Set<number> {
  const ids = new Set<number>();
  for (const e of events) {
    if (
      e.EventType === EventType.TaskScheduled ||
      e.EventType === EventType.TimerCreated ||
      e.EventType === EventType.SubOrchestrationInstanceCreated
    ) {
      ids.add(e.EventId);
    }
  }
  return ids;
}

/** Ids of scheduled work whose completion (or firing) is already recorded. */
export function completedIds(events: readonly HistoryEvent[]): Set<number> {
  const ids = new Set<number>();
  for (const e of events) {
    if (
      e.EventType === EventType.TaskCompleted ||
      e.EventType === EventType.TaskFailed ||
      e.EventType === EventType.SubOrchestrationInstanceCompleted ||
      e.EventType === EventType.SubOrchestrationInstanceFailed
    ) {
      ids.add(Number(e.TaskScheduledId));
    } else if (e.EventType === EventType.TimerFired) {
      ids.add(Number(e.TimerId));
    }
  }
  return ids;
}
