import { InvalidRequestError } from "../../shared/errors.js";
import { JOB_ID_PATTERN, type JobRecord, shardCounters, UUID_PATTERN } from "../../shared/jobs/model.js";

/** Parses a path `job_id`: a dashboard UUID or any other shape is 400, never a lookup. */
export function parseJobId(raw: string | undefined): string {
  if (!raw) throw new InvalidRequestError("missing path parameter job_id");
  if (UUID_PATTERN.test(raw)) {
    throw new InvalidRequestError(
      "job_id is an OpenAPI job id; a dashboard job UUID belongs on /api/blast/jobs/{uuid}",
    );
  }
  if (!JOB_ID_PATTERN.test(raw))
    throw new InvalidRequestError("malformed job_id: expected 12 lowercase letters or digits");
  return raw;
}

/** Where a job's status is polled. */
export function statusUrl(jobId: string): string {
  return `/v1/jobs/${jobId}/status`;
}

/** The submit acceptance body (spec §2.3). */
export function acceptanceView(job: JobRecord, queuePosition: number | null) {
  return {
    job_id: job.job_id,
    status: job.status,
    queue_position: queuePosition,
    submission_source: job.submission_source,
    created_at: job.created_at,
    blast_version: job.blast_version,
    db_name: job.db_name,
    db_version: job.db_version,
    message: `Job accepted. Poll GET ${statusUrl(job.job_id)} until the status is completed, failed or cancelled.`,
    status_url: statusUrl(job.job_id),
  };
}

/** The job status body (spec §2.4). */
export function statusView(job: JobRecord, queuePosition: number | null) {
  return {
    job_id: job.job_id,
    status: job.status,
    phase: job.status,
    queue_position: queuePosition,
    created_at: job.created_at,
    updated_at: job.updated_at,
    last_progress_at: job.last_progress_at,
    program: job.program,
    db: job.db_location,
    db_name: job.db_name,
    db_version: job.db_version,
    blast_version: job.blast_version,
    resource_profile: job.resource_profile,
    execution_profile: job.execution_profile,
    priority: job.priority,
    error: job.error,
    kubernetes: { summary: shardCounters(job.shards) },
    // The merged result's size once it is published, so a client can show it before downloading.
    result_bytes: job.status === "completed" ? { xml: job.merged_xml_bytes, gzip: job.merged_bytes } : null,
    // After BLAST, before completed: how much of the merged result is stored (issue 23).
    storing: job.status === "running" && job.storing ? job.storing : null,
  };
}

/** A submit's HTTP status: 202 for a new job, 200 (marked replayed) for an idempotency key's existing one. */
export function acceptedStatus(replayed: boolean): { status: number; headers: Record<string, string> } {
  return replayed ? { status: 200, headers: { "Idempotent-Replayed": "true" } } : { status: 202, headers: {} };
}
