/**
 * What a search's downloads are called, wherever they are saved from (the job page's buttons, the
 * dashboard route's Content-Disposition, the results page's FASTA): `<title or job>-<kind>.<ext>`
 * (issue 23, item 9). The title is reduced to letters, digits, '.', '_' and '-' so the name is safe
 * in a header and on every file system; a search without a usable title is named by its job id.
 */

/**
 * Each result content's `<kind>.<ext>`. The ZIPs hold gzip-compressed files as the job API stores
 * them: `merged_results.out.gz` (the merged BLAST XML), or one `<shard>.out.gz` per shard.
 */
export const RESULT_FILE_KINDS = {
  xml: "results.xml",
  tabular: "hits.tsv",
  merged: "merged.zip",
  full: "shards.zip",
} as const;

export type ResultFileKind = keyof typeof RESULT_FILE_KINDS;

const MAX_BASE_CHARS = 80;

/** The file-name stem of a search: its title made safe, else its job id. */
export function resultFileBase(job: { title: string; job_id: string }): string {
  const safe = job.title
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/-{2,}/g, "-")
    .replace(/^[-.]+|[-.]+$/g, "")
    .slice(0, MAX_BASE_CHARS)
    .replace(/[-.]+$/g, "");
  return safe || job.job_id;
}

/** A result download's name: `<title or job>-<kind>.<ext>`. */
export function resultFileName(job: { title: string; job_id: string }, kind: ResultFileKind): string {
  return `${resultFileBase(job)}-${RESULT_FILE_KINDS[kind]}`;
}

/** The FASTA of chosen hits' aligned regions of query `n`: `<title or job>-query<n>-aligned.fasta`. */
export function alignedFastaFileName(fileBase: string, n: number): string {
  return `${fileBase}-query${n}-aligned.fasta`;
}
