/**
 * The durable client as the domain needs it: a port that `shared/` owns, so services can start,
 * read and signal orchestrations without importing `durable-functions`. The Functions side adapts
 * `df.getClient(context)` to it (`functions/composition/http-route.ts`); unit tests pass a fake.
 */

/** One orchestration instance, as the task hub reports it. */
export interface OrchestrationInstance {
  /** The orchestration's function name (one of `Orchestrations`). */
  name: string;
  instanceId: string;
  /** The durable runtime status: `Pending`, `Running`, `Completed`, `Failed`, `Terminated`, …. */
  runtimeStatus: string;
  input: unknown;
  output: unknown;
  createdAt: Date;
  lastUpdatedAt: Date;
  /** What the orchestration last reported with `setCustomStatus` (progress), when anything. */
  customStatus?: unknown;
}

/** Options of {@link OrchestrationClient.startNew}. */
export interface StartOrchestrationOptions {
  /** The instance id to use; the host refuses a second start of an instance that is running. */
  instanceId?: string;
  input?: unknown;
}

/** Options of {@link OrchestrationClient.listInstances}. */
export interface ListInstancesOptions {
  /** Only instances in these runtime statuses; empty lists every instance. */
  runtimeStatus: readonly string[];
}

/** Starts, reads and signals orchestration instances of this app's task hub. */
export interface OrchestrationClient {
  /** Starts an instance and answers its id. */
  startNew(name: string, options?: StartOrchestrationOptions): Promise<string>;
  /** The instance, or undefined when the task hub has none with this id. */
  getInstance(instanceId: string): Promise<OrchestrationInstance | undefined>;
  /** The instances matching `options`. */
  listInstances(options: ListInstancesOptions): AsyncIterable<OrchestrationInstance>;
  /** Delivers an external event to a running instance. */
  raiseEvent(instanceId: string, eventName: string, eventData: unknown): Promise<void>;
}
