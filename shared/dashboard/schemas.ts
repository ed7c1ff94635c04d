import { z } from "zod";
import { FASTA_LIMITS } from "../blast/fasta.js";
import { blastOptionsSchema } from "../blast/options.js";
import { BLAST_PROGRAMS } from "../blast/programs.js";
import { JOB_ID_PATTERN, UUID_PATTERN } from "../jobs/model.js";
import { PRIORITY_NAMES } from "../jobs/model.js";
import { prioritySchema } from "../jobs/schemas.js";

const PRIORITY_SENTENCE = "Priority must be low, normal, high or urgent, or a whole number from 0 to 100.";

/**
 * The dashboard's request schemas: one source for the Functions routes' validation, their
 * TypeScript types and the web app's typed client.
 */
/** `POST /api/blast/jobs`: a dashboard submit. */
export const dashboardSubmitSchema = z.strictObject({
  program: z.enum(BLAST_PROGRAMS, { error: `Choose one of the programs ${BLAST_PROGRAMS.join(", ")}.` }),
  db: z
    .string({ error: "Choose a database." })
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "database name must be letters, digits, '.', '_' or '-'"),
  query_fasta: z
    .string({ error: "The query must be FASTA text." })
    .min(1, "Paste a query sequence or upload a FASTA file: the query is empty.")
    .max(
      FASTA_LIMITS.maxBytes,
      `The query is larger than ${FASTA_LIMITS.maxBytes / 1024 / 1024} MiB; split it into several searches.`,
    ),
  options: blastOptionsSchema.optional(),
  // The shared priority rule (prioritySchema), worded for a person in each of its branches.
  priority: z
    .union(
      [
        z
          .number({ error: PRIORITY_SENTENCE })
          .int({ error: PRIORITY_SENTENCE })
          .min(0, { error: PRIORITY_SENTENCE })
          .max(100, { error: PRIORITY_SENTENCE }),
        z.enum(Object.keys(PRIORITY_NAMES) as [keyof typeof PRIORITY_NAMES], { error: PRIORITY_SENTENCE }),
      ],
      { error: PRIORITY_SENTENCE },
    )
    .describe(prioritySchema.description ?? "")
    .optional(),
  idempotency_key: z
    .string()
    .regex(/^[\x21-\x7e]{1,200}$/, "1–200 printable ASCII characters without spaces")
    .optional(),
  execution_profile: z
    .enum(["standard", "sharded"], { error: "The execution profile must be standard or sharded." })
    .optional(),
  title: z
    .string({ error: "The title must be text." })
    .max(200, "The title can be at most 200 characters long.")
    .optional(),
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
