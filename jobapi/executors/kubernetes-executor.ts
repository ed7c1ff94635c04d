import { setTimeout as sleep } from "node:timers/promises";
import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Job,
  type V1Pod,
  Watch,
} from "@kubernetes/client-node";
import { describeCloudAuthorizationError } from "../../shared/auth/cloud-authorization.js";
import { formatBytes, parseQuantity } from "../../shared/cluster/quantity.js";
import { ShardFailedError } from "../../shared/errors.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { HealthObservation } from "../../shared/ops/emitters/health-transitions.js";
import type { StorageConnection } from "../../shared/storage/storage-connection.js";
import type { ArtifactStore } from "../jobs/artifact-store.js";
import { memoryRemedies } from "../jobs/shard-plan.js";
import type { ObservedTimings } from "../jobs/shard-timings.js";
import { createSemaphore, type ShardExecutor, type ShardSpec } from "./executor.js";
import {
  buildShardJob,
  LABEL,
  MANAGED_BY,
  type ShardJobSettings,
  STORAGE_SECRET,
  shardJobName,
  shardMemoryBytes,
} from "./kubernetes-manifests.js";
import { WatchCache } from "./kubernetes-watch.js";

export interface KubernetesExecutorOptions {
  kubeConfig: KubeConfig;
  artifacts: ArtifactStore;
  logger: Logger;
  settings: ShardJobSettings;
  /** Shard Jobs at once across all searches, and per search; the rest wait in the job API. */
  maxJobs: number;
  maxJobsPerSearch: number;
  /** How long a shard may wait for a node that could take it (one that cannot fails at once). */
  scheduleTimeoutSeconds: number;
  /**
   * The job API's storage. An Azurite connection string is handed to the shard worker in a Secret
   * (never in the Job); with identity-based storage, `settings.workloadIdentity` names the pods'
   * service account and no Secret is written.
   */
  storage?: StorageConnection;
  /** @deprecated The Azurite connection string; give `storage` instead. */
  storageConnectionString?: string;
  /** Log lines of a failed pod quoted in the job's error. */
  logTailLines?: number;
  /** Server-side timeout of each watch request. */
  watchTimeoutSeconds?: number;
  /** Hears whether the cluster's API server answers the executor's watches (the `cluster.unhealthy` event). */
  onClusterHealth?: (seen: HealthObservation) => void;
}

/** An executor that also reports what it asked of the API server. */
export interface KubernetesExecutor extends ShardExecutor {
  /** API requests made so far (creates, deletes, lists, watches, log reads, retries included). */
  apiCalls(): number;
  /** Re-lists after a watch ended with 410 Gone. */
  relists(): number;
  stop(): void;
}

const RETRYABLE = new Set([429, 500, 502, 503, 504]);
const CALL_ATTEMPTS = 6;
const LOG_TAIL_BYTES = 2048;

function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

function messageOf(error: unknown): string {
  if (error instanceof ApiException) {
    try {
      const body = typeof error.body === "string" ? JSON.parse(error.body) : error.body;
      if (body && typeof body.message === "string") return `${error.code} ${body.message}`;
    } catch {
      // not JSON
    }
    return `HTTP ${error.code}`;
  }
  return error instanceof Error ? error.message : String(error);
}

type Verdict = { done: true } | { failed: ShardFailedError; deleteJob: boolean } | undefined;

/**
 * Runs each shard as a `batch/v1` Job on the cluster (see {@link buildShardJob}), its state read
 * from two list+watch caches (Jobs and Pods of this job API), never by polling: the API calls a
 * shard costs are its create, and a delete or a log read when it fails, whatever its duration.
 *
 * - Names are deterministic per shard and attempt, and a Job that exists for the shard (any
 *   attempt, still running or succeeded) is adopted rather than created again: a restarted job API
 *   never starts a second Job for a shard; a failed attempt's Job is deleted before the next.
 * - Failures say why: OOMKilled (with the pre-flight's remedies), Evicted, DeadlineExceeded,
 *   ImagePullBackOff, Unschedulable (the request and the largest allocatable memory seen), each
 *   with the tail of the pod's log. Out of memory, no node large enough and a missing image fail
 *   at once (`retryable: false`), without waiting for Kubernetes' own retries.
 * - Aborting a run stops waiting only (the job API stopping: the Job runs on and is adopted);
 *   {@link ShardExecutor.cancelJob} deletes a job's Jobs with `propagationPolicy: Background`.
 * - API calls that fail with 429/5xx are retried after `Retry-After` or a doubling back-off.
 */
export function createKubernetesExecutor(o: KubernetesExecutorOptions): KubernetesExecutor {
  const batch = o.kubeConfig.makeApiClient(BatchV1Api);
  const core = o.kubeConfig.makeApiClient(CoreV1Api);
  const watch = new Watch(o.kubeConfig);
  const { namespace } = o.settings;
  const selector = `${LABEL.managedBy}=${MANAGED_BY}`;
  let calls = 0;
  const waiters = new Map<string, () => void>();
  const wake = (jobName: string | undefined) => {
    if (jobName) waiters.get(jobName)?.();
  };
  const total = createSemaphore(o.maxJobs);
  const perSearch = new Map<string, { slots: ReturnType<typeof createSemaphore>; users: number }>();

  /** One API call, retried on 429/5xx and connection failures; every try counts. */
  async function call<T>(what: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      calls++;
      try {
        return await fn();
      } catch (error) {
        const status = statusOf(error);
        const retryable = status === undefined ? !(error instanceof ApiException) : RETRYABLE.has(status);
        if (!retryable || attempt >= CALL_ATTEMPTS || signal?.aborted) throw error;
        const retryAfter = Number(
          (error instanceof ApiException ? error.headers?.["retry-after"] : undefined) ?? Number.NaN,
        );
        const delayMs = Number.isFinite(retryAfter) ? retryAfter * 1000 : 200 * 2 ** (attempt - 1);
        o.logger.warn("cluster API call failed; retrying", { call: what, status, attempt, delay_ms: delayMs });
        await sleep(delayMs, undefined, { signal }).catch(() => {});
      }
    }
  }

  let caches: { jobs: WatchCache<V1Job>; pods: WatchCache<V1Pod> } | undefined;
  let starting: Promise<void> | undefined;
  function start(): Promise<void> {
    starting ??= (async () => {
      // The worker's Azurite connection lives in a Secret (never in the Job), created or replaced;
      // with the workload identity there is no secret to hand over.
      const connectionString =
        o.storage?.kind === "connection-string"
          ? o.storage.connectionString
          : o.storage
            ? undefined
            : o.storageConnectionString;
      if (connectionString !== undefined) {
        const secret = {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: STORAGE_SECRET.name, namespace },
          type: "Opaque",
          stringData: { [STORAGE_SECRET.key]: connectionString },
        };
        try {
          await call("create secret", () => core.createNamespacedSecret({ namespace, body: secret }));
        } catch (error) {
          if (statusOf(error) !== 409) throw error;
          await call("replace secret", () =>
            core.replaceNamespacedSecret({ name: STORAGE_SECRET.name, namespace, body: secret }),
          );
        }
      }
      // The cluster is unhealthy while any watch is, and healthy again once all are: one turn each way, not one per watch.
      const failingWatches = new Set<string>();
      const watchHealth = (name: string) => (seen: HealthObservation) => {
        const wasHealthy = failingWatches.size === 0;
        if (seen.healthy) failingWatches.delete(name);
        else failingWatches.add(name);
        if (wasHealthy !== (failingWatches.size === 0)) o.onClusterHealth?.(seen);
      };
      const common = {
        watch,
        logger: o.logger,
        labelSelector: selector,
        onRequest: () => calls++,
        watchTimeoutSeconds: o.watchTimeoutSeconds,
      };
      caches = {
        jobs: new WatchCache<V1Job>({
          ...common,
          onHealth: watchHealth("jobs"),
          path: `/apis/batch/v1/namespaces/${namespace}/jobs`,
          list: () => batch.listNamespacedJob({ namespace, labelSelector: selector }),
          onChange: (name) => wake(name),
        }),
        pods: new WatchCache<V1Pod>({
          ...common,
          onHealth: watchHealth("pods"),
          path: `/api/v1/namespaces/${namespace}/pods`,
          list: () => core.listNamespacedPod({ namespace, labelSelector: selector }),
          onChange: (name) => wake(caches?.pods.get(name)?.metadata?.labels?.["batch.kubernetes.io/job-name"]),
        }),
      };
      await Promise.all([caches.jobs.whenReady(), caches.pods.whenReady()]);
    })().catch((error: unknown) => {
      starting = undefined;
      throw error;
    });
    return starting;
  }

  async function admit(jobId: string, signal: AbortSignal): Promise<() => void> {
    let entry = perSearch.get(jobId);
    if (!entry) {
      entry = { slots: createSemaphore(o.maxJobsPerSearch), users: 0 };
      perSearch.set(jobId, entry);
    }
    const e = entry;
    e.users++;
    const done = () => {
      if (--e.users === 0) perSearch.delete(jobId);
    };
    try {
      const mine = await e.slots.acquire(signal);
      const all = await total.acquire(signal).catch((error: unknown) => {
        mine();
        throw error;
      });
      return () => {
        all();
        mine();
        done();
      };
    } catch (error) {
      done();
      throw error;
    }
  }

  const jobsOf = (jobId: string, shardId: string) =>
    (caches?.jobs.values() ?? []).filter(
      (j) => j.metadata?.labels?.[LABEL.jobId] === jobId && j.metadata?.labels?.[LABEL.shard] === shardId,
    );
  const condition = (job: V1Job, type: string) =>
    job.status?.conditions?.find((c) => c.type === type && c.status === "True");
  const finished = (job: V1Job) => condition(job, "Complete") ?? condition(job, "Failed");

  async function deleteJob(name: string): Promise<void> {
    try {
      await call("delete job", () => batch.deleteNamespacedJob({ name, namespace, propagationPolicy: "Background" }));
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  }

  async function logTail(pod: V1Pod): Promise<string> {
    const terminated = pod.status?.containerStatuses?.[0]?.state?.terminated;
    let text = terminated?.message;
    if (!text) {
      try {
        text = await call("read pod log", () =>
          core.readNamespacedPodLog({
            name: String(pod.metadata?.name),
            namespace,
            tailLines: o.logTailLines ?? 20,
            limitBytes: 64 * 1024,
          }),
        );
      } catch {
        text = "";
      }
    }
    const lines = String(text ?? "")
      .trimEnd()
      .split("\n")
      .slice(-(o.logTailLines ?? 20))
      .join("\n");
    return lines.length > LOG_TAIL_BYTES ? `…${lines.slice(-LOG_TAIL_BYTES)}` : lines;
  }

  async function largestAllocatable(): Promise<number | undefined> {
    try {
      const nodes = await call("list nodes", () => core.listNode({}));
      return Math.max(0, ...nodes.items.map((n) => parseQuantity(n.status?.allocatable?.memory) ?? 0));
    } catch {
      return undefined;
    }
  }

  /** What the current state of a shard's Job says: done, failed (and why), or keep waiting. */
  async function verdict(
    spec: ShardSpec,
    jobName: string,
    state: { unschedulableChecked: boolean; seen: boolean; observed: Partial<ObservedTimings> },
  ): Promise<Verdict> {
    const job = caches?.jobs.get(jobName);
    const pods = (caches?.pods.values() ?? []).filter(
      (p) => p.metadata?.labels?.["batch.kubernetes.io/job-name"] === jobName,
    );
    const prefix = `cluster Job ${jobName}`;
    const withLog = async (text: string, pod: V1Pod | undefined) => {
      const tail = pod ? await logTail(pod) : "";
      return tail ? `${text} Last lines of the pod's log:\n${tail}` : text;
    };
    // A Job just created may not have reached the cache yet; one seen and then gone was deleted.
    if (!job)
      return state.seen
        ? { failed: new ShardFailedError(`${prefix} was deleted before it finished`, true), deleteJob: false }
        : undefined;
    state.seen = true;
    // When each phase was first seen (the shard's timings; a phase passed between two events shows at the later one).
    const seenAt = Date.now();
    if (pods.some((p) => p.spec?.nodeName)) state.observed.scheduled ??= seenAt;
    if (pods.some((p) => p.status?.phase === "Running" || p.status?.phase === "Succeeded"))
      state.observed.running ??= seenAt;
    if (condition(job, "Complete")) {
      state.observed.completed = seenAt;
      return { done: true };
    }
    const byAge = [...pods].sort((a, b) =>
      String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)),
    );
    const failedPods = byAge.filter((p) => p.status?.phase === "Failed");
    const lastFailed = failedPods.at(-1);
    const oom = failedPods.find((p) => p.status?.containerStatuses?.[0]?.state?.terminated?.reason === "OOMKilled");
    if (oom) {
      const limit = shardMemoryBytes(spec, o.settings);
      const text =
        `${prefix}: OOMKilled — the shard's pod used more than its memory limit of ${formatBytes(limit)} ` +
        `(${formatBytes(spec.memoryBytes ?? 0)} of database to cache plus ${formatBytes(o.settings.workingSetBytes)} working set). ${memoryRemedies(spec.sharded === true)}`;
      return { failed: new ShardFailedError(await withLog(text, oom), false), deleteJob: true };
    }
    for (const pod of byAge) {
      const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting;
      if (
        waiting?.reason === "ImagePullBackOff" ||
        waiting?.reason === "InvalidImageName" ||
        waiting?.reason === "CreateContainerConfigError" ||
        waiting?.reason === "CreateContainerError"
      ) {
        const text = `${prefix}: ${waiting.reason} — ${waiting.message ?? ""} (image ${o.settings.image})`;
        return { failed: new ShardFailedError(text, false), deleteJob: true };
      }
      const scheduled = pod.status?.conditions?.find((c) => c.type === "PodScheduled");
      if (scheduled?.status === "False" && scheduled.reason === "Unschedulable" && !state.unschedulableChecked) {
        state.unschedulableChecked = true;
        const request = shardMemoryBytes(spec, o.settings);
        const largest = await largestAllocatable();
        if (largest !== undefined && largest < request) {
          const text =
            `${prefix}: Unschedulable — no node has the memory this shard requests: ${formatBytes(request)} ` +
            `(largest allocatable seen: ${formatBytes(largest)}). The scheduler says: ${scheduled.message ?? ""} ${memoryRemedies(spec.sharded === true)}`;
          return { failed: new ShardFailedError(text, false), deleteJob: true };
        }
      }
    }
    const failedCondition = condition(job, "Failed");
    if (failedCondition) {
      if (failedCondition.reason === "DeadlineExceeded") {
        const text = `${prefix}: DeadlineExceeded — the shard ran longer than its deadline of ${o.settings.activeDeadlineSeconds} s (activeDeadlineSeconds).`;
        return { failed: new ShardFailedError(await withLog(text, byAge.at(-1)), false), deleteJob: false };
      }
      const reason =
        lastFailed?.status?.reason ??
        lastFailed?.status?.containerStatuses?.[0]?.state?.terminated?.reason ??
        failedCondition.reason ??
        "Failed";
      const exitCode = lastFailed?.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
      const text =
        reason === "Evicted"
          ? `${prefix}: Evicted — ${lastFailed?.status?.message ?? "the node reclaimed resources"}.`
          : `${prefix}: ${reason}${exitCode !== undefined ? ` (exit code ${exitCode})` : ""} after ${(job.status?.failed ?? 0) || 1} pod failure(s) (backoffLimit ${o.settings.backoffLimit}).`;
      return { failed: new ShardFailedError(await withLog(text, lastFailed), true), deleteJob: false };
    }
    return undefined;
  }

  /** Waits for the Job's verdict, re-evaluated on each change the caches see. */
  function waitFor(
    spec: ShardSpec,
    jobName: string,
    signal: AbortSignal,
    observed: Partial<ObservedTimings>,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const state = { unschedulableChecked: false, seen: false, observed };
      let evaluating = false;
      let again = false;
      let settled = false;
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        waiters.delete(jobName);
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      const onAbort = () => finish(signal.reason ?? new Error("aborted"));
      // A pod that no node takes within the timeout (one could, but none has room, or nothing schedules it).
      const timer = setTimeout(() => {
        const pods = (caches?.pods.values() ?? []).filter(
          (p) => p.metadata?.labels?.["batch.kubernetes.io/job-name"] === jobName,
        );
        if (pods.some((p) => p.spec?.nodeName)) return;
        const why = pods
          .flatMap((p) => p.status?.conditions ?? [])
          .find((c) => c.type === "PodScheduled" && c.status === "False")?.message;
        const text = `cluster Job ${jobName}: Unschedulable — no pod was scheduled within ${o.scheduleTimeoutSeconds} s${why ? `: ${why}` : " (no scheduling decision was reported)"}.`;
        deleteJob(jobName).catch(() => {});
        finish(new ShardFailedError(text, false));
      }, o.scheduleTimeoutSeconds * 1000);
      timer.unref();
      const evaluate = async () => {
        if (evaluating) {
          again = true;
          return;
        }
        evaluating = true;
        try {
          do {
            again = false;
            const v = await verdict(spec, jobName, state);
            if (settled) return;
            if (v && "done" in v) return finish();
            if (v) {
              if (v.deleteJob)
                await deleteJob(jobName).catch((error: unknown) =>
                  o.logger.warn("could not delete a failed shard Job", { job: jobName, error }),
                );
              return finish(v.failed);
            }
          } while (again);
        } catch (error) {
          finish(error);
        } finally {
          evaluating = false;
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      waiters.set(jobName, () => void evaluate());
      void evaluate();
    });
  }

  return {
    name: "kubernetes",
    oneNode: false,
    storesOutputs: true,
    apiCalls: () => calls,
    relists: () => (caches?.jobs.relists ?? 0) + (caches?.pods.relists ?? 0),
    stop() {
      caches?.jobs.stop();
      caches?.pods.stop();
    },
    async run(spec, signal) {
      if (spec.attempt === undefined || spec.batch === undefined || !spec.queryPath)
        throw new Error("a cluster shard needs its attempt, batch and query");
      await start();
      const release = await admit(spec.jobId, signal);
      try {
        const mine = jobsOf(spec.jobId, spec.shardId);
        if (mine.some((j) => condition(j, "Complete"))) return undefined;
        const observed: Partial<ObservedTimings> = {};
        let target = mine.find((j) => !finished(j))?.metadata?.name;
        if (target) {
          o.logger.info("adopting the shard's cluster Job", {
            job_id: spec.jobId,
            shard: spec.shardId,
            cluster_job: target,
          });
        } else {
          // One Job per shard at a time: a failed attempt's Job goes before the next is created.
          for (const old of mine) await deleteJob(String(old.metadata?.name));
          const batchName = `batches/b${spec.batch}.fa`;
          if ((await o.artifacts.size(spec.jobId, batchName)) === undefined)
            await o.artifacts.uploadFile(spec.jobId, batchName, spec.queryPath);
          target = shardJobName(spec.jobId, spec.shardId, spec.attempt);
          const body = buildShardJob(spec, o.settings);
          observed.created = Date.now();
          try {
            await call("create job", () => batch.createNamespacedJob({ namespace, body }), signal);
          } catch (error) {
            // A retried create whose first try went through (409): the Job is this attempt's.
            if (statusOf(error) !== 409) {
              // A missing role names itself and is not retried: the next try would be refused too.
              const refusal = describeCloudAuthorizationError(error);
              throw new ShardFailedError(
                `creating cluster Job ${target} failed: ${refusal?.message ?? messageOf(error)}`,
                !refusal,
              );
            }
          }
        }
        await waitFor(spec, target, signal, observed);
        return { ...observed, completed: observed.completed ?? Date.now() };
      } finally {
        release();
      }
    },
    async cancelJob(jobId) {
      await start();
      await call("delete jobs", () =>
        batch.deleteCollectionNamespacedJob({
          namespace,
          labelSelector: `${selector},${LABEL.jobId}=${jobId}`,
          propagationPolicy: "Background",
        }),
      );
    },
  };
}
