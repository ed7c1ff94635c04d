import { DependencyUnavailableError } from "../errors.js";
import type { Logger } from "../logging/logger.js";

/** One dependency the service needs to be ready. */
export interface ReadinessProbe {
  /** Its key in the answer's `checks` (snake_case). */
  key: string;
  /** Its name in the not-ready message. */
  label: string;
  /** Resolves when the dependency answers. */
  probe: () => Promise<unknown>;
}

/** What the readiness check is built from. */
export interface ReadinessCheckDependencies {
  probes: readonly ReadinessProbe[];
  /** How long each dependency may take to answer. */
  timeoutMs: number;
  /** The request's logger. */
  logger: Logger;
  /** Hears each check's outcome by probe key (undefined: answered; else why not), before the answer; must not throw. */
  onChecked?: (failures: Readonly<Record<string, string | undefined>>) => Promise<void>;
}

/** Suggested wait before asking again after a not-ready answer. */
const NOT_READY_RETRY_AFTER_SECONDS = 5;

/** Runs a probe with a deadline; resolves to an error text, or undefined when it answered. */
async function runProbe(probe: () => Promise<unknown>, timeoutMs: number): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      probe(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Readiness: every dependency probed at once, each with a deadline. Ready answers each check as
 * `ok`; otherwise a DependencyUnavailableError naming the ones that did not answer (their errors
 * go to the log, not to the caller).
 */
export function createReadinessCheck(dependencies: ReadinessCheckDependencies) {
  const { probes, timeoutMs, logger } = dependencies;
  return {
    async check(): Promise<{ status: "ready"; checks: Record<string, "ok"> }> {
      const failures = await Promise.all(probes.map((probe) => runProbe(probe.probe, timeoutMs)));
      const failing = probes.filter((_, index) => failures[index] !== undefined);
      await dependencies.onChecked?.(Object.fromEntries(probes.map((probe, index) => [probe.key, failures[index]])));
      if (failing.length > 0) {
        logger.warn("not ready", Object.fromEntries(probes.map((probe, index) => [probe.key, failures[index]])));
        throw new DependencyUnavailableError(
          `not ready: ${failing.map((probe) => probe.label).join(" and ")} unreachable`,
          NOT_READY_RETRY_AFTER_SECONDS,
        );
      }
      return { status: "ready", checks: Object.fromEntries(probes.map((probe) => [probe.key, "ok" as const])) };
    },
  };
}
