import type { LocalFunctionsHost } from "../functions-host.js";
import type {
  ActivityOutcome,
  DurableFunctionInvoker,
  ExecutorLike,
  OrchestratorOutcome,
  OrchestratorStateLike,
} from "./engine.js";

const OUT_OF_PROC_LABEL = "$OutOfProcData$:";

/**
 * The local durable backend reads a private field of durable-functions: the open tasks of the
 * executor the library attaches to each orchestration context (`context.df.taskOrchestratorExecutor
 * .openTasks`), to learn what an episode scheduled. package.json pins the library to its minor
 * version (`~3.5.0`); test/unit/durable-functions-pin.test.ts fails with this message when it moves.
 */
export const PRIVATE_FIELD_MOVED =
  "durable-functions no longer exposes context.df.taskOrchestratorExecutor.openTasks, the private field " +
  "local/durable/host-invoker.ts reads: keep durable-functions on the minor version pinned in package.json, " +
  "or update the local durable backend (local/durable/) to the library's new internals";

function triggerType(host: LocalFunctionsHost, name: string): string | undefined {
  const fn = host.getFunction(name);
  if (!fn) return undefined;
  return Object.values(fn.metadata.bindings).find((b) => /trigger$/i.test(b.type))?.type;
}

/** Failure state the library appends to an orchestrator's error message. */
function failureFromError(error: unknown): { message: string; details: string } {
  const text = error instanceof Error ? error.message : String(error);
  const at = text.indexOf(OUT_OF_PROC_LABEL);
  if (at >= 0) {
    try {
      const state = JSON.parse(text.slice(at + OUT_OF_PROC_LABEL.length)) as OrchestratorStateLike;
      return {
        message: state.error ?? "orchestrator failed",
        details: error instanceof Error ? (error.stack ?? "") : "",
      };
    } catch {
      // fall through to the raw message
    }
  }
  return { message: text, details: error instanceof Error ? (error.stack ?? "") : "" };
}

/** Runs orchestrators and activities through the local Functions host's invocation model. */
export function createHostInvoker(host: LocalFunctionsHost): DurableFunctionInvoker {
  return {
    hasOrchestrator: (name) => triggerType(host, name) === "orchestrationTrigger",

    async runOrchestrator(name, bindingInfo): Promise<OrchestratorOutcome> {
      const fn = host.getFunction(name);
      if (!fn || triggerType(host, name) !== "orchestrationTrigger") {
        return { kind: "failed", message: `orchestrator function '${name}' does not exist` };
      }
      try {
        const { context, result } = await host.invoke(fn, { string: JSON.stringify(bindingInfo) });
        // The replay state lives on the orchestration context the library attached to this invocation.
        const df = (context as { df?: { taskOrchestratorExecutor?: ExecutorLike } }).df;
        if (typeof df?.taskOrchestratorExecutor?.openTasks !== "object") throw new Error(PRIVATE_FIELD_MOVED);
        return { kind: "ok", state: result as OrchestratorStateLike, executor: df.taskOrchestratorExecutor };
      } catch (error) {
        return { kind: "failed", ...failureFromError(error) };
      }
    },

    async runActivity(name, inputJson): Promise<ActivityOutcome> {
      const fn = host.getFunction(name);
      if (!fn || triggerType(host, name) !== "activityTrigger") {
        return { kind: "failed", reason: `activity function '${name}' does not exist`, details: "" };
      }
      try {
        const { result } = await host.invoke(fn, { string: inputJson });
        return { kind: "ok", resultJson: JSON.stringify(result ?? null) };
      } catch (error) {
        return {
          kind: "failed",
          reason: error instanceof Error ? error.message : String(error),
          details: error instanceof Error ? (error.stack ?? "") : "",
        };
      }
    },
  };
}
