import { z } from "zod";
import { DATABASE_NAME } from "../blast/database-name.js";
import { FASTA_LIMITS } from "../blast/fasta.js";
import { blastOptionsSchema } from "../blast/options.js";
import { BLAST_PROGRAMS } from "../blast/programs.js";
import { JOB_STATUSES, PRIORITY_NAMES } from "./model.js";

/** Priority: an integer 0–100 or one of low, normal, high, urgent (default normal). */
export const prioritySchema = z
  .union([z.number().int().min(0).max(100), z.enum(Object.keys(PRIORITY_NAMES) as [keyof typeof PRIORITY_NAMES])])
  .describe("0–100, or low (25), normal (50), high (75), urgent (100)");

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;

const common = {
  program: z.enum(BLAST_PROGRAMS),
  db: z
    .string()
    .regex(DATABASE_NAME, "database name must be letters, digits, '.', '_' or '-'")
    .describe("database name (GET /v1/databases)"),
  query_fasta: z
    .string()
    .min(1)
    .max(FASTA_LIMITS.maxBytes, `query_fasta is limited to ${FASTA_LIMITS.maxBytes} characters`)
    .describe("FASTA text as one JSON string, lines separated by newline characters"),
  priority: prioritySchema.optional(),
  idempotency_key: z.string().regex(IDEMPOTENCY_KEY, "1–200 printable ASCII characters without spaces").optional(),
  resource_profile: z
    .string()
    .max(200)
    .optional()
    .describe("free-form metadata echoed on the job status; selects nothing"),
  execution_profile: z
    .enum(["standard", "sharded"])
    .optional()
    .describe("standard (default): the whole database; sharded: its prepared partitions, merged exactly"),
};

/** `POST /v1/jobs` (spec §2.2). */
export const submitRequestSchema = z.strictObject({
  ...common,
  blast_options: blastOptionsSchema.optional(),
});
export type SubmitRequest = z.output<typeof submitRequestSchema>;

/** `POST /api/v1/facade/submit` (spec §2.5). */
export const facadeSubmitSchema = z.strictObject({
  ...common,
  options: blastOptionsSchema.optional(),
  external_correlation_id: z.string().max(200).optional(),
});
export type FacadeSubmitRequest = z.output<typeof facadeSubmitSchema>;

const timestamp = z.string().describe("ISO 8601 timestamp with offset");

export const acceptanceSchema = z.object({
  job_id: z.string(),
  status: z.string(),
  queue_position: z.number().int().nullable(),
  submission_source: z.string(),
  created_at: timestamp,
  blast_version: z.string(),
  db_name: z.string(),
  db_version: z.string().describe("YYYY-MM-DD-HH-MM-SS"),
  message: z.string(),
  status_url: z.string(),
});

const counters = z.object({
  total: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  active: z.number().int(),
});

/** The storing phase of a running job (additive, issue 23): merged XML bytes stored so far, of how many. */
export const storingProgressSchema = z.object({
  xml_bytes: z.number().int().describe("bytes of the merged BLAST XML stored so far"),
  xml_bytes_total: z
    .number()
    .int()
    .nullable()
    .describe("the merged XML's size when known in advance (see total_is_estimate); null when unknown"),
  total_is_estimate: z
    .boolean()
    .describe("true when xml_bytes_total is an upper bound (a merge of several shards), false when it is exact"),
  started_at: z.string().describe("when storing started (ISO 8601)"),
});

export const statusSchema = z.object({
  job_id: z.string(),
  status: z.string(),
  phase: z.string(),
  queue_position: z.number().int().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  last_progress_at: timestamp,
  program: z.string(),
  db: z.string().describe("credential-free storage location of the database release"),
  db_name: z.string(),
  db_version: z.string(),
  blast_version: z.string(),
  resource_profile: z.string(),
  execution_profile: z.string(),
  priority: z.number().int(),
  error: z.string(),
  kubernetes: z.object({ summary: counters }),
  result_bytes: z
    .object({ xml: z.number().int(), gzip: z.number().int() })
    .nullable()
    .describe("the merged result's size once the job completed: BLAST XML bytes, and stored gzip bytes; null before"),
  storing: storingProgressSchema
    .nullable()
    .describe(
      "while the job is running and BLAST has finished: how much of the merged BLAST XML is stored so far; null otherwise",
    ),
});

export const facadeSubmitResponseSchema = z.object({
  job_id: z.string(),
  status: z.string(),
  created_at: timestamp,
  db_name: z.string(),
  db_version: z.string(),
  submission_source: z.string(),
  external_correlation_id: z.string().nullable(),
  queue_position: z.number().int().nullable(),
});

export const facadeFileSchema = z.object({
  file_id: z.string(),
  filename: z.string(),
  format: z.string(),
  size_bytes: z.number().int(),
});

export const facadeStatusSchema = z.object({
  job_id: z.string(),
  status: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
  completed_at: timestamp.nullable(),
  blast_version: z.string(),
  db_name: z.string(),
  db_version: z.string(),
  elapsed_seconds: z.number().int(),
  queue_wait_seconds: z.number().int(),
  run_seconds: z.number().int(),
  external_correlation_id: z.string().nullable(),
  execution: z.object({
    shard_count: z.number().int(),
    shards_succeeded: z.number().int(),
    shards_active: z.number().int(),
    shards_failed: z.number().int(),
  }),
  error: z.string(),
  result: z.object({ files: z.array(facadeFileSchema) }),
});

export const databaseSchema = z.object({
  name: z.string(),
  type: z.enum(["nucl", "prot"]),
  version: z.string(),
  letters: z.number().int(),
  sequences: z.number().int(),
  bytes: z.number().int(),
  bytes_to_cache: z.number().int(),
  volumes: z.number().int(),
  partitions: z.number().int(),
  location: z.string(),
});

export const resultsQuerySchema = z.object({
  content: z.enum(["full", "merged", "xml", "tabular"]).default("full"),
});

/** Longest a status request may wait for a change (seconds). */
export const MAX_STATUS_WAIT_SECONDS = 60;

/**
 * `wait`: with `If-None-Match`, hold the status request up to this many seconds until the status
 * differs from the client's copy (else 304). Additive to the spec's routes.
 */
export const statusQuerySchema = z.object({
  wait: z.coerce.number().int().min(0).max(MAX_STATUS_WAIT_SECONDS).default(0),
});

/** `GET /v1/jobs`: the list's query. `cursor` is a previous page's `next_cursor` (opaque). */
export const jobListQuerySchema = z.object({
  status: z.enum(JOB_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
  cursor: z
    .string()
    .max(500)
    .optional()
    .describe("a previous page's next_cursor: the page after it (opaque; reuse the same status filter)"),
});

/** `GET /v1/jobs`: one page, newest first; `next_cursor`/`next_link` while more jobs remain. */
export const jobListSchema = z.object({
  jobs: z.array(statusSchema),
  next_cursor: z.string().optional().describe("present while more jobs remain: pass it back as cursor"),
  next_link: z
    .string()
    .optional()
    .describe("present while more jobs remain: GET this path (it carries next_cursor) for the next page"),
});

/** `GET /v1/config`. */
export const jobApiConfigSchema = z.object({
  version: z.string(),
  blast_version: z.string(),
  executor: z.string(),
  programs: z.array(z.string()),
  execution_profiles: z.array(z.string()),
  limits: z.object({
    max_active_jobs: z.number().int(),
    max_queued_jobs: z.number().int(),
    request_body_bytes: z.number().int(),
    shard_concurrency: z.number().int(),
    threads_per_shard: z.union([z.number().int(), z.literal("auto")]).describe("auto: sized to the node at run time"),
  }),
});

/** `GET /v1/cluster`. */
export const clusterSchema = z.object({
  executor: z.string(),
  status: z.string(),
  nodes: z.array(
    z.object({
      name: z.string(),
      cpus: z.number().int(),
      memory_bytes: z.number().int(),
      usable_memory_bytes: z
        .number()
        .int()
        .describe("memory a search may cache on the node: its memory less the job API's margin (memory pre-flight)"),
    }),
  ),
  active_jobs: z.number().int(),
  max_active_jobs: z.number().int(),
  dispatch: z.enum(["active", "standby"]).describe("whether this replica runs jobs or stands by"),
});

/** `POST /v1/jobs/{job_id}/cancel`. */
export const cancelResultSchema = z.object({
  job_id: z.string(),
  status: z.enum(JOB_STATUSES).describe("cancelled, or the status the job had already reached"),
});

/** `DELETE /v1/jobs/{job_id}`. */
export const cancelOrDeleteResultSchema = cancelResultSchema.extend({
  deleted: z
    .boolean()
    .describe("true: a finished job and its artifacts were deleted; false: an active job was cancelled"),
});

/** `POST/GET /v1/databases/{name}/warmup`: a warm-up of one release across the BLAST pool. */
export const warmupSchema = z.object({
  database: z.string(),
  release: z.string(),
  state: z.enum(["running", "succeeded", "failed"]),
  nodes: z.array(
    z.object({
      node: z.string(),
      state: z.enum(["pending", "running", "succeeded", "failed"]),
      bytes_done: z.number().int(),
      bytes_total: z.number().int(),
      files_done: z.number().int(),
      files_total: z.number().int(),
      error: z.string().optional().describe("why the node failed (the pod's last log lines)"),
    }),
  ),
});

/** `GET /v1/health`. */
export const jobApiHealthSchema = z.object({ status: z.literal("ok"), version: z.string() });

/** `GET /v1/ready` (200), and the checks of its 503. */
export const jobApiReadySchema = z.object({
  status: z.literal("ready"),
  checks: z.record(z.string(), z.enum(["ok", "unavailable"])),
});
export const jobApiNotReadySchema = z.object({
  detail: z.string(),
  request_id: z.string(),
  checks: z.record(z.string(), z.enum(["ok", "unavailable"])),
});

/** `GET /v1/databases`. */
export const databaseListSchema = z.object({ databases: z.array(databaseSchema) });
