import { z } from "zod";

/*
 * The paged results of a completed job (issue 23 item 2): per-query summaries, one query's hits,
 * one hit's HSPs with their alignment lines. The job API serves them from the result index and
 * range reads of the merged result; the dashboard answers the same shapes.
 */

/** Most queries or hits in one page. */
export const MAX_RESULT_PAGE_SIZE = 500;

/** `offset` and `limit` of a page (query string). */
export const resultPageQuerySchema = z.object({
  offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  limit: z.coerce.number().int().min(1).max(MAX_RESULT_PAGE_SIZE).default(100),
});

/** `{n}` (a query's 1-based position) and `{k}` (a hit's 1-based rank) in a path. */
export const positionSchema = z.coerce.number().int().min(1).max(100_000_000);

export const querySummarySchema = z.object({
  n: z.number().int().describe("1-based position of the query in the result"),
  query_id: z.string(),
  query_def: z.string().describe("the query's definition line"),
  query_len: z.number().int(),
  hits: z.number().int().describe("hits of this query"),
  best_evalue: z.number().nullable().describe("e-value of the best hit's first HSP; null without hits"),
  best_bit_score: z.number().nullable(),
});

const pageFields = {
  total: z.number().int().describe("items in all pages"),
  offset: z.number().int(),
  limit: z.number().int(),
  next_offset: z.number().int().optional().describe("the next page's offset, while more remain"),
};

export const queryPageSchema = z.object({
  job_id: z.string(),
  program: z.string(),
  database: z.string(),
  xml_bytes: z.number().int().describe("size of the whole BLAST XML (what a download sends)"),
  stored_bytes: z.number().int().nullable().describe("size of the stored gzip result"),
  ...pageFields,
  queries: z.array(querySummarySchema),
});

export const hitSummarySchema = z.object({
  num: z.number().int().describe("1-based rank of the hit within its query"),
  id: z.string(),
  accession: z.string(),
  title: z.string().describe("the subject's definition line"),
  len: z.number().int().describe("subject length"),
  hsps: z.number().int(),
  evalue: z.number().describe("best e-value of the hit's HSPs"),
  bit_score: z.number().describe("best bit score"),
  total_bit_score: z.number().describe("bit scores of all HSPs added"),
  query_cover: z.number().describe("percent of the query covered by the hit's HSPs"),
  identity: z.number().describe("percent identity of the first HSP"),
  hsp_spans: z
    .array(
      z.object({
        query_from: z.number().int(),
        query_to: z.number().int(),
        bit_score: z.number(),
      }),
    )
    .describe("each HSP's span on the query and its bit score, in report order (what a graphic overview draws)"),
});

export const hitPageSchema = z.object({
  job_id: z.string(),
  program: z.string(),
  query: querySummarySchema,
  ...pageFields,
  hits: z.array(hitSummarySchema),
});

export const hspSchema = z.object({
  num: z.number().int(),
  bit_score: z.number(),
  score: z.number(),
  evalue: z.number(),
  query_from: z.number().int(),
  query_to: z.number().int(),
  hit_from: z.number().int(),
  hit_to: z.number().int(),
  query_frame: z.number().int().nullable().describe("reading frame of a translated query (blastx, tblastx)"),
  hit_frame: z.number().int().nullable().describe("reading frame of a translated subject (tblastn, tblastx)"),
  query_strand: z.enum(["plus", "minus"]).nullable().describe("strand of a nucleotide query"),
  hit_strand: z.enum(["plus", "minus"]).nullable().describe("strand of a nucleotide subject"),
  identity: z.number().int(),
  positive: z.number().int(),
  gaps: z.number().int(),
  align_len: z.number().int(),
  qseq: z.string(),
  hseq: z.string(),
  midline: z.string(),
});

export const hitDetailSchema = z.object({
  job_id: z.string(),
  program: z.string(),
  query: querySummarySchema,
  hit: hitSummarySchema,
  hsp_list: z.array(hspSchema),
});

export type QuerySummary = z.infer<typeof querySummarySchema>;
export type QueryPage = z.infer<typeof queryPageSchema>;
export type HitSummary = z.infer<typeof hitSummarySchema>;
export type HitPage = z.infer<typeof hitPageSchema>;
export type Hsp = z.infer<typeof hspSchema>;
export type HitDetail = z.infer<typeof hitDetailSchema>;
