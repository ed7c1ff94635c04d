import { randomUUID } from "node:crypto";
import type { Logger } from "../../shared/logging/logger.js";
import { ActionType, completedIds, EventType, historyEvent, scheduledIds } from "./history.js";
import {
  type DurableStore,
  type HistoryEvent,
  type InstanceRecord,
  type RuntimeStatus,
  TERMINAL_STATUSES,
} from "./store.js";

/** The library's orchestrator output (`OrchestratorState`). */
export interface OrchestratorStateLike {
  isDone: boolean;
  actions: unknown[][];
  output?: unknown;
  error?: string;
  customStatus?: unknown;
}

/** The parts of the library's task objects the backend reads after a replay. */
interface ActionLike {
  actionType?: number;
  functionName?: string;
  input?: unknown;
  fireAt?: string | Date;
  instanceId?: string;
  isCanceled?: boolean;
}

interface TaskLike {
  id: number | string | false;
  actionObj?: string | ActionLike;
  parent?: RetryParentLike;
}

interface RetryParentLike {
  isWaitingOnTimer?: boolean;
  attemptNumber?: number;
  retryOptions?: {
    firstRetryIntervalInMilliseconds: number;
    maxNumberOfAttempts: number;
    backoffCoefficient?: number;
    maxRetryIntervalInMilliseconds?: number;
  };
  innerTask?: TaskLike;
}

export interface ExecutorLike {
  openTasks: Record<string, TaskLike>;
}

export type OrchestratorOutcome =
  | { kind: "ok"; state: OrchestratorStateLike; executor: ExecutorLike }
  | { kind: "failed"; message: string; details?: string };

export type ActivityOutcome = { kind: "ok"; resultJson: string } | { kind: "failed"; reason: string; details: string };

/** How the backend runs user code: through the Functions host's invocation model. */
export interface DurableFunctionInvoker {
  hasOrchestrator(name: string): boolean;
  runOrchestrator(name: string, bindingInfo: Record<string, unknown>): Promise<OrchestratorOutcome>;
  runActivity(name: string, inputJson: string): Promise<ActivityOutcome>;
}

export interface DurableEngineOptions {
  store: DurableStore;
  invoker: DurableFunctionInvoker;
  logger: Logger;
  /** Activities running at once. */
  activityConcurrency: number;
}

export interface InstanceStatus {
  name: string;
  instanceId: string;
  createdTime: string;
  lastUpdatedTime: string;
  input: unknown;
  output: unknown;
  runtimeStatus: RuntimeStatus;
  customStatus: unknown;
  history?: HistoryEvent[];
}

export class InstanceNotFoundError extends Error {}
export class InstanceStateError extends Error {}
export class OrchestratorNotFoundError extends Error {}

interface ActivityWork {
  instanceId: string;
  executionId: string;
  taskId: number;
  name: string;
  inputJson: string;
}

/** Marks which execution an inbox message belongs to (a restarted instance ignores older ones). */
export const EXEC_KEY = "_executionId";
/** setTimeout's longest delay; longer timers re-arm in steps. */
const MAX_DELAY_MS = 2 ** 31 - 1;
const LIST_PAGE_SIZE = 100;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The local durable backend: an emulator of the Durable Task engine in the way Azurite emulates
 * storage. It persists instances, history and an inbox in Table storage, drives each orchestrator
 * through the library's own replay (one episode per batch of new events, `OrchestratorStarted`
 * first), schedules exactly the work the replay left open and not yet scheduled (so cumulative
 * actions are acted on once), runs activities in a bounded pool, and fires durable timers. After
 * a restart, `start()` re-dispatches every scheduled activity without a recorded result, re-arms
 * every unfired timer and applies any unapplied inbox messages. No orchestration logic lives here.
 */
export class DurableEngine {
  private readonly queues = new Map<string, { running: Promise<void> }>();
  private readonly historyCache = new Map<string, { length: number; events: HistoryEvent[] }>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly dispatched = new Set<string>();
  private readonly pending: ActivityWork[] = [];
  private readonly runningActivities = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly options: DurableEngineOptions) {}

  private get store(): DurableStore {
    return this.options.store;
  }

  private get logger(): Logger {
    return this.options.logger;
  }

  /** Recovers in-flight instances after a (possibly abrupt) restart. */
  async start(): Promise<void> {
    await this.store.init();
    const toSignal = new Set<string>();
    for await (const inst of this.store.listInstances({ statuses: ["Pending", "Running", "Suspended"] })) {
      const history = await this.loadHistory(inst);
      const inbox = (await this.store.getInbox(inst.instanceId)).filter((m) => m.event[EXEC_KEY] === inst.executionId);
      const done = completedIds([...history, ...inbox.map((m) => m.event)]);
      for (const e of history) {
        if (done.has(e.EventId)) continue;
        if (e.EventType === EventType.TaskScheduled) {
          this.dispatchActivity({
            instanceId: inst.instanceId,
            executionId: inst.executionId,
            taskId: e.EventId,
            name: String(e.Name),
            inputJson: String(e.Input ?? "null"),
          });
        } else if (e.EventType === EventType.TimerCreated) {
          this.armTimer(inst.instanceId, inst.executionId, e.EventId, new Date(String(e.FireAt)));
        } else if (e.EventType === EventType.SubOrchestrationInstanceCreated) {
          await this.ensureChild(inst, e);
        }
      }
      toSignal.add(inst.instanceId);
    }
    for await (const id of this.store.instancesWithInbox()) toSignal.add(id);
    for (const id of toSignal) this.signal(id);
    this.logger.info("durable backend started", { recovered: toSignal.size });
  }

  /** Stops timers and waits for running episodes and activities. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.pending.length = 0;
    await Promise.allSettled([...this.runningActivities, ...[...this.queues.values()].map((q) => q.running)]);
  }

  // ---- management operations -------------------------------------------------------------

  async startNew(name: string, instanceId: string | undefined, inputJson: string): Promise<string> {
    if (!this.options.invoker.hasOrchestrator(name))
      throw new OrchestratorNotFoundError(`orchestrator function '${name}' does not exist`);
    const id = instanceId ?? randomUUID().replaceAll("-", "");
    await this.withInstance(id, async () => {
      const existing = await this.store.getInstance(id);
      if (existing && !TERMINAL_STATUSES.has(existing.status)) {
        throw new InstanceStateError(`an instance with id '${id}' is already ${existing.status.toLowerCase()}`);
      }
      if (existing) await this.store.purge(id);
      this.historyCache.delete(id);
      await this.createInstance(id, name, inputJson, "", -1);
    });
    this.signal(id);
    return id;
  }

  private async createInstance(
    id: string,
    name: string,
    inputJson: string,
    parentInstanceId: string,
    parentTaskId: number,
  ): Promise<void> {
    const now = new Date().toISOString();
    const executionId = randomUUID();
    await this.store.putInstance({
      instanceId: id,
      name,
      status: "Pending",
      input: inputJson || "null",
      output: "null",
      customStatus: "null",
      createdTime: now,
      lastUpdatedTime: now,
      historyLength: 0,
      parentInstanceId,
      parentTaskId,
      executionId,
      appliedMessages: [],
    });
    await this.store.enqueue(
      id,
      historyEvent(EventType.ExecutionStarted, { Name: name, Input: inputJson || "null", [EXEC_KEY]: executionId }),
    );
  }

  async raiseEvent(instanceId: string, eventName: string, dataJson: string): Promise<void> {
    const inst = await this.requireInstance(instanceId);
    if (TERMINAL_STATUSES.has(inst.status)) throw new InstanceStateError(`instance is ${inst.status.toLowerCase()}`);
    await this.store.enqueue(
      instanceId,
      historyEvent(EventType.EventRaised, { Name: eventName, Input: dataJson || "null", [EXEC_KEY]: inst.executionId }),
    );
    this.signal(instanceId);
  }

  async terminate(instanceId: string, reason: string): Promise<void> {
    await this.withInstance(instanceId, async () => {
      const inst = await this.requireInstance(instanceId);
      if (TERMINAL_STATUSES.has(inst.status)) throw new InstanceStateError(`instance is ${inst.status.toLowerCase()}`);
      const history = await this.loadHistory(inst);
      await this.finish(
        inst,
        history,
        [historyEvent(EventType.ExecutionTerminated, { Input: JSON.stringify(reason) })],
        [],
        {
          status: "Terminated",
          output: JSON.stringify(reason),
        },
      );
    });
  }

  async suspend(instanceId: string, reason: string): Promise<void> {
    await this.setSuspended(instanceId, true, reason);
  }

  async resume(instanceId: string, reason: string): Promise<void> {
    await this.setSuspended(instanceId, false, reason);
    this.signal(instanceId);
  }

  private async setSuspended(instanceId: string, suspended: boolean, reason: string): Promise<void> {
    await this.withInstance(instanceId, async () => {
      const inst = await this.requireInstance(instanceId);
      if (TERMINAL_STATUSES.has(inst.status)) throw new InstanceStateError(`instance is ${inst.status.toLowerCase()}`);
      if ((inst.status === "Suspended") === suspended) return;
      const history = await this.loadHistory(inst);
      const event = historyEvent(suspended ? EventType.ExecutionSuspended : EventType.ExecutionResumed, {
        Reason: reason,
      });
      await this.finish(inst, history, [event], [], {
        status: suspended ? "Suspended" : "Running",
        output: inst.output,
      });
    });
  }

  async purge(instanceId: string): Promise<boolean> {
    return this.withInstance(instanceId, async () => {
      this.historyCache.delete(instanceId);
      return this.store.purge(instanceId);
    });
  }

  async getStatus(instanceId: string, showHistory = false): Promise<InstanceStatus | undefined> {
    const inst = await this.store.getInstance(instanceId);
    if (!inst) return undefined;
    return this.toStatus(inst, showHistory ? await this.loadHistory(inst) : undefined);
  }

  /** Lists instances page by page; `continuation` is an opaque offset token. */
  async list(
    filter: { statuses?: RuntimeStatus[]; createdFrom?: Date; createdTo?: Date },
    continuation?: string,
  ): Promise<{ items: InstanceStatus[]; continuation?: string }> {
    const offset = continuation ? Number.parseInt(continuation, 10) || 0 : 0;
    const items: InstanceStatus[] = [];
    let index = 0;
    let more = false;
    for await (const inst of this.store.listInstances(filter)) {
      if (index++ < offset) continue;
      if (items.length === LIST_PAGE_SIZE) {
        more = true;
        break;
      }
      items.push(this.toStatus(inst));
    }
    return more ? { items, continuation: String(offset + items.length) } : { items };
  }

  private toStatus(inst: InstanceRecord, history?: HistoryEvent[]): InstanceStatus {
    return {
      name: inst.name,
      instanceId: inst.instanceId,
      createdTime: inst.createdTime,
      lastUpdatedTime: inst.lastUpdatedTime,
      input: parseJson(inst.input),
      output: parseJson(inst.output),
      runtimeStatus: inst.status,
      customStatus: parseJson(inst.customStatus),
      ...(history ? { history } : {}),
    };
  }

  private async requireInstance(instanceId: string): Promise<InstanceRecord> {
    const inst = await this.store.getInstance(instanceId);
    if (!inst) throw new InstanceNotFoundError(`no instance with id '${instanceId}'`);
    return inst;
  }

  // ---- episodes ------------------------------------------------------------------------------

  /** Runs `fn` after every earlier operation on the instance (one writer per instance). */
  private withInstance<T>(instanceId: string, fn: () => Promise<T>): Promise<T> {
    const q = this.queues.get(instanceId);
    const prior = q ? q.running : Promise.resolve();
    const run = prior.then(fn, fn);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.queues.set(instanceId, { running: settled });
    void settled.then(() => {
      if (this.queues.get(instanceId)?.running === settled) this.queues.delete(instanceId);
    });
    return run;
  }

  /** Asks for an episode of the instance; coalesces with one already waiting. */
  signal(instanceId: string): void {
    if (this.stopped) return;
    void this.withInstance(instanceId, () => this.episode(instanceId)).catch((error: unknown) =>
      this.logger.error("durable episode failed", { instance_id: instanceId, error }),
    );
  }

  private async loadHistory(inst: InstanceRecord): Promise<HistoryEvent[]> {
    const cached = this.historyCache.get(inst.instanceId);
    if (cached && cached.length === inst.historyLength) return cached.events;
    const events = await this.store.getHistory(inst);
    this.historyCache.set(inst.instanceId, { length: inst.historyLength, events });
    return events;
  }

  private async episode(instanceId: string): Promise<void> {
    if (this.stopped) return;
    const inst = await this.store.getInstance(instanceId);
    if (!inst) return;
    const inbox = await this.store.getInbox(instanceId);
    const applied = new Set(inst.appliedMessages);
    const stale = inbox.filter((m) => applied.has(m.id) || m.event[EXEC_KEY] !== inst.executionId);
    if (stale.length > 0)
      await this.store.deleteInbox(
        instanceId,
        stale.map((m) => m.id),
      );
    const fresh = inbox.filter((m) => !stale.includes(m));
    if (TERMINAL_STATUSES.has(inst.status)) {
      if (fresh.length > 0)
        await this.store.deleteInbox(
          instanceId,
          fresh.map((m) => m.id),
        );
      return;
    }
    if (fresh.length === 0 || inst.status === "Suspended") return;

    const history = await this.loadHistory(inst);
    const newEvents = [
      historyEvent(EventType.OrchestratorStarted),
      ...fresh.map((m) => {
        const { [EXEC_KEY]: _exec, ...event } = m.event;
        return event as HistoryEvent;
      }),
    ];
    const replay = [...history.map((e) => ({ ...e, IsPlayed: true })), ...newEvents];
    const started: HistoryEvent | undefined = replay.find((e) => e.EventType === EventType.ExecutionStarted);
    const bindingInfo = {
      history: replay,
      input: parseJson(String(started?.Input ?? "null")),
      instanceId,
      isReplaying: history.length > 0,
      parentInstanceId: inst.parentInstanceId || undefined,
      upperSchemaVersion: 1,
      maximumShortTimerDuration: "6.00:00:00",
      longRunningTimerIntervalDuration: "3.00:00:00",
      defaultHttpAsyncRequestSleepTimeMillseconds: 30000,
    };
    const messageIds = fresh.map((m) => m.id);
    let outcome: OrchestratorOutcome;
    try {
      outcome = await this.options.invoker.runOrchestrator(inst.name, bindingInfo);
    } catch (error) {
      outcome = { kind: "failed", message: error instanceof Error ? error.message : String(error) };
    }

    if (outcome.kind === "failed") {
      await this.finish(inst, history, newEvents, messageIds, {
        status: "Failed",
        output: JSON.stringify(outcome.message),
        failure: { reason: outcome.message, details: outcome.details ?? "" },
      });
      return;
    }

    const { state, executor } = outcome;
    const customStatus = JSON.stringify(state.customStatus ?? null);
    const continueAsNew = this.findContinueAsNew(state.actions);
    if (state.isDone && continueAsNew) {
      await this.continueAsNew(inst, messageIds, continueAsNew.input, customStatus);
      return;
    }
    if (state.isDone) {
      await this.finish(inst, history, newEvents, messageIds, {
        status: "Completed",
        output: JSON.stringify(state.output ?? null),
        customStatus,
      });
      return;
    }

    let work: ScheduledWork[];
    try {
      work = this.newWork(inst, [...history, ...newEvents], executor);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      await this.finish(inst, history, newEvents, messageIds, {
        status: "Failed",
        output: JSON.stringify(message),
        failure: { reason: message, details: "" },
      });
      return;
    }
    await this.finish(inst, history, [...newEvents, ...work.map((w) => w.event)], messageIds, {
      status: "Running",
      output: "null",
      customStatus,
    });
    for (const w of work) await w.dispatch();
  }

  private findContinueAsNew(actions: unknown[][]): { input: unknown } | undefined {
    for (const group of actions) {
      for (const action of group) {
        const a = action as { actionType?: number; input?: unknown };
        if (a.actionType === ActionType.ContinueAsNew) return { input: a.input };
      }
    }
    return undefined;
  }

  /**
   * The work a replay left open that history has not scheduled yet. The library numbers tasks in
   * yield order; a task with a number history does not know is new. Retry attempts show up as
   * no-op tasks under their retryable parent: one consumes an id for the retry timer, the next
   * for the re-run.
   */
  private newWork(inst: InstanceRecord, events: HistoryEvent[], executor: ExecutorLike): ScheduledWork[] {
    const known = scheduledIds(events);
    const work: ScheduledWork[] = [];
    const now = new Date();
    for (const [key, task] of Object.entries(executor.openTasks)) {
      const id = Number(key);
      if (!Number.isInteger(id) || known.has(id)) continue;
      // No-op tasks carry the placeholder "noOp" instead of an action object.
      const action = typeof task.actionObj === "object" ? task.actionObj : undefined;
      const retryParent = task.parent?.retryOptions ? task.parent : undefined;
      if (!action && retryParent) {
        if (retryParent.isWaitingOnTimer) {
          work.push(this.timerWork(inst, id, new Date(now.getTime() + this.retryDelayMs(retryParent))));
        } else {
          const inner = retryParent.innerTask?.actionObj;
          if (!inner || typeof inner !== "object") throw new Error("retry without an inner action");
          work.push(this.callWork(inst, id, inner));
        }
        continue;
      }
      if (!action) continue;
      switch (action.actionType) {
        case ActionType.CallActivity:
        case ActionType.CallActivityWithRetry:
        case ActionType.CallSubOrchestrator:
        case ActionType.CallSubOrchestratorWithRetry:
          work.push(this.callWork(inst, id, action));
          break;
        case ActionType.CreateTimer:
          work.push(
            this.timerWork(
              inst,
              id,
              new Date(String(action.fireAt instanceof Date ? action.fireAt.toISOString() : action.fireAt)),
            ),
          );
          break;
        default:
          throw new Error(`action type ${String(action.actionType)} is not supported by the local durable backend`);
      }
    }
    return work;
  }

  private retryDelayMs(parent: RetryParentLike): number {
    const o = parent.retryOptions;
    const attempt = parent.attemptNumber ?? 2;
    if (!o || attempt > o.maxNumberOfAttempts) return 0;
    const raw = o.firstRetryIntervalInMilliseconds * (o.backoffCoefficient ?? 1) ** Math.max(0, attempt - 2);
    const cap = o.maxRetryIntervalInMilliseconds;
    return cap && cap > 0 ? Math.min(raw, cap) : raw;
  }

  private timerWork(inst: InstanceRecord, id: number, fireAt: Date): ScheduledWork {
    return {
      event: historyEvent(EventType.TimerCreated, { FireAt: fireAt.toISOString() }, id),
      dispatch: async () => this.armTimer(inst.instanceId, inst.executionId, id, fireAt),
    };
  }

  private callWork(inst: InstanceRecord, id: number, action: ActionLike): ScheduledWork {
    const name = String(action.functionName);
    // The library pre-serialises string inputs (Utils.processInput); other values travel as JSON.
    const inputJson = typeof action.input === "string" ? action.input : JSON.stringify(action.input ?? null);
    if (
      action.actionType === ActionType.CallSubOrchestrator ||
      action.actionType === ActionType.CallSubOrchestratorWithRetry
    ) {
      const childId = action.instanceId || `${inst.instanceId}:${id}`;
      const event = historyEvent(
        EventType.SubOrchestrationInstanceCreated,
        { Name: name, InstanceId: childId, Input: inputJson },
        id,
      );
      return { event, dispatch: () => this.ensureChild(inst, event) };
    }
    return {
      event: historyEvent(EventType.TaskScheduled, { Name: name, Input: inputJson }, id),
      dispatch: async () =>
        this.dispatchActivity({
          instanceId: inst.instanceId,
          executionId: inst.executionId,
          taskId: id,
          name,
          inputJson,
        }),
    };
  }

  private async ensureChild(parent: InstanceRecord, created: HistoryEvent): Promise<void> {
    const childId = String(created.InstanceId);
    const existing = await this.store.getInstance(childId);
    if (existing && existing.parentInstanceId === parent.instanceId) {
      if (TERMINAL_STATUSES.has(existing.status)) await this.notifyParent(existing);
      return;
    }
    if (!this.options.invoker.hasOrchestrator(String(created.Name))) {
      await this.store.enqueue(
        parent.instanceId,
        historyEvent(EventType.SubOrchestrationInstanceFailed, {
          TaskScheduledId: created.EventId,
          Reason: `orchestrator function '${String(created.Name)}' does not exist`,
          Details: "",
          [EXEC_KEY]: parent.executionId,
        }),
      );
      this.signal(parent.instanceId);
      return;
    }
    await this.createInstance(
      childId,
      String(created.Name),
      String(created.Input ?? "null"),
      parent.instanceId,
      created.EventId,
    );
    this.signal(childId);
  }

  /** Persists an episode: history rows first, then the instance row that makes them visible, then the inbox clean-up. */
  private async finish(
    inst: InstanceRecord,
    history: HistoryEvent[],
    appended: HistoryEvent[],
    messageIds: string[],
    next: {
      status: RuntimeStatus;
      output: string;
      customStatus?: string;
      failure?: { reason: string; details: string };
    },
  ): Promise<void> {
    const events = [...appended];
    if (appended.some((e) => e.EventType === EventType.OrchestratorStarted))
      events.push(historyEvent(EventType.OrchestratorCompleted));
    await this.store.appendHistory(inst.instanceId, history.length, events);
    const updated: InstanceRecord = {
      ...inst,
      status: next.status,
      output: next.output,
      customStatus: next.customStatus ?? inst.customStatus,
      historyLength: history.length + events.length,
      lastUpdatedTime: new Date().toISOString(),
      appliedMessages: [...inst.appliedMessages, ...messageIds],
    };
    await this.store.putInstance(updated);
    this.historyCache.set(inst.instanceId, { length: updated.historyLength, events: [...history, ...events] });
    await this.store.deleteInbox(inst.instanceId, messageIds);
    if (TERMINAL_STATUSES.has(updated.status)) {
      this.cancelTimers(inst.instanceId);
      await this.notifyParent(updated, next.failure);
    }
  }

  private async continueAsNew(
    inst: InstanceRecord,
    messageIds: string[],
    input: unknown,
    customStatus: string,
  ): Promise<void> {
    // The old execution's history is kept in its rows until overwritten; the new one starts empty.
    const executionId = randomUUID();
    const inputJson = JSON.stringify(input ?? null);
    await this.store.enqueue(
      inst.instanceId,
      historyEvent(EventType.ExecutionStarted, { Name: inst.name, Input: inputJson, [EXEC_KEY]: executionId }),
    );
    const updated: InstanceRecord = {
      ...inst,
      status: "Running",
      input: inputJson,
      output: "null",
      customStatus,
      historyLength: 0,
      executionId,
      lastUpdatedTime: new Date().toISOString(),
      appliedMessages: [...inst.appliedMessages, ...messageIds],
    };
    await this.store.putInstance(updated);
    this.historyCache.set(inst.instanceId, { length: 0, events: [] });
    this.cancelTimers(inst.instanceId);
    await this.store.deleteInbox(inst.instanceId, messageIds);
    this.signal(inst.instanceId);
  }

  private async notifyParent(child: InstanceRecord, failure?: { reason: string; details: string }): Promise<void> {
    if (!child.parentInstanceId) return;
    const parent = await this.store.getInstance(child.parentInstanceId);
    if (!parent || TERMINAL_STATUSES.has(parent.status)) return;
    const event =
      child.status === "Completed"
        ? historyEvent(EventType.SubOrchestrationInstanceCompleted, {
            TaskScheduledId: child.parentTaskId,
            Result: child.output,
          })
        : historyEvent(EventType.SubOrchestrationInstanceFailed, {
            TaskScheduledId: child.parentTaskId,
            Reason: failure?.reason ?? `sub-orchestration ${child.status.toLowerCase()}`,
            Details: failure?.details ?? "",
          });
    await this.store.enqueue(parent.instanceId, { ...event, [EXEC_KEY]: parent.executionId });
    this.signal(parent.instanceId);
  }

  // ---- timers ----------------------------------------------------------------------------------

  private armTimer(instanceId: string, executionId: string, timerId: number, fireAt: Date): void {
    if (this.stopped) return;
    const key = `${instanceId}|${executionId}|${timerId}`;
    if (this.timers.has(key)) return;
    const delay = Math.min(Math.max(0, fireAt.getTime() - Date.now()), MAX_DELAY_MS);
    const handle = setTimeout(() => {
      this.timers.delete(key);
      if (Date.now() + 5 < fireAt.getTime()) {
        this.armTimer(instanceId, executionId, timerId, fireAt);
        return;
      }
      void this.store
        .enqueue(
          instanceId,
          historyEvent(EventType.TimerFired, {
            TimerId: timerId,
            FireAt: fireAt.toISOString(),
            [EXEC_KEY]: executionId,
          }),
        )
        .then(() => this.signal(instanceId))
        .catch((error: unknown) => this.logger.error("timer delivery failed", { instance_id: instanceId, error }));
    }, delay);
    this.timers.set(key, handle);
  }

  private cancelTimers(instanceId: string): void {
    for (const [key, handle] of this.timers) {
      if (key.startsWith(`${instanceId}|`)) {
        clearTimeout(handle);
        this.timers.delete(key);
      }
    }
  }

  // ---- activities ------------------------------------------------------------------------------

  private dispatchActivity(work: ActivityWork): void {
    const key = `${work.instanceId}|${work.executionId}|${work.taskId}`;
    if (this.dispatched.has(key) || this.stopped) return;
    this.dispatched.add(key);
    this.pending.push(work);
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.runningActivities.size < this.options.activityConcurrency && this.pending.length > 0) {
      const work = this.pending.shift();
      if (!work) break;
      const run = this.runActivity(work);
      this.runningActivities.add(run);
      void run.finally(() => {
        this.runningActivities.delete(run);
        this.dispatched.delete(`${work.instanceId}|${work.executionId}|${work.taskId}`);
        this.pump();
      });
    }
  }

  private async runActivity(work: ActivityWork): Promise<void> {
    let outcome: ActivityOutcome;
    try {
      outcome = await this.options.invoker.runActivity(work.name, work.inputJson);
    } catch (error) {
      outcome = { kind: "failed", reason: error instanceof Error ? error.message : String(error), details: "" };
    }
    if (this.stopped) return;
    const event =
      outcome.kind === "ok"
        ? historyEvent(EventType.TaskCompleted, { TaskScheduledId: work.taskId, Result: outcome.resultJson })
        : historyEvent(EventType.TaskFailed, {
            TaskScheduledId: work.taskId,
            Reason: outcome.reason,
            Details: outcome.details,
          });
    try {
      await this.store.enqueue(work.instanceId, { ...event, [EXEC_KEY]: work.executionId });
      this.signal(work.instanceId);
    } catch (error) {
      this.logger.error("activity result not saved; it runs again after restart", {
        instance_id: work.instanceId,
        error,
      });
    }
  }
}

interface ScheduledWork {
  event: HistoryEvent;
  dispatch: () => Promise<void>;
}
