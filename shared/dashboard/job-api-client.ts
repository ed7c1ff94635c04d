import type { JobApiTarget } from "../cluster/deployed-job-api.js";
import {
  ConflictError,
  DependencyFailedError,
  DependencyUnavailableError,
  DomainError,
  type FieldIssue,
  InvalidRequestError,
  NotFoundError,
  QueueFullError,
  ValidationError,
} from "../errors.js";
import type { ClusterWarmup } from "../jobs/cluster-warmup.js";
import type { StoringProgress } from "../jobs/model.js";

export type { ClusterWarmup };

/** The job API's answer to an accepted submit. */
export interface JobApiAcceptance {
  job_id: string;
  status: string;
  /** True when the idempotency key returned the job an earlier submit created. */
  replayed: boolean;
}

/** The job API's status of one job (`GET /v1/jobs/{job_id}/status`), the fields the dashboard reads. */
export interface JobApiStatus {
  job_id: string;
  status: string;
  error: string;
  queue_position: number | null;
  kubernetes: { summary: { total: number; succeeded: number; failed: number; active: number } };
  /** The merged result's size (XML and gzipped) once the job completed; absent from older job APIs. */
  result_bytes?: { xml: number; gzip: number } | null;
  /** After BLAST, before completed: merged XML stored so far (issue 23); absent from older job APIs. */
  storing?: StoringProgress | null;
  [key: string]: unknown;
}

/** A results download from the job API, to stream through (never a storage URL). */
export interface JobApiResults {
  body: ReadableStream<Uint8Array>;
  contentType: string | undefined;
  contentDisposition: string | undefined;
}

/** Options of {@link createJobApiClient}. */
export interface JobApiClientOptions {
  /** The job API's base URL; undefined when it is not configured (every call is then unavailable). */
  baseUrl: string | undefined;
  /**
   * The job API chosen per call (the workspace's deployed one, else the configured one), replacing
   * `baseUrl` when given. A deployed one that cannot be reached (or answers 502/503/504) is
   * `invalidate`d, so the next call looks again.
   */
  targets?: { resolve(options?: { signal?: AbortSignal }): Promise<JobApiTarget>; invalidate(): void };
  /** The shared job-API token (`X-SVC-API-Token`), read per call so a rotation takes effect. */
  token: () => Promise<string>;
  /**
   * How long the job API may take to answer a call's status and headers before it counts as
   * unreachable. It does not cover the body: a results download lasts as long as it needs.
   */
  timeoutMs: number;
  /**
   * How long a body read may wait for the job API's next bytes before the call fails (the job API
   * stalled or the connection hung). Time the caller takes between reads does not count.
   * Default 60 s.
   */
  idleTimeoutMs?: number;
  /** The fetch to use; tests pass one that records or fails. */
  fetch?: typeof fetch;
}

/** Options of each call: the caller may give up (a client that hung up, a cancelled activity). */
export interface JobApiCallOptions {
  abortSignal?: AbortSignal;
}

/** Retry-After when the job API gives none (or is unreachable). */
const DEFAULT_RETRY_AFTER_SECONDS = 5;

/** The default of {@link JobApiClientOptions.idleTimeoutMs}. */
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

/**
 * `body` read through an idle deadline: each read that waits longer than `idleTimeoutMs` for the
 * job API's next bytes fails, and so does a read the connection breaks. Either way the stream
 * errors (never ends early as if complete) and `abort` cancels the request to the job API. Only
 * waits on the job API count: a consumer that reads slowly never trips it (the next read is
 * asked for only when the consumer wants more).
 */
function withIdleTimeout(
  body: ReadableStream<Uint8Array>,
  idleTimeoutMs: number,
  abort: (reason: Error) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const idle = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new DependencyUnavailableError(`the job API sent no data for ${idleTimeoutMs} ms`)),
            idleTimeoutMs,
          );
        });
        try {
          const { done, value } = await Promise.race([reader.read(), idle]);
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          const failure =
            error instanceof DomainError
              ? error
              : new DependencyUnavailableError(
                  `the job API's answer broke off: ${error instanceof Error ? error.message : String(error)}`,
                  DEFAULT_RETRY_AFTER_SECONDS,
                  { cause: error },
                );
          abort(failure);
          reader.cancel(failure).catch(() => undefined);
          controller.error(failure);
        } finally {
          clearTimeout(timer);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    // Ask the job API for the next chunk only when the consumer has taken the last one.
    { highWaterMark: 0 },
  );
}

/** The job API's `detail` as text (422 details are field issues). */
function detailText(detail: unknown): string {
  if (typeof detail === "string") return detail;
  return detail === undefined ? "" : JSON.stringify(detail);
}

function isFieldIssueList(detail: unknown): detail is FieldIssue[] {
  return (
    Array.isArray(detail) &&
    detail.every(
      (issue) => issue && typeof issue === "object" && Array.isArray(issue.loc) && typeof issue.msg === "string",
    )
  );
}

function retryAfterSeconds(response: Response): number {
  const seconds = Number(response.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds > 0 ? seconds : DEFAULT_RETRY_AFTER_SECONDS;
}

/**
 * The domain error of a job-API answer that is not a success: the caller's request was refused
 * (400, 404, 409, 422: the job API's own words), the job API is busy or restarting (429, 502, 503,
 * 504: try again after its Retry-After), or it failed in a way this service cannot use.
 */
async function answerError(response: Response): Promise<DomainError> {
  const body = (await response.json().catch(() => ({}))) as { detail?: unknown; message?: unknown };
  // A Kubernetes `Status` (the cluster's API server answering for a deployed job API) says `message`.
  const detail = detailText(body.detail ?? (typeof body.message === "string" ? body.message : undefined));
  const answered = `job API answered ${response.status}${detail ? `: ${detail}` : ""}`;
  switch (response.status) {
    case 400:
      return new InvalidRequestError(detail || answered);
    case 404:
      return new NotFoundError(detail || answered);
    case 409:
      return new ConflictError(detail || answered);
    case 422:
      return isFieldIssueList(body.detail)
        ? new ValidationError(body.detail)
        : new InvalidRequestError(detail || answered);
    case 429:
      return new QueueFullError(answered, retryAfterSeconds(response));
    case 502:
    case 503:
    case 504:
      return new DependencyUnavailableError(answered, retryAfterSeconds(response));
    default:
      // 401/403 mean the shared token is wrong: this deployment's fault, not the caller's.
      return new DependencyFailedError(answered);
  }
}

/**
 * The dashboard's one client of the job API (the submit orchestration's activities and the results
 * route share it). It sends the configured token, never the user's bearer token, and speaks the
 * domain errors of `shared/errors.ts`: {@link QueueFullError} and
 * {@link DependencyUnavailableError} (with `retryAfterSeconds`) when trying again later may
 * work, the job API's refusals as their own error classes, {@link DependencyFailedError} for the
 * rest. An abort by the caller's `abortSignal` rejects with that signal's reason.
 */
export function createJobApiClient(options: JobApiClientOptions) {
  const fetchJobApi = options.fetch ?? fetch;

  /** The token; a secret store that fails to answer is a dependency that is unavailable for now. */
  async function token(): Promise<string> {
    try {
      return await options.token();
    } catch (error) {
      if (error instanceof DomainError) throw error;
      throw new DependencyUnavailableError("the job API token could not be read", DEFAULT_RETRY_AFTER_SECONDS, {
        cause: error,
      });
    }
  }

  /**
   * One call to the job API. The timeout covers the wait for the answer's status and headers; the
   * body is then read under an idle deadline instead (see {@link withIdleTimeout}), so a large
   * download is never cut at a fixed time, and a body that breaks off is an error, not a short one.
   */
  async function call(path: string, init: RequestInit, callOptions: JobApiCallOptions = {}): Promise<Response> {
    const target: JobApiTarget | undefined = options.targets
      ? await options.targets.resolve({ ...(callOptions.abortSignal ? { signal: callOptions.abortSignal } : {}) })
      : options.baseUrl
        ? { source: "configured", baseUrl: options.baseUrl }
        : undefined;
    if (!target) throw new DependencyUnavailableError("the job API is not configured (JOBAPI_URL)");
    const fetchTarget = target.fetch ?? fetchJobApi;
    const forgetDeployed = () => {
      if (target.source === "deployed") options.targets?.invalidate();
    };
    const headers = new Headers(init.headers);
    headers.set("X-SVC-API-Token", await token());
    const { abortSignal } = callOptions;
    const controller = new AbortController();
    let timedOut = false;
    const headersTimer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DependencyUnavailableError(`job API unreachable: no answer within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    let response: Response;
    try {
      response = await fetchTarget(`${target.baseUrl}${path}`, {
        ...init,
        headers,
        signal: abortSignal ? AbortSignal.any([abortSignal, controller.signal]) : controller.signal,
      });
    } catch (error) {
      if (abortSignal?.aborted) throw abortSignal.reason;
      forgetDeployed();
      const reason = timedOut
        ? `no answer within ${options.timeoutMs} ms`
        : error instanceof Error
          ? error.message
          : String(error);
      throw new DependencyUnavailableError(`job API unreachable: ${reason}`, DEFAULT_RETRY_AFTER_SECONDS, {
        cause: error,
      });
    } finally {
      clearTimeout(headersTimer);
    }
    if ([502, 503, 504].includes(response.status)) forgetDeployed();
    if (!response.body) return response;
    return new Response(
      withIdleTimeout(response.body, options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS, (reason) =>
        controller.abort(reason),
      ),
      { status: response.status, statusText: response.statusText, headers: response.headers },
    );
  }

  async function json<T>(response: Response): Promise<T> {
    try {
      return (await response.json()) as T;
    } catch (error) {
      if (error instanceof DomainError) throw error;
      throw new DependencyFailedError(`job API answered ${response.status} with a body that is not JSON`, {
        cause: error,
      });
    }
  }

  const jobPath = (jobId: string) => `/v1/jobs/${encodeURIComponent(jobId)}`;

  return {
    /** Submits a job (`POST /v1/jobs`); an idempotency key in `body` makes a retry harmless. */
    async submit(body: Record<string, unknown>, callOptions?: JobApiCallOptions): Promise<JobApiAcceptance> {
      const response = await call(
        "/v1/jobs",
        { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) },
        callOptions,
      );
      if (response.status !== 202 && response.status !== 200) throw await answerError(response);
      const accepted = await json<{ job_id: unknown; status: unknown }>(response);
      return { job_id: String(accepted.job_id), status: String(accepted.status), replayed: response.status === 200 };
    },

    /** The job's status. */
    async getStatus(jobId: string, callOptions?: JobApiCallOptions): Promise<JobApiStatus> {
      const response = await call(`${jobPath(jobId)}/status`, {}, callOptions);
      if (response.status !== 200) throw await answerError(response);
      return json<JobApiStatus>(response);
    },

    /**
     * Cancels a job that is still queued or running; one that already finished keeps its results.
     * Answers the job's status afterwards: `cancelled`, or the one it had reached.
     */
    async cancel(jobId: string, callOptions?: JobApiCallOptions): Promise<string> {
      const response = await call(`${jobPath(jobId)}/cancel`, { method: "POST" }, callOptions);
      if (response.status !== 200) throw await answerError(response);
      const answer = await json<{ status?: unknown }>(response);
      if (typeof answer.status !== "string")
        throw new DependencyFailedError("job API answered a cancel without a status");
      return answer.status;
    },

    /**
     * Starts warming `database` on every node of the cluster (`POST /v1/databases/{name}/warmup`);
     * a ConflictError when the job API runs shards on its own machine (nothing to warm there).
     */
    async startWarmup(database: string, callOptions?: JobApiCallOptions): Promise<ClusterWarmup> {
      const response = await call(
        `/v1/databases/${encodeURIComponent(database)}/warmup`,
        { method: "POST" },
        callOptions,
      );
      if (response.status !== 202) throw await answerError(response);
      return json<ClusterWarmup>(response);
    },

    /** A search node's memory and what a search may cache of it (`GET /v1/cluster`); null when it lists no node. */
    async nodeMemory(callOptions?: JobApiCallOptions): Promise<{ memory_bytes: number; usable_bytes: number } | null> {
      const response = await call("/v1/cluster", {}, callOptions);
      if (response.status !== 200) throw await answerError(response);
      const cluster = await json<{ nodes?: { memory_bytes?: unknown; usable_memory_bytes?: unknown }[] }>(response);
      const node = cluster.nodes?.[0];
      if (typeof node?.memory_bytes !== "number") return null;
      const usable = typeof node.usable_memory_bytes === "number" ? node.usable_memory_bytes : node.memory_bytes;
      return { memory_bytes: node.memory_bytes, usable_bytes: usable };
    },

    /** The warm-up's progress node by node. */
    async getWarmup(database: string, callOptions?: JobApiCallOptions): Promise<ClusterWarmup> {
      const response = await call(`/v1/databases/${encodeURIComponent(database)}/warmup`, {}, callOptions);
      if (response.status !== 200) throw await answerError(response);
      return json<ClusterWarmup>(response);
    },

    /**
     * A page of the job's result (issue 23): `path` below `/results/queries` (`""`, `/{n}/hits`,
     * `/{n}/hits/{k}`), answered as the job API's JSON. Its 400/404 reach the caller as they are.
     */
    async resultPage(
      jobId: string,
      path: string,
      page: { offset?: number; limit?: number } = {},
      callOptions?: JobApiCallOptions,
    ): Promise<unknown> {
      const query = new URLSearchParams();
      if (page.offset !== undefined) query.set("offset", String(page.offset));
      if (page.limit !== undefined) query.set("limit", String(page.limit));
      const q = query.size > 0 ? `?${query}` : "";
      const response = await call(`${jobPath(jobId)}/results/queries${path}${q}`, {}, callOptions);
      if (response.status !== 200) throw await answerError(response);
      return json<unknown>(response);
    },

    /** Opens the job's results (`content` as the job API names it) for streaming through. */
    async openResults(jobId: string, content: string, callOptions?: JobApiCallOptions): Promise<JobApiResults> {
      const response = await call(`${jobPath(jobId)}/results?content=${encodeURIComponent(content)}`, {}, callOptions);
      if (response.status !== 200 || !response.body) throw await answerError(response);
      return {
        body: response.body,
        contentType: response.headers.get("content-type") ?? undefined,
        contentDisposition: response.headers.get("content-disposition") ?? undefined,
      };
    },
  };
}

/** The job-API client's interface (fakes in tests implement it). */
export type JobApiClient = ReturnType<typeof createJobApiClient>;
