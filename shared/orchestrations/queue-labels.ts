/**
 * The names every side of an orchestration shares: its function name, its queue label and the
 * events it waits for. Triggers, activities and services import them from here, never from
 * another trigger module.
 *
 * The spec's task-queue names survive as labels on durable orchestrations (DESIGN §2), so the
 * diagnostics still answer per queue. Every orchestration must appear here; one that does not
 * counts toward `fallback`, which must stay 0.
 */
export const QUEUE_NAMES = ["default", "cloud", "blast", "storage"] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];
export const FALLBACK_QUEUE = "fallback";

/** Orchestration function names (exported constants, used at registration and at start). */
export const Orchestrations = {
  noop: "noop",
  provisionCluster: "provisionCluster",
  buildImages: "buildImages",
  deployJobApi: "deployJobApi",
  submitBlastJob: "submitBlastJob",
  warmDatabase: "warmDatabase",
  prepareDatabase: "prepareDatabase",
  addDatabase: "addDatabase",
  checkDatabaseUpdates: "checkDatabaseUpdates",
  approvalRequest: "approvalRequest",
  readInvestigation: "readInvestigation",
  channelTurn: "channelTurn",
} as const;

/** The external event `submitBlastJob` waits for: `DELETE /api/blast/jobs/{uuid}` raises it. */
export const CANCEL_EVENT = "cancel";

export const ORCHESTRATION_QUEUES: Readonly<Record<string, QueueName>> = Object.freeze({
  [Orchestrations.noop]: "cloud",
  [Orchestrations.provisionCluster]: "cloud",
  [Orchestrations.buildImages]: "cloud",
  [Orchestrations.deployJobApi]: "cloud",
  [Orchestrations.submitBlastJob]: "blast",
  [Orchestrations.warmDatabase]: "storage",
  [Orchestrations.prepareDatabase]: "storage",
  [Orchestrations.addDatabase]: "storage",
  [Orchestrations.checkDatabaseUpdates]: "default",
  [Orchestrations.approvalRequest]: "default",
  [Orchestrations.readInvestigation]: "default",
  [Orchestrations.channelTurn]: "default",
});

/** The queue label of an orchestration, or `fallback` when it has none. */
export function queueOf(orchestrationName: string): QueueName | typeof FALLBACK_QUEUE {
  return Object.hasOwn(ORCHESTRATION_QUEUES, orchestrationName)
    ? (ORCHESTRATION_QUEUES[orchestrationName] as QueueName)
    : FALLBACK_QUEUE;
}
