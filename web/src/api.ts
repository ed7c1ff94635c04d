/**
 * The typed client of the dashboard API (`/api/...`). Request bodies are the backend's own zod
 * schemas' input types and the domain types come from `shared/`, so a change there breaks this
 * build instead of the running app; the few response shapes that exist only inside a trigger are
 * declared here once.
 */
import type { z } from "zod";
import type { Caller } from "../../shared/auth/roles.js";
import type { DashboardJob } from "../../shared/dashboard/dashboard-jobs.js";
import type { operationView } from "../../shared/orchestrations/operations.js";
import type {
  dashboardJobListQuerySchema,
  dashboardResultsQuerySchema,
  dashboardSubmitSchema,
} from "../../shared/dashboard/schemas.js";
import type { RolloutView } from "../../shared/cluster/job-api-deploy.js";
import type { ClusterStatusView } from "../../shared/cluster/cluster-service.js";
import type { AddingOptions, DatabaseListing, UploadRequest } from "../../shared/databases/database-service.js";
import type { FastaUploadSummary } from "../../shared/databases/fasta-upload.js";
import type { FieldIssue } from "../../shared/errors.js";
import type { QueueDiagnostics } from "../../shared/orchestrations/diagnostics.js";
import type { ApiTokenStatus } from "../../shared/secrets/api-token-settings.js";
import type { HitDetail, HitPage, QueryPage } from "../../shared/jobs/result-page-schemas.js";
import type { StoredWorkspace, Workspace } from "../../shared/workspace/workspace.js";

export type { Caller, FieldIssue, HitDetail, HitPage, QueryPage, QueueDiagnostics, StoredWorkspace, Workspace };

/** `offset` and `limit` of a page of results. */
export interface PageRequest {
  offset: number;
  limit: number;
}

/** `POST /api/blast/jobs` body, exactly as the backend validates it. */
export type SubmitRequest = z.input<typeof dashboardSubmitSchema>;
/** `GET /api/blast/jobs` query. */
export type JobListQuery = Partial<z.input<typeof dashboardJobListQuerySchema>>;
/** `content` of `GET /api/blast/jobs/{uuid}/results`. */
export type ResultContent = z.output<typeof dashboardResultsQuerySchema>["content"];

/** A control-plane operation (spec §2.7). */
export type Operation = ReturnType<typeof operationView>;

/** A dashboard job as the API shows it (the stored job without its internal fields). */
export type JobView = Omit<
  DashboardJob,
  "blast_options" | "cancel_requested" | "request_fingerprint" | "operation_id"
> & {
  job_id_kind: "dashboard";
  options: DashboardJob["blast_options"];
  operation_status_url: string;
};

/** The §2.7 envelope of submit and cancel. */
export type JobEnvelope = JobView & {
  operation: Operation;
  target: { resource_type: string; job_id_kind: string; dashboard_job_id: string; openapi_job_id: string | null };
  admission: { decision: string; reason: string };
  meta: { request_id: string };
};

/** One database of `GET /api/databases`. */
export type DatabaseView = DatabaseListing;

/** `GET /api/databases/adding`: whether Prepare works here, the upload limit and the nodes' memory. */
export type DatabaseAdding = AddingOptions;

/** `POST /api/databases/uploads`: the build operation it started and what the file holds. */
export interface DatabaseUploadStarted {
  operation: Operation;
  upload: FastaUploadSummary;
}

/** `GET /api/settings/api-token` (declared in functions/api-token.ts). */
export type { ApiTokenStatus };

/** `GET /api/jobapi/deployment`: the job API's rollout on the cluster, and a deploy running now. */
export interface JobApiDeploymentView {
  namespace: string;
  rollout: RolloutView;
  running_operation: Operation | null;
}

/** `GET /api/aks/cluster`: the pools a provision asks for, the cluster as it is, its latest operation. */
export type { ClusterStatusView };

/** One resource the managed identity sees (`GET /api/workspace/choices/{kind}`). */
export interface DiscoveredChoice {
  name: string;
  id: string;
  resource_group?: string;
  location?: string;
  detail?: string;
}
export type DiscoveryKind = "subscriptions" | "resource_groups" | "storage_accounts" | "registries" | "clusters";

/** `GET /api/health/queue/result/{task_id}` (declared in functions/diagnostics.ts). */
export interface NoopResult {
  task_id: string;
  status: "PENDING" | "STARTED" | "SUCCESS" | "FAILURE" | "REVOKED";
  result: { message: unknown } | null;
  error?: string;
}

/** One pending approval of `GET /api/approvals` (Approvers and Owners only; Readers get the count). */
export interface PendingApproval {
  approval_id: string;
  proposed_action: string;
  target: string;
  params: Record<string, unknown>;
  action_hash: string;
  requester: { oid: string; name: string };
  reason: string;
  severity: string;
  created_at: string;
  expires_at: string;
  /** The server's answer (the approval authority); `approve_hil` checks it again. */
  may_decide: boolean;
  required_role: string;
  refusal?: "no_self_approval" | "decider_role_below_action_floor";
}

/** The body of `POST /api/approvals/{approval_id}/decision`. */
export interface ApprovalDecisionRequest {
  decision: "approve" | "reject";
  justification: string;
  action_hash: string;
}

/** A recorded decision (`POST /api/approvals/{approval_id}/decision`, declared in functions/console.ts). */
export interface ApprovalDecision {
  outcome: "recorded" | "existing" | "timeout";
  approval_id: string;
  state: string;
  decision: Record<string, unknown> | null;
  execution: Record<string, unknown> | null;
  timed_out_at: string | null;
}

/** `GET /api/approvals` (declared in functions/console.ts). */
export interface ApprovalsQueue {
  role: string;
  count: number;
  details: "count_only" | "full";
  items: PendingApproval[];
}

/** `POST /api/chat`: the coordinator's reply (the same as the stream's `answer` frame). */
export interface ChatReply {
  text: string;
  kind: string;
  evidence_refs: string[];
  audit_ids: string[];
  approval_id?: string;
  request_id: string;
  tool_results: (
    | { status: "ok"; tool: string; data: unknown; evidence_ref: string; observed_at: string }
    | {
        status: "error" | "unavailable";
        tool: string;
        error: { type: string; message: string; details?: Record<string, unknown> };
      }
  )[];
}

/** An error answer of the API, in the spec's envelope (§2.8). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** The envelope's `detail`: a sentence, or per-field issues for 422. */
    readonly detail: string | readonly FieldIssue[],
    readonly requestId: string,
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(typeof detail === "string" ? detail : detail.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "));
    this.name = "ApiError";
  }

  /** The 422 issues, or none. */
  get issues(): readonly FieldIssue[] {
    return typeof this.detail === "string" ? [] : this.detail;
  }
}

interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "DELETE";
  body?: unknown;
  /** A body sent as it is (a file: the browser streams it from disk), instead of JSON. */
  raw?: Blob;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Unauthenticated routes (health, diagnostics) send no token. */
  anonymous?: boolean;
  /** This token instead of the session's current one (a decision sends the fresh token of a re-authentication). */
  bearer?: string;
}

/** A JSON answer and the headers that matter to callers. */
export interface ApiResponse<T> {
  body: T;
  etag: string | undefined;
  requestId: string;
}

/** The dashboard API, typed. Every method rejects with {@link ApiError} on an error answer. */
export type ApiClient = ReturnType<typeof createApiClient>;

/** Creates the client; `accessToken` supplies a bearer token per request. */
export function createApiClient(options: {
  baseUrl: string;
  accessToken: () => Promise<string>;
  /** The job API's terminal WebSocket, from the web app's configuration (empty: none). */
  terminalUrl?: string;
}) {
  async function send(path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers };
    if (!opts.anonymous) headers.Authorization = `Bearer ${opts.bearer ?? (await options.accessToken())}`;
    let body: string | Blob | undefined = opts.raw;
    if (opts.raw !== undefined) headers["Content-Type"] = "text/plain";
    if (opts.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    const res = await fetch(`${options.baseUrl}${path}`, {
      method: opts.method ?? "GET",
      headers,
      body,
      signal: opts.signal,
      cache: "no-store",
    });
    if (!res.ok) throw await toApiError(res);
    return res;
  }

  async function json<T>(path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
    const res = await send(path, opts);
    return {
      body: (await res.json()) as T,
      etag: res.headers.get("ETag") ?? undefined,
      requestId: res.headers.get("X-Request-Id") ?? "",
    };
  }

  const data = async <T>(path: string, opts: RequestOptions = {}): Promise<T> => (await json<T>(path, opts)).body;
  /** Opens an event stream (`text/event-stream`); an error answer before the stream rejects with {@link ApiError}. */
  const eventStream = async (path: string, opts: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> => {
    const res = await send(path, { ...opts, headers: { ...opts.headers, Accept: "text/event-stream" } });
    if (!res.body) throw new ApiError(502, "the stream had no body", res.headers.get("X-Request-Id") ?? "", undefined);
    return res.body;
  };
  const job = (uuid: string) => `/api/blast/jobs/${encodeURIComponent(uuid)}`;

  return {
    terminalUrl: options.terminalUrl ?? "",
    me: (signal?: AbortSignal) => data<{ caller: Caller }>("/api/me", { signal }),
    queueDiagnostics: (signal?: AbortSignal) =>
      data<QueueDiagnostics>("/api/health/queue", { anonymous: true, signal }),
    readiness: async (signal?: AbortSignal): Promise<{ ready: boolean; detail: string }> => {
      try {
        await data<unknown>("/api/health/ready", { anonymous: true, signal });
        return { ready: true, detail: "ready" };
      } catch (error) {
        if (error instanceof ApiError && error.status === 503) return { ready: false, detail: String(error.detail) };
        throw error;
      }
    },
    enqueueNoop: (message: string) =>
      data<QueueDiagnostics & { task_id: string; status: string }>(
        `/api/health/queue/enqueue-noop?message=${encodeURIComponent(message)}`,
        {
          method: "POST",
          anonymous: true,
        },
      ),
    noopResult: (taskId: string, signal?: AbortSignal) =>
      data<NoopResult>(`/api/health/queue/result/${encodeURIComponent(taskId)}`, { anonymous: true, signal }),

    getWorkspace: (signal?: AbortSignal) => json<StoredWorkspace>("/api/workspace", { signal }),
    putWorkspace: (workspace: Workspace, etag: string | undefined) =>
      json<StoredWorkspace>("/api/workspace", {
        method: "PUT",
        body: workspace,
        headers: etag ? { "If-Match": etag } : {},
      }),

    listDatabases: (signal?: AbortSignal) => data<{ databases: DatabaseView[] }>("/api/databases", { signal }),
    databaseAdding: (signal?: AbortSignal) => data<DatabaseAdding>("/api/databases/adding", { signal }),
    /** Uploads a FASTA file (streamed from disk by the browser) and starts its build. */
    uploadDatabase: (file: Blob, request: UploadRequest) =>
      data<DatabaseUploadStarted>(
        `/api/databases/uploads?${new URLSearchParams({
          name: request.name,
          type: request.type,
          partitions: String(request.partitions),
        })}`,
        { method: "POST", raw: file },
      ),
    prepareDatabase: (name: string) =>
      data<{ operation: Operation }>(`/api/databases/${encodeURIComponent(name)}/prepare`, { method: "POST" }),
    warmDatabase: (name: string) =>
      data<{ operation: Operation }>(`/api/databases/${encodeURIComponent(name)}/warmup`, { method: "POST" }),
    operation: (operationId: string, signal?: AbortSignal) =>
      data<Operation>(`/api/operations/${encodeURIComponent(operationId)}`, { signal }),

    listJobs: (query: JobListQuery, signal?: AbortSignal) => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
      return data<{ jobs: JobView[]; page: number; page_size: number; total: number }>(`/api/blast/jobs?${params}`, {
        signal,
      });
    },
    getJob: (uuid: string, signal?: AbortSignal) => data<JobView>(job(uuid), { signal }),
    submitJob: (request: SubmitRequest) => data<JobEnvelope>("/api/blast/jobs", { method: "POST", body: request }),
    cancelJob: (uuid: string) => data<JobEnvelope>(job(uuid), { method: "DELETE" }),
    /** The result stream (bytes pass through the backend; no storage URL reaches the browser). */
    results: (uuid: string, content: ResultContent, signal?: AbortSignal) =>
      send(`${job(uuid)}/results?content=${content}`, { signal, headers: { Accept: "*/*" } }),
    /**
     * A single-use link (60 s) that downloads one result without the bearer header: the browser
     * streams it to disk itself. Absolute, on the API's base URL.
     */
    resultsLink: async (uuid: string, content: ResultContent): Promise<string> => {
      const issued = await data<{ download_url: string }>(`${job(uuid)}/results/ticket?content=${content}`, {
        method: "POST",
      });
      return `${options.baseUrl}${issued.download_url}`;
    },
    /** Per-query summaries of a completed result, a page at a time (read from its index, not the XML). */
    resultQueries: (uuid: string, page: PageRequest, signal?: AbortSignal) =>
      data<QueryPage>(`${job(uuid)}/results/queries?offset=${page.offset}&limit=${page.limit}`, { signal }),
    /** Query `n`'s hits (1-based), a page at a time. */
    resultHits: (uuid: string, n: number, page: PageRequest, signal?: AbortSignal) =>
      data<HitPage>(`${job(uuid)}/results/queries/${n}/hits?offset=${page.offset}&limit=${page.limit}`, { signal }),
    /** Hit `k` of query `n` with its HSPs and alignment lines. */
    resultHit: (uuid: string, n: number, k: number, signal?: AbortSignal) =>
      data<HitDetail>(`${job(uuid)}/results/queries/${n}/hits/${k}`, { signal }),

    /** A single-use terminal ticket (30 s), bound to this page's origin (decision 0020). */
    terminalTicket: () =>
      data<{ ticket: string; expires_at: string; expires_in_seconds: number }>("/api/terminal/tickets", {
        method: "POST",
        body: {},
      }),
    /** One console turn as one JSON reply (`POST /api/chat`): how the page decides approvals and asks for break-glass. */
    chat: (text: string) => data<ChatReply>("/api/chat", { method: "POST", body: { text } }),
    /**
     * Decides one approval (`POST /api/approvals/{id}/decision`) with `accessToken`, the fresh
     * token of a re-authentication: the server refuses a sign-in older than its window (401).
     */
    decideApproval: (approvalId: string, decision: ApprovalDecisionRequest, accessToken: string) =>
      data<ApprovalDecision>(`/api/approvals/${encodeURIComponent(approvalId)}/decision`, {
        method: "POST",
        body: decision,
        bearer: accessToken,
      }),
    /** The pending approvals as the caller may see them (`GET /api/approvals`). */
    approvals: (signal?: AbortSignal) => data<ApprovalsQueue>("/api/approvals", { signal }),
    /** One console turn as server-sent events (`POST /api/chat/stream`); aborting `signal` closes it. */
    chatStream: (text: string, signal: AbortSignal) =>
      eventStream("/api/chat/stream", { method: "POST", body: { text }, signal }),
    /** The verified core-stage frames (`GET /api/live/stream`), resuming after `lastEventId`. */
    liveStream: (lastEventId: string | undefined, signal: AbortSignal) =>
      eventStream("/api/live/stream", { signal, headers: lastEventId ? { "Last-Event-ID": lastEventId } : {} }),
    workspaceChoices: (kind: DiscoveryKind, query: Record<string, string>, signal?: AbortSignal) =>
      data<{ items: DiscoveredChoice[]; truncated: boolean }>(
        `/api/workspace/choices/${kind}${Object.keys(query).length > 0 ? `?${new URLSearchParams(query)}` : ""}`,
        { signal },
      ),
    clusterStatus: (signal?: AbortSignal) => data<ClusterStatusView>("/api/aks/cluster", { signal }),
    provisionCluster: () => data<{ operation: Operation }>("/api/aks/provision", { method: "POST", body: {} }),
    clusterAction: (action: "stop" | "start") =>
      data<{ operation: Operation }>(`/api/aks/cluster/${action}`, { method: "POST", body: {} }),
    latestImageBuild: (signal?: AbortSignal) => data<{ operation: Operation | null }>("/api/images/build", { signal }),
    buildImages: () => data<{ operation: Operation }>("/api/images/build", { method: "POST", body: {} }),
    jobApiDeployment: (signal?: AbortSignal) => data<JobApiDeploymentView>("/api/jobapi/deployment", { signal }),
    deployJobApi: (request: { image_digest: string; force: boolean }) =>
      data<{ operation: Operation }>("/api/jobapi/deploy", { method: "POST", body: request }),

    apiTokenStatus: (signal?: AbortSignal) => data<ApiTokenStatus>("/api/settings/api-token", { signal }),
    revealApiToken: () => data<{ api_token: string }>("/api/settings/api-token/reveal", { method: "POST" }),
    regenerateApiToken: () =>
      data<{ api_token: string; created_at: string; previous_valid_until: string | null }>(
        "/api/settings/api-token/regenerate",
        {
          method: "POST",
        },
      ),
  };
}

async function toApiError(res: Response): Promise<ApiError> {
  const requestId = res.headers.get("X-Request-Id") ?? "";
  const retry = Number(res.headers.get("Retry-After"));
  const retryAfterSeconds = Number.isFinite(retry) && retry > 0 ? retry : undefined;
  let detail: string | FieldIssue[] = `HTTP ${res.status}`;
  let bodyRequestId = requestId;
  try {
    const body = (await res.json()) as { detail?: unknown; request_id?: unknown };
    if (typeof body.detail === "string" || Array.isArray(body.detail)) detail = body.detail as string | FieldIssue[];
    if (typeof body.request_id === "string") bodyRequestId = body.request_id;
  } catch {
    // Not the envelope (a proxy's page): keep the status line.
  }
  return new ApiError(res.status, detail, bodyRequestId, retryAfterSeconds);
}
