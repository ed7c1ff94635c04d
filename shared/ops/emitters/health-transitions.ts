import { createHash } from "node:crypto";
import type { Logger } from "../../logging/logger.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { EventLog } from "../events.js";

/** Where each watched component's last known health lives (one row per component). */
export const HEALTH_TABLE = "opshealth";
/** How long a process trusts a healthy row without reading it again. */
export const HEALTHY_CACHE_MS = 10_000;

/** A component whose health is watched, and the event its turning unhealthy records. */
export interface WatchedComponent {
  /** `job_api/<name>` or `cluster/<name>`: the rule catalog matches its type. */
  resource_ref: string;
  /** `jobapi.unhealthy` or `cluster.unhealthy`. */
  event_type: string;
}

/** What one observer saw: healthy, or not with why (a first line, no URL). */
export type HealthObservation = { healthy: true } | { healthy: false; reason: string };

type Row = { state: "healthy" | "unhealthy"; since: string; etag?: string };

/**
 * Health transitions of the control plane's components as events: one `…unhealthy` event per turn
 * from healthy (or never seen) to unhealthy, whoever saw it (a readiness probe, the local
 * supervisor) and on however many hosts, never one per failed probe.
 *
 * The last known state is a row per component (table `opshealth`). The event's key is derived from
 * the state it leaves (`…/after/<since of the healthy state>`), so every observer of the same turn
 * computes the same key and the event log keeps one; the event is recorded before the row turns
 * unhealthy, so a crash in between repeats the same key rather than losing the event. A process
 * trusts a healthy row it read or wrote for {@link HEALTHY_CACHE_MS} (a steady healthy state costs
 * one storage read per that period, not one per probe); an unhealthy one it reads again each time,
 * since another host may have seen the recovery.
 */
export function createHealthTransitions(deps: {
  tables: TableSource;
  events: Pick<EventLog, "record">;
  logger: Pick<Logger, "warn">;
  source: string;
  now?: () => Date;
}) {
  const table = tableOpener(deps.tables, HEALTH_TABLE);
  const now = deps.now ?? (() => new Date());
  /** Until when each component's row was last seen healthy (the cache of the steady state). */
  const healthyUntil = new Map<string, number>();
  const remember = (ref: string, state: Row["state"]) => {
    if (state === "healthy") healthyUntil.set(ref, now().getTime() + HEALTHY_CACHE_MS);
    else healthyUntil.delete(ref);
  };
  const rowKey = (ref: string) => createHash("sha256").update(ref, "utf8").digest("hex");

  async function read(ref: string): Promise<Row | undefined> {
    try {
      const entity = await (await table()).getEntity<{ state: Row["state"]; since: string }>("h", rowKey(ref));
      return { state: entity.state, since: entity.since, etag: entity.etag };
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Writes the row unless another observer changed it since it was read (then that one's write stands). */
  async function write(ref: string, previous: Row | undefined, next: Omit<Row, "etag">): Promise<void> {
    const client = await table();
    const entity = { partitionKey: "h", rowKey: rowKey(ref), resource_ref: ref, ...next };
    try {
      if (previous?.etag) await client.updateEntity(entity, "Replace", { etag: previous.etag });
      else await client.createEntity(entity);
    } catch (error) {
      if (!isStatus(error, 409) && !isStatus(error, 412)) throw error;
    }
  }

  return {
    /** Records what an observer saw of `component`; resolves once any event and state change are stored. */
    async observe(component: WatchedComponent, seen: HealthObservation): Promise<void> {
      const state = seen.healthy ? "healthy" : "unhealthy";
      if (seen.healthy && (healthyUntil.get(component.resource_ref) ?? 0) > now().getTime()) return;
      try {
        const previous = await read(component.resource_ref);
        if (previous?.state === state) {
          remember(component.resource_ref, state);
          return;
        }
        const at = now();
        if (!seen.healthy) {
          const after = previous?.since ?? "first";
          // Not through recordSignal: a failed recording must leave the row as it was, so the next observation tries again.
          await deps.events.record({
            idempotency_key: `${component.event_type}/${component.resource_ref}/after/${after}`,
            source: deps.source,
            event_type: component.event_type,
            detected_at: at,
            correlation_id: component.resource_ref,
            resource_ref: component.resource_ref,
            payload: { reason: seen.reason, healthy_since: previous?.since ?? null },
          });
        }
        await write(component.resource_ref, previous, { state, since: at.toISOString() });
        remember(component.resource_ref, state);
      } catch (error) {
        // Health watching never fails what observed it (a readiness answer, a restart).
        deps.logger.warn("health transition not recorded", {
          resource_ref: component.resource_ref,
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
      }
    },
  };
}

/** The cluster as the job API's Kubernetes executor watches its API server. */
export const CLUSTER_COMPONENT: WatchedComponent = {
  resource_ref: "cluster/kubernetes",
  event_type: "cluster.unhealthy",
};

/** The job API as the readiness check and the local supervisor watch it. */
export const JOB_API_COMPONENT: WatchedComponent = { resource_ref: "job_api/jobapi", event_type: "jobapi.unhealthy" };
