import type { Readable } from "node:stream";

/** What a submit to the job API came to. */
export type JobApiSubmitOutcome =
  | { kind: "accepted"; job_id: string; status: string; replayed: boolean }
  | { kind: "retry"; after_seconds: number; reason: string }
  | { kind: "rejected"; status: number; detail: string };

export interface JobApiStatus {
  job_id: string;
  status: string;
  error: string;
  queue_position: number | null;
  kubernetes: { summary: { total: number; succeeded: number; failed: number; active: number } };
  [key: string]: unknown;
}

const RETRYABLE = new Set([429, 502, 503, 504]);

function detailOf(body: unknown): string {
  if (body && typeof body === "object" && "detail" in body) {
    const d = (body as { detail: unknown }).detail;
    return typeof d === "string" ? d : JSON.stringify(d);
  }
  return "";
}

/**
 * The dashboard's client of the job API. It sends the configured token (never the user's bearer
 * token) and classifies answers so the submit orchestration can retry 429/502/503/504 with durable
 * timers instead of failing.
 */
export function createJobApiClient(options: { baseUrl: string | undefined; token: () => Promise<string>; timeoutMs: number; fetchImpl?: typeof fetch }) {
  const doFetch = options.fetchImpl ?? fetch;
  async function call(path: string, init: RequestInit = {}, signal?: AbortSignal): Promise<Response> {
    if (!options.baseUrl) throw new Error("JOBAPI_URL is not configured");
    const headers = new Headers(init.headers);
    headers.set("X-SVC-API-Token", await options.token());
    const timeout = AbortSignal.timeout(options.timeoutMs);
    return doFetch(`${options.baseUrl}${path}`, { ...init, headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  }

  return {
    async submit(body: Record<string, unknown>): Promise<JobApiSubmitOutcome> {
      let res: Response;
      try {
        res = await call("/v1/jobs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      } catch (error) {
        return { kind: "retry", after_seconds: 5, reason: `job API unreachable: ${error instanceof Error ? error.message : String(error)}` };
      }
      const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
      if (res.status === 202 || res.status === 200) {
        return { kind: "accepted", job_id: String(json.job_id), status: String(json.status), replayed: res.status === 200 };
      }
      if (RETRYABLE.has(res.status)) {
        const after = Number(res.headers.get("retry-after"));
        return { kind: "retry", after_seconds: Number.isFinite(after) && after > 0 ? after : 5, reason: `job API answered ${res.status}: ${detailOf(json)}` };
      }
      return { kind: "rejected", status: res.status, detail: detailOf(json) || `job API answered ${res.status}` };
    },

    async status(jobId: string): Promise<JobApiStatus | { unavailable: string }> {
      try {
        const res = await call(`/v1/jobs/${encodeURIComponent(jobId)}/status`);
        if (res.status === 200) return (await res.json()) as JobApiStatus;
        return { unavailable: `job API answered ${res.status}` };
      } catch (error) {
        return { unavailable: error instanceof Error ? error.message : String(error) };
      }
    },

    /**
     * Cancels a job that is still queued or running; one that already finished keeps its results.
     * Answers the job's status afterwards (`cancelled`, or the one it had reached), or undefined
     * when the job API could not tell (it no longer has the job, or did not answer).
     */
    async cancel(jobId: string): Promise<string | undefined> {
      try {
        const res = await call(`/v1/jobs/${encodeURIComponent(jobId)}/cancel`, { method: "POST" });
        const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
        return res.status === 200 && typeof json.status === "string" ? json.status : undefined;
      } catch {
        return undefined;
      }
    },

    /** The job API's results response, streamed through (never a storage URL). */
    async results(jobId: string, content: string, signal?: AbortSignal): Promise<Response> {
      return call(`/v1/jobs/${encodeURIComponent(jobId)}/results?content=${encodeURIComponent(content)}`, {}, signal);
    },
  };
}

export type JobApiClient = ReturnType<typeof createJobApiClient>;
export type { Readable };
