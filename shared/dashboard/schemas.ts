import { z } from "zod";
import { FASTA_LIMITS } from "../blast/fasta.js";
import { blastOptionsSchema } from "../blast/options.js";
import { BLAST_PROGRAMS } from "../blast/programs.js";
import { JOB_ID_PATTERN, UUID_PATTERN } from "../jobs/model.js";
import { prioritySchema } from "../jobs/schemas.js";

/**
 * The dashboard's request schemas: one source for the Functions routes' validation, their
 * TypeScript types and the web app's typed client.
 */
/** `POST /api/blast/jobs`: a dashboard submit. */
export const dashboardSubmitSchema = z.strictObject({
  program: z.enum(BLAST_PROGRAMS),
  db: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "database name must be letters, digits, '.', '_' or '-'"),
  query_fasta: z.string().min(1).max(FASTA_LIMITS.maxBytes),
  options: blastOptionsSchema.optional(),
  priority: prioritySchema.optional(),
  idempotency_key: z
    .string()
    .regex(/^[\x21-\x7e]{1,200}$/, "1–200 printable ASCII characters without spaces")
    .optional(),
  execution_profile: z.enum(["standard", "sharded"]).optional(),
  title: z.string().max(200).optional(),
});

/** `GET /api/blast/jobs` query. */
export const dashboardJobListQuerySchema = z.object({
  status: z.enum(["queued", "dispatching", "submitting", "running", "completed", "failed", "cancelled"]).optional(),
  page: z.coerce.number().int().min(1).max(100_000).default(1),
  page_size: z.coerce.number().int().min(1).max(100).default(25),
});

/** `GET /api/blast/jobs/{uuid}/results` query. */
export const dashboardResultsQuerySchema = z.object({
  content: z.enum(["full", "merged", "xml", "tabular"]).default("xml"),
});

/** A dashboard job id must be a UUID; an OpenAPI job id here is 400, as the reverse is on the job API. */
export const dashboardJobPathSchema = z.object({
  uuid: z
    .string()
    .refine(
      (v) => !JOB_ID_PATTERN.test(v),
      "this is an OpenAPI job id; use it on the job API's /v1/jobs/{job_id} routes",
    )
    .pipe(z.string().regex(UUID_PATTERN, "expected a dashboard job UUID"))
    // Stored lower-case: any letter case names the same job (a UUID is case-insensitive).
    .transform((v) => v.toLowerCase()),
});

export type DashboardSubmitRequest = z.infer<typeof dashboardSubmitSchema>;
