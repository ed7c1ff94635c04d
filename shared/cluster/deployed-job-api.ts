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
      const body = init.body;
      if (body === undefined || body === null) req.end();
      else if (typeof body === "string" || body instanceof Uint8Array) req.end(body);
      else reject(new TypeError("kubeFetch sends string or byte bodies only"));
    });
  };
}

/** The Service proxy's base URL of the job API in `namespace` on the cluster `server`. */
export function serviceProxyUrl(server: string, namespace: string): string {
  return `${server.replace(/\/+$/, "")}/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${JOB_API_OBJECT}:${SERVICE_PORT}/proxy`;
}

/** Reads the job API's Deployment (undefined when the cluster has none). */
export async function readJobApiDeployment(kc: KubeConfig, namespace: string): Promise<V1Deployment | undefined> {
  const { AppsV1Api, ApiException } = await import("@kubernetes/client-node");
  try {
    return await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: JOB_API_OBJECT, namespace });
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return undefined;
    throw error;
  }
}

/** What {@link createJobApiTargets} is built from. */
export interface JobApiTargetsDependencies {
  /** `JOBAPI_URL`: the job API to call while the workspace has none deployed (undefined: none). */
  configuredUrl: string | undefined;
  /**
   * The saved workspace's deployed job API, looked up on the cluster (undefined: none to use, with
   * why); absent when no cluster is configured. It may throw (API server unreachable, a refusal).
   */
  lookUpDeployed?: () => Promise<{ target: JobApiTarget } | { target?: undefined; why: string }>;
  /** How long a lookup's answer is used before the next (default 30 s). */
  cacheMs?: number;
  logger: Logger;
  now?: () => number;
}

/**
 * The job API the dashboard calls, chosen at request time: the workspace's deployed job API once
 * the Cluster page's deploy has made it available (reached through the cluster's API server, the
 * Service proxy of the job API's Service), else the configured `JOBAPI_URL`. One lookup serves
 * every call for {@link JobApiTargetsDependencies.cacheMs} (concurrent calls share it), so calls do
 * not each read the cluster; `invalidate` forgets it (a deploy completed, the deployed one went away).
 * No job API to call is a {@link DependencyUnavailableError} (503) that says what is missing.
 */
export function createJobApiTargets(deps: JobApiTargetsDependencies) {
  const cacheMs = deps.cacheMs ?? 30_000;
  const now = deps.now ?? Date.now;
  const configured: JobApiTarget | undefined = deps.configuredUrl
    ? { source: "configured", baseUrl: deps.configuredUrl }
    : undefined;
  let cached: { at: number; answer: Promise<JobApiTarget | undefined> } | undefined;
  let lastSource: JobApiTarget["source"] | undefined;

  async function lookUp(): Promise<JobApiTarget | undefined> {
    if (!deps.lookUpDeployed) return configured;
    let found: Awaited<ReturnType<NonNullable<typeof deps.lookUpDeployed>>>;
    try {
      found = await deps.lookUpDeployed();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      if (!configured)
        throw new DependencyUnavailableError(
          `the workspace's job API could not be looked up on the cluster: ${reason}`,
        );
      deps.logger.warn("deployed job API lookup failed; calling the configured job API", { reason });
      return configured;
    }
    const target = found.target ?? configured;
    if (target && target.source !== lastSource)
      deps.logger.info("job API selected", {
        source: target.source,
        ...(found.target ? {} : { deployed: found.why }),
      });
    lastSource = target?.source;
    return target;
  }

  return {
    /** The job API to call now; a 503 error when there is none. */
    async resolve(): Promise<JobApiTarget> {
      const at = now();
      if (!cached || at - cached.at >= cacheMs) {
        const answer = lookUp();
        cached = { at, answer };
        // A failed lookup is not kept: the next call looks again.
        answer.catch(() => {
          if (cached?.answer === answer) cached = undefined;
        });
      }
      const target = await cached.answer;
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

export type JobApiTargets = ReturnType<typeof createJobApiTargets>;
