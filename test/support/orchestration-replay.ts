import path from "node:path";
import { pathToFileURL } from "node:url";
import { ActionType, EventType, historyEvent } from "../../local/durable/history.js";
import { createHostInvoker } from "../../local/durable/host-invoker.js";
import type { OrchestratorOutcome, OrchestratorStateLike } from "../../local/durable/engine.js";
import type { HistoryEvent } from "../../local/durable/store.js";
import { LocalFunctionsHost } from "../../local/functions-host.js";
import { captureLogger } from "./service-fakes.js";

export { ActionType };

const root = path.resolve(import.meta.dirname, "../..");

/**
 * The settings the Functions app's composition root validates when an orchestration module loads.
 * Nothing here is ever contacted: a replay runs only the orchestrator, never an activity.
 */
const REPLAY_ENV = {
  AzureWebJobsStorage: "UseDevelopmentStorage=true",
  AUTH_TENANT_ID: "00000000-0000-4000-8000-000000000000",
  AUTH_CLIENT_ID: "11111111-1111-4111-8111-111111111111",
};

/** An action as the orchestrator returns it on the wire (JSON), e.g. `{actionType: 0, functionName, input}`. */
export type WireAction = { actionType: number } & Record<string, unknown>;

export interface ReplayedState {
  isDone: boolean;
  output: unknown;
  customStatus: unknown;
  /** Every action of this execution so far (the library returns them cumulatively). */
  actions: WireAction[];
  /** The actions the history has not scheduled yet: what this episode asks the backend to do. */
  newActions: WireAction[];
}

/**
 * A history as the Durable Task extension hands it to an orchestrator, built step by step in the
 * order the orchestrator yields (the style of azure-functions-durable-js's own history builders):
 * each step records what the previous episode scheduled, closes it, opens the next episode and
 * records the completion that woke the orchestrator. Sequence ids follow the library's counter.
 */
export class OrchestrationHistory {
  readonly events: HistoryEvent[] = [];
  /** Actions the steps so far account for (a `Task.any` counts once). */
  scheduledActions = 0;
  private sequence = 0;
  private clock: Date;

  constructor(
    readonly name: string,
    readonly input: unknown,
    startedAt = new Date("2026-01-05T10:00:00.000Z"),
  ) {
    this.clock = startedAt;
    this.events.push(
      historyEvent(EventType.OrchestratorStarted, {}, -1, startedAt),
      historyEvent(EventType.ExecutionStarted, { Name: name, Input: JSON.stringify(input) }, -1, startedAt),
    );
  }

  /** The orchestrator's current time (`context.df.currentUtcDateTime` in the newest episode). */
  get now(): Date {
    return this.clock;
  }

  /** `now` plus `seconds`, as the ISO text a `CreateTimer` action carries. */
  fireAt(seconds: number): string {
    return new Date(this.clock.getTime() + seconds * 1000).toISOString();
  }

  /** The orchestrator called `activity`, which returned `result` `afterSeconds` later. */
  activityCompleted(activity: string, result: unknown, afterSeconds = 1): this {
    const id = this.sequence++;
    this.closeEpisode(historyEvent(EventType.TaskScheduled, { Name: activity }, id, this.clock));
    this.openEpisode(afterSeconds, EventType.TaskCompleted, { TaskScheduledId: id, Result: JSON.stringify(result) });
    return this;
  }

  /** The orchestrator called `activity`, which threw `message`. */
  activityFailed(activity: string, message: string, afterSeconds = 1): this {
    const id = this.sequence++;
    this.closeEpisode(historyEvent(EventType.TaskScheduled, { Name: activity }, id, this.clock));
    this.openEpisode(afterSeconds, EventType.TaskFailed, {
      TaskScheduledId: id,
      Reason: message,
      Details: `Error: ${message}\n    at activity`,
    });
    return this;
  }

  /** The orchestrator yielded a durable timer due `seconds` from now (alone or in `Task.any`), and it fired first. */
  timerFired(seconds: number): this {
    this.fireTimer(seconds);
    return this;
  }

  /** The orchestrator yielded `Task.any([timer, external event])` and `eventName` arrived first. */
  eventWonOverTimer(timerSeconds: number, eventName: string, data: unknown, afterSeconds = 1): this {
    const id = this.sequence++;
    this.closeEpisode(historyEvent(EventType.TimerCreated, { FireAt: this.fireAt(timerSeconds) }, id, this.clock));
    this.openEpisode(afterSeconds, EventType.EventRaised, { Name: eventName, Input: JSON.stringify(data) });
    return this;
  }

  private fireTimer(seconds: number): void {
    const id = this.sequence++;
    const fireAt = this.fireAt(seconds);
    this.closeEpisode(historyEvent(EventType.TimerCreated, { FireAt: fireAt }, id, this.clock));
    this.openEpisode(seconds, EventType.TimerFired, { TimerId: id, FireAt: fireAt });
  }

  private closeEpisode(scheduled: HistoryEvent): void {
    this.scheduledActions++;
    this.events.push(scheduled, historyEvent(EventType.OrchestratorCompleted, {}, -1, this.clock));
  }

  private openEpisode(afterSeconds: number, wakeUpType: number, wakeUpFields: Record<string, unknown>): void {
    this.clock = new Date(this.clock.getTime() + afterSeconds * 1000);
    this.events.push(
      historyEvent(EventType.OrchestratorStarted, {}, -1, this.clock),
      historyEvent(wakeUpType, wakeUpFields, -1, this.clock),
    );
  }
}

export interface OrchestrationReplayer {
  /** The loaded modules' exports, by the path given to `loadOrchestrations`. */
  modules: Record<string, Record<string, unknown>>;
  /** Replays `history` through the registered orchestrator, exactly as the durable backend invokes it. */
  replay(history: OrchestrationHistory): Promise<ReplayedState>;
  /** What the durable backend gets back from one episode: the state and the library's executor. */
  run(history: OrchestrationHistory): Promise<OrchestratorOutcome>;
}

function bindingInfoOf(history: OrchestrationHistory): Record<string, unknown> {
  return {
    history: history.events,
    input: history.input,
    instanceId: "replay-test-instance",
    isReplaying: false,
    upperSchemaVersion: 1,
    maximumShortTimerDuration: "6.00:00:00",
    longRunningTimerIntervalDuration: "3.00:00:00",
    defaultHttpAsyncRequestSleepTimeMillseconds: 30000,
  };
}

/**
 * Loads the app's orchestration modules into a Functions host stand-in (so `df.app.*` registers as
 * on Azure) and replays hand-built histories through the library's own `Orchestrator`. Call once
 * per test file: the registrations belong to the file's module graph.
 */
export async function loadOrchestrations(modulePaths: string[]): Promise<OrchestrationReplayer> {
  for (const [name, value] of Object.entries(REPLAY_ENV)) process.env[name] ??= value;
  // The host must exist before @azure/functions loads, or the library drops registrations (test mode).
  const host = new LocalFunctionsHost({ logger: captureLogger() });
  const modules: Record<string, Record<string, unknown>> = {};
  for (const modulePath of modulePaths) {
    modules[modulePath] = (await import(pathToFileURL(path.join(root, modulePath)).href)) as Record<string, unknown>;
  }
  const invoker = createHostInvoker(host);
  return {
    modules,
    run: (history) => invoker.runOrchestrator(history.name, bindingInfoOf(history)),
    async replay(history) {
      const outcome = await invoker.runOrchestrator(history.name, bindingInfoOf(history));
      if (outcome.kind === "failed") throw new Error(`the orchestrator failed: ${outcome.message}`);
      // As the backend reads it: JSON on the wire (dates become ISO text).
      const state = JSON.parse(JSON.stringify(outcome.state)) as OrchestratorStateLike & { actions: WireAction[][] };
      const actions = state.actions.flat();
      return {
        isDone: state.isDone,
        output: state.output,
        customStatus: state.customStatus,
        actions,
        newActions: actions.slice(history.scheduledActions),
      };
    },
  };
}
