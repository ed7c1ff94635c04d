import { request as httpRequest } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import { Readable } from "node:stream";
import type { KubeConfig, V1Deployment } from "@kubernetes/client-node";
import { DependencyUnavailableError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { Workspace } from "../workspace/workspace.js";
import { FIELD_MANAGER } from "./job-api-deploy.js";

/** The job API's Deployment and Service (`infra/k8s/jobapi.yaml`) and the Service's port name. */
export const JOB_API_OBJECT = "blastplane-jobapi";
const SERVICE_PORT = "http";

/** Where the dashboard sends its job-API calls: a base URL, and the fetch that reaches it. */
export interface JobApiTarget {
  /** `deployed`: the job API the Cluster page deployed; `configured`: `JOBAPI_URL`. */
  source: "deployed" | "configured";
  baseUrl: string;
  /** The fetch to use (the cluster's API server needs its CA and credentials); the global one when absent. */
  fetch?: typeof fetch;
}

/** Why the workspace's deployed job API is, or is not, the one to call. */
export type DeployedJobApiVerdict =
  | { use: true }
  | { use: false; why: "no_deployment" | "not_blastplane" | "other_workspace" | "not_available" };

function envOf(deployment: V1Deployment, name: string): string | undefined {
  const container = deployment.spec?.template.spec?.containers.find((c) => c.name === "jobapi");
  return container?.env?.find((e) => e.name === name)?.value;
}

/**
 * Whether `deployment` (the cluster's job API Deployment, undefined when it has none) is the
 * saved workspace's job API, deployed by the dashboard and available: applied by blastplane (field
 * manager {@link FIELD_MANAGER}), rendered for the workspace's storage account (where its jobs
 * live), and `Available` (a deploy operation succeeds when its rollout is complete; a later
 * rollout or a lost pod takes the replica away until it is back).
 */
export function deployedJobApiVerdict(
  deployment: V1Deployment | undefined,
  workspace: Pick<Workspace, "storage_account">,
): DeployedJobApiVerdict {
  if (!deployment) return { use: false, why: "no_deployment" };
  const applied = (deployment.metadata?.managedFields ?? []).some(
    (f) => f.manager === FIELD_MANAGER && f.operation === "Apply",
  );
  if (!applied) return { use: false, why: "not_blastplane" };
  if (envOf(deployment, "JOBAPI_STORAGE_ACCOUNT_NAME") !== workspace.storage_account)
    return { use: false, why: "other_workspace" };
  const available = (deployment.status?.conditions ?? []).some((c) => c.type === "Available" && c.status === "True");
  if (!available || (deployment.status?.availableReplicas ?? 0) < 1) return { use: false, why: "not_available" };
  return { use: true };
}

/**
 * A fetch through the cluster's API server as `kc` describes it (its CA, and the credentials of its
 * user: on AKS an Entra token of the managed identity). Bodies stream both ways; the caller's
 * `signal` aborts the request and its answer.
 */
export function kubeFetch(kc: KubeConfig): typeof fetch {
  return async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const options: RequestOptions = {};
    await kc.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(options.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    new Headers(init.headers).forEach((value, key) => {
      headers[key] = value;
    });
    const method = init.method ?? "GET";
    // Checked before the request is opened, so a refused body leaves no socket behind.
    const body = init.body;
    if (body !== undefined && body !== null && typeof body !== "string" && !(body instanceof Uint8Array))
      throw new TypeError("kubeFetch sends string or byte bodies only");
    const send = url.protocol === "http:" ? httpRequest : httpsRequest;
    return new Promise<Response>((resolve, reject) => {
      const req = send(url, { ...options, method, headers, ...(init.signal ? { signal: init.signal } : {}) }, (res) => {
        const answerHeaders = new Headers();
        for (const [k, v] of Object.entries(res.headers))
          for (const one of [v ?? []].flat()) answerHeaders.append(k, String(one));
        const status = res.statusCode ?? 502;
        const empty = method === "HEAD" || status === 204 || status === 304;
        if (empty) res.resume();
        resolve(
          new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
            status,
            headers: answerHeaders,
          }),
        );
      });
      req.once("error", reject);
      if (body === undefined || body === null) req.end();
      else req.end(body);
    });
  };
}

/** The Service proxy's base URL of the job API in `namespace` on the cluster `server`. */
export function serviceProxyUrl(server: string, namespace: string): string {
  return `${server.replace(/\/+$/, "")}/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${JOB_API_OBJECT}:${SERVICE_PORT}/proxy`;
}

/**
 * Reads the job API's Deployment (undefined when the cluster has none); `signal` abandons the
 * request (the API server may accept and never answer).
 */
export async function readJobApiDeployment(
  kc: KubeConfig,
  namespace: string,
  signal?: AbortSignal,
): Promise<V1Deployment | undefined> {
  const { AppsV1Api, ApiException, Observable } = await import("@kubernetes/client-node");
  try {
    return await kc.makeApiClient(AppsV1Api).readNamespacedDeployment(
      { name: JOB_API_OBJECT, namespace },
      signal
        ? {
            middleware: [
              {
                pre: (context) => {
                  context.setSignal(signal);
                  return new Observable(Promise.resolve(context));
                },
                post: (response) => new Observable(Promise.resolve(response)),
              },
            ],
            middlewareMergeStrategy: "append",
          }
        : undefined,
    );
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

/**
 * Why a lookup of the deployed job API failed, as a fixed word: an error's message may quote a
 * malformed kubeconfig (its token lines) or the API server's answer (body and headers), so only
 * this reaches a response or a log.
 */
export type JobApiLookupFailure =
  | "kubeconfig_unreadable"
  | "workspace_unreadable"
  | "unreachable"
  | "timeout"
  | `http_${number}`;

/** A lookup failure whose reason the lookup knows (e.g. the kubeconfig could not be read). */
export class JobApiLookupError extends Error {
  constructor(readonly reason: JobApiLookupFailure) {
    super(`deployed job API lookup failed: ${reason}`);
    this.name = "JobApiLookupError";
  }
}

/** The fixed reason of a failed lookup (never the error's message). */
export function jobApiLookupFailure(error: unknown): JobApiLookupFailure {
  if (error instanceof JobApiLookupError) return error.reason;
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) return "timeout";
  // The Kubernetes client's ApiException: `code` is the API server's HTTP status.
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "number" && Number.isInteger(code) && code >= 100 && code <= 599) return `http_${code}`;
  return "unreachable";
}

/** What {@link createDeployedJobApiLookup} reads. */
export interface DeployedJobApiLookupDependencies {
  /** The saved workspace (undefined: none saved). */
  savedWorkspace: () => Promise<Pick<Workspace, "storage_account"> | undefined>;
  /** The cluster's client configuration (`SVC_KUBECONFIG`). */
  kubeConfig: () => Promise<KubeConfig>;
  /** The namespace the job API is deployed into. */
  namespace: string;
}

/**
 * The saved workspace's job API on the cluster, if the Cluster page's deploy made it available:
 * reached through the cluster's API server (the Service proxy of the job API's Service), with the
 * kubeconfig's credentials (on AKS, an Entra token of the managed identity). A kubeconfig or a
 * workspace record that cannot be read is a {@link JobApiLookupError} with that fixed reason.
 */
export function createDeployedJobApiLookup(
  deps: DeployedJobApiLookupDependencies,
): NonNullable<JobApiTargetsDependencies["lookUpDeployed"]> {
  return async (signal) => {
    const saved = await deps.savedWorkspace().catch(() => {
      throw new JobApiLookupError("workspace_unreadable");
    });
    if (!saved) return { why: "no workspace saved" };
    const kc = await deps.kubeConfig().catch(() => {
      throw new JobApiLookupError("kubeconfig_unreadable");
    });
    const verdict = deployedJobApiVerdict(await readJobApiDeployment(kc, deps.namespace, signal), saved);
    if (!verdict.use) return { why: verdict.why };
    const server = kc.getCurrentCluster()?.server;
    if (!server) return { why: "the kubeconfig names no cluster server" };
    return { target: { source: "deployed", baseUrl: serviceProxyUrl(server, deps.namespace), fetch: kubeFetch(kc) } };
  };
}

/** What {@link createJobApiTargets} is built from. */
export interface JobApiTargetsDependencies {
  /** `JOBAPI_URL`: the job API to call while the workspace has none deployed (undefined: none). */
  configuredUrl: string | undefined;
  /**
   * The saved workspace's deployed job API, looked up on the cluster (undefined: none to use, with
   * why); absent when no cluster is configured. It may throw (API server unreachable, a refusal);
   * `signal` aborts when the lookup has taken {@link lookupTimeoutMs}.
   */
  lookUpDeployed?: (signal: AbortSignal) => Promise<{ target: JobApiTarget } | { target?: undefined; why: string }>;
  /** How long a lookup's answer is used before the next (default 30 s). A failed lookup is not kept. */
  cacheMs?: number;
  /**
   * How long a lookup may take before it counts as failed (`timeout`): then `JOBAPI_URL` is called,
   * or the call is a 503 (default 5 s; the job-API client's timeout when that is shorter).
   */
  lookupTimeoutMs?: number;
  logger: Logger;
  now?: () => number;
}

/** What the caller of {@link JobApiTargets.resolve} may add: its own abort. */
export interface ResolveOptions {
  signal?: AbortSignal;
}

/** A lookup's outcome: the target (undefined: none to call), and whether it may be kept. */
interface LookupOutcome {
  target: JobApiTarget | undefined;
  keep: boolean;
}

/**
 * The job API the dashboard calls, chosen at request time: the workspace's deployed job API once
 * the Cluster page's deploy has made it available (reached through the cluster's API server, the
 * Service proxy of the job API's Service), else the configured `JOBAPI_URL`. One lookup serves
 * every call for {@link JobApiTargetsDependencies.cacheMs} (concurrent calls share it), so calls do
 * not each read the cluster; `invalidate` forgets it (a deploy completed, the deployed one went away).
 * A lookup is bounded by {@link JobApiTargetsDependencies.lookupTimeoutMs}; a failed one (its reason
 * a fixed word, see {@link jobApiLookupFailure}) falls back to `JOBAPI_URL` for this call only, so the
 * next call looks again. No job API to call is a {@link DependencyUnavailableError} (503) that says
 * what is missing.
 */
export function createJobApiTargets(deps: JobApiTargetsDependencies) {
  const cacheMs = deps.cacheMs ?? 30_000;
  const lookupTimeoutMs = deps.lookupTimeoutMs ?? 5_000;
  const now = deps.now ?? Date.now;
  const configured: JobApiTarget | undefined = deps.configuredUrl
    ? { source: "configured", baseUrl: deps.configuredUrl }
    : undefined;
  let cached: { at: number; outcome: Promise<LookupOutcome> } | undefined;
  let lastSource: JobApiTarget["source"] | undefined;

  /** The lookup, abandoned (its request aborted) after {@link lookupTimeoutMs}. */
  async function boundedLookup(
    lookUpDeployed: NonNullable<JobApiTargetsDependencies["lookUpDeployed"]>,
  ): ReturnType<typeof lookUpDeployed> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const reason = new JobApiLookupError("timeout");
        controller.abort(reason);
        reject(reason);
      }, lookupTimeoutMs);
    });
    try {
      return await Promise.race([lookUpDeployed(controller.signal), expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  async function lookUp(): Promise<LookupOutcome> {
    if (!deps.lookUpDeployed) return { target: configured, keep: true };
    let found: Awaited<ReturnType<NonNullable<typeof deps.lookUpDeployed>>>;
    try {
      found = await boundedLookup(deps.lookUpDeployed);
    } catch (error) {
      const reason = jobApiLookupFailure(error);
      // The error's name only: its message may quote credentials or the API server's answer.
      const errorName = error instanceof Error ? error.name : typeof error;
      if (!configured) {
        deps.logger.warn("deployed job API lookup failed; no configured job API", { reason, error: errorName });
        throw new DependencyUnavailableError(
          `the workspace's job API could not be looked up on the cluster: ${reason}`,
        );
      }
      deps.logger.warn("deployed job API lookup failed; calling the configured job API", {
        reason,
        error: errorName,
      });
      return { target: configured, keep: false };
    }
    const target = found.target ?? configured;
    if (target && target.source !== lastSource)
      deps.logger.info("job API selected", {
        source: target.source,
        ...(found.target ? {} : { deployed: found.why }),
      });
    lastSource = target?.source;
    return { target, keep: true };
  }

  return {
    /**
     * The job API to call now; a 503 error when there is none. The caller's `signal` stops its
     * wait (rejecting with the signal's reason); the shared lookup goes on for the other callers.
     */
    async resolve(options: ResolveOptions = {}): Promise<JobApiTarget> {
      options.signal?.throwIfAborted();
      const at = now();
      if (!cached || at - cached.at >= cacheMs) {
        const outcome = lookUp();
        const entry = { at, outcome };
        cached = entry;
        // A failed lookup, or its fallback to JOBAPI_URL, is not kept: the next call looks again.
        outcome.then(
          (o) => {
            if (!o.keep && cached === entry) cached = undefined;
          },
          () => {
            if (cached === entry) cached = undefined;
          },
        );
      }
      const { target } = await abortable(cached.outcome, options.signal);
      if (!target)
        throw new DependencyUnavailableError(
          "no job API is reachable for the workspace: deploy the job API from the Cluster page (or set JOBAPI_URL)",
        );
      return target;
    },
    /** Forgets the last lookup: the next call looks again. */
    invalidate(): void {
      cached = undefined;
    },
  };
}

/** `promise`, or the signal's reason once `signal` aborts first. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

export type JobApiTargets = ReturnType<typeof createJobApiTargets>;
