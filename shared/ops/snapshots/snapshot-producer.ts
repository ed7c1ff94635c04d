import type { AttemptLog } from "./attempt-log.js";
import {
  type BaselineObserver,
  CONFIGURATION_BASELINE_SCHEMA_VERSION,
  type ConfigurationBaseline,
  evaluateBaseline,
  type ObservationSource,
} from "./configuration-baseline.js";
import { DETECTION_READINESS_SCHEMA_VERSION, evaluateReadiness, type ReadinessProbes } from "./detection-readiness.js";
import type { SnapshotKind, SnapshotStore } from "./snapshot-store.js";
import { observeRecovery, T2_RECOVERY_SCHEMA_VERSION } from "./t2-recovery.js";

/** One kind's producer: observes now and returns the body to store, with its schema version. */
export interface SnapshotSource {
  kind: SnapshotKind;
  schema_version: number;
  observe(): Promise<Record<string, unknown>>;
}

export interface SnapshotProducerDependencies {
  store: SnapshotStore;
  sources: readonly SnapshotSource[];
  /** Who produced the snapshots (`ops_loop`, `startup`): kept in each row's envelope. */
  producer: string;
  now?: () => Date;
}

/** The detection readiness source over the six axes' probes. */
export function detectionReadinessSource(
  probes: ReadinessProbes,
  options: { timeoutMs?: number } = {},
): SnapshotSource {
  return {
    kind: "detection_readiness",
    schema_version: DETECTION_READINESS_SCHEMA_VERSION,
    observe: async () => ({ ...(await evaluateReadiness(probes, options)) }),
  };
}

/** The T2 recovery source over the retained proposer-attempt log. */
export function t2RecoverySource(log: AttemptLog): SnapshotSource {
  return {
    kind: "t2_recovery",
    schema_version: T2_RECOVERY_SCHEMA_VERSION,
    observe: async () => ({ ...(await observeRecovery(log)) }),
  };
}

/** The configuration baseline source: the frozen baseline against what each observer sees now. */
export function configurationBaselineSource(
  baseline: ConfigurationBaseline,
  observers: Partial<Record<ObservationSource, BaselineObserver>>,
): SnapshotSource {
  return {
    kind: "configuration_baseline",
    schema_version: CONFIGURATION_BASELINE_SCHEMA_VERSION,
    observe: () => evaluateBaseline(baseline, observers),
  };
}

/**
 * Records one snapshot of each source. The tools only ever read what this stored: they never
 * observe themselves (C-096). A source that fails records nothing, so the tool keeps answering
 * the last snapshot with its own observation time rather than a guess; the others still record.
 */
export function createSnapshotProducer(deps: SnapshotProducerDependencies) {
  const now = deps.now ?? (() => new Date());
  return {
    /** `failed` names each kind not recorded with its error's class only (a message may carry a URL). */
    async runOnce(): Promise<{ recorded: SnapshotKind[]; failed: { kind: SnapshotKind; error: string }[] }> {
      const outcomes = await Promise.allSettled(
        deps.sources.map(async (source) => {
          // The observation time is when observing began: the state is at least this fresh.
          const observed_at = now();
          const body = await source.observe();
          await deps.store.record(source.kind, {
            producer: deps.producer,
            schema_version: source.schema_version,
            observed_at,
            body,
          });
          return source.kind;
        }),
      );
      return {
        recorded: outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : [])),
        failed: outcomes.flatMap((o, i) =>
          o.status === "rejected"
            ? [
                {
                  kind: deps.sources[i]?.kind as SnapshotKind,
                  error: o.reason instanceof Error ? o.reason.name : typeof o.reason,
                },
              ]
            : [],
        ),
      };
    },
  };
}
