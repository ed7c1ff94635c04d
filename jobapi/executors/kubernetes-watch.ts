import { setTimeout as sleep } from "node:timers/promises";
import type { KubernetesObject, Watch } from "@kubernetes/client-node";
import type { Logger } from "../../shared/logging/logger.js";
import type { HealthObservation } from "../../shared/ops/emitters/health-transitions.js";

interface Listed<T> {
  items: T[];
  metadata?: { resourceVersion?: string };
}

export interface WatchCacheOptions<T> {
  /** e.g. `/apis/batch/v1/namespaces/blastplane/jobs` */
  path: string;
  labelSelector: string;
  list: () => Promise<Listed<T>>;
  watch: Watch;
  logger: Logger;
  /** Called after every change (and after a re-list) with the object's name. */
  onChange: (name: string) => void;
  /** Counts each list and watch request. */
  onRequest: () => void;
  /** Server-side watch timeout; the watch is renewed from the last version after it. */
  watchTimeoutSeconds?: number;
  maxBackoffMs?: number;
  /**
   * Hears whether the API server answers: unhealthy after {@link UNHEALTHY_AFTER_FAILURES} failed
   * requests in a row (one failure is a blip the back-off absorbs), healthy again on the next list
   * or watch event. Must not throw.
   */
  onHealth?: (seen: HealthObservation) => void;
}

/** Failed list or watch requests in a row after which the API server counts as unhealthy. */
export const UNHEALTHY_AFTER_FAILURES = 3;

/**
 * A list + watch cache of one resource (what an informer is): lists once, then watches from the
 * list's resourceVersion with bookmarks, so API calls grow with reconnects, not with the number of
 * objects or the time they take. A watch that ends resumes from the last version seen (bookmarks
 * keep it fresh); `410 Gone` (an ERROR event or status) re-lists; any other failure (429, 500, a
 * dropped connection) reconnects after a back-off that doubles up to `maxBackoffMs`.
 */
export class WatchCache<T extends KubernetesObject> {
  private readonly objects = new Map<string, T>();
  private resourceVersion = "";
  private stopped = false;
  private request: AbortController | undefined;
  private readonly ready: Promise<void>;
  private markReady!: () => void;
  /** Re-lists after a 410 (tests and the bench count them). */
  relists = 0;

  constructor(private readonly o: WatchCacheOptions<T>) {
    this.ready = new Promise((resolve) => {
      this.markReady = resolve;
    });
    void this.loop();
  }

  /** Resolves once the first list is in. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  get(name: string): T | undefined {
    return this.objects.get(name);
  }

  values(): T[] {
    return [...this.objects.values()];
  }

  stop(): void {
    this.stopped = true;
    this.request?.abort();
  }

  private async loop(): Promise<void> {
    let backoffMs = 0;
    let failures = 0;
    const answered = () => {
      if (failures >= UNHEALTHY_AFTER_FAILURES) this.o.onHealth?.({ healthy: true });
      failures = 0;
    };
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) {
          await this.relist();
          answered();
        }
        const outcome = await this.watchOnce(() => {
          backoffMs = 0;
          answered();
        });
        if (outcome === "expired") {
          this.relists++;
          this.resourceVersion = "";
          continue;
        }
        if (outcome === "ended") continue;
        throw outcome;
      } catch (error) {
        if (this.stopped) return;
        failures++;
        if (failures === UNHEALTHY_AFTER_FAILURES)
          this.o.onHealth?.({
            healthy: false,
            reason: (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "",
          });
        backoffMs = Math.min(this.o.maxBackoffMs ?? 30_000, backoffMs > 0 ? backoffMs * 2 : 250);
        this.o.logger.warn("cluster watch failed; reconnecting", {
          path: this.o.path,
          backoff_ms: backoffMs,
          error: error instanceof Error ? error.message : String(error),
        });
        await sleep(backoffMs);
      }
    }
  }

  private async relist(): Promise<void> {
    this.o.onRequest();
    const listed = await this.o.list();
    const seen = new Set<string>();
    for (const item of listed.items) {
      const name = String(item.metadata?.name);
      seen.add(name);
      this.objects.set(name, item);
    }
    for (const name of [...this.objects.keys()]) if (!seen.has(name)) this.objects.delete(name);
    this.resourceVersion = listed.metadata?.resourceVersion ?? "";
    this.markReady();
    for (const name of new Set([...seen, ...this.objects.keys()])) this.o.onChange(name);
  }

  /** One watch request: "ended" (resume), "expired" (re-list) or the error that ended it. */
  private watchOnce(onEvent: () => void): Promise<"ended" | "expired" | Error> {
    return new Promise((resolve) => {
      let expired = false;
      this.o.onRequest();
      const query = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector: this.o.labelSelector,
        timeoutSeconds: this.o.watchTimeoutSeconds ?? 300,
      };
      this.o.watch
        .watch(
          this.o.path,
          query,
          (type: string, obj: T & { code?: number }) => {
            onEvent();
            if (type === "ERROR") {
              if (obj.code === 410) expired = true;
              return;
            }
            const rv = obj.metadata?.resourceVersion;
            if (rv) this.resourceVersion = rv;
            if (type === "BOOKMARK") return;
            const name = String(obj.metadata?.name);
            if (type === "DELETED") this.objects.delete(name);
            else this.objects.set(name, obj);
            this.o.onChange(name);
          },
          (error: unknown) => {
            if (expired || (error as { statusCode?: number } | null)?.statusCode === 410) resolve("expired");
            else if (
              error &&
              !(error instanceof Error && error.name === "AbortError") &&
              (error as { name?: string }).name !== "TimeoutError"
            )
              resolve(error instanceof Error ? error : new Error(String(error)));
            else resolve("ended");
          },
        )
        .then(
          (controller) => {
            this.request = controller;
            if (this.stopped) controller.abort();
          },
          (error: unknown) => resolve(error instanceof Error ? error : new Error(String(error))),
        );
    });
  }
}
