import { formatBytes } from "../format.js";

/**
 * What the job page says once a search has ended, as a sentence (issue 23, item 8): "The search
 * was cancelled.", never "The search has cancelled.".
 */
export function finishedSentence(status: string): string {
  switch (status) {
    case "completed":
      return "The search has completed.";
    case "failed":
      return "The search failed.";
    case "cancelled":
      return "The search was cancelled.";
    default:
      return `The search ended (${status}).`;
  }
}

/** The storing phase's progress as the job page says it (issue 23): after BLAST, before completed. */
export function storingSentence(storing: {
  xml_bytes: number;
  xml_bytes_total: number | null;
  total_is_estimate: boolean;
}): string {
  const written = formatBytes(storing.xml_bytes);
  const head = "BLAST has finished. Merging and storing the results:";
  if (storing.xml_bytes_total === null) return `${head} ${written} so far.`;
  const total = formatBytes(storing.xml_bytes_total);
  return storing.total_is_estimate
    ? `${head} ${written} so far (at most ${total}).`
    : `${head} ${written} of ${total}.`;
}
