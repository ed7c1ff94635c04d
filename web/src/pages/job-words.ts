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

/** Each job status as the pages write it: one capitalized word (issue 23, item 8). */
const STATUS_LABELS: Record<string, string> = {
  queued: "Queued",
  dispatching: "Dispatching",
  submitting: "Submitting",
  running: "Running",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
};

/** A status word with a capital first letter, as the status badges show it. */
export function statusLabel(status: string): string {
  return STATUS_LABELS[status] ?? (status ? `${status[0]?.toUpperCase()}${status.slice(1)}` : status);
}

/**
 * The Jobs page's status filter: the two hand-over states a researcher never asked about say what
 * they are (issue 23, item 9), in the order a search goes through them.
 */
export const STATUS_FILTER: readonly { status: string; label: string }[] = [
  { status: "submitting", label: "Submitting (being handed to the job API)" },
  { status: "queued", label: "Queued" },
  { status: "dispatching", label: "Dispatching (its shards are being started)" },
  { status: "running", label: "Running" },
  { status: "completed", label: "Completed" },
  { status: "failed", label: "Failed" },
  { status: "cancelled", label: "Cancelled" },
];

/** The job page's timeline steps and the statuses each covers. */
export const TIMELINE_STEPS = [
  { key: "accepted", label: "Accepted", statuses: ["submitting"] },
  { key: "queued", label: "Queued", statuses: ["queued"] },
  { key: "running", label: "Running", statuses: ["dispatching", "running"] },
  { key: "finished", label: "Finished", statuses: ["completed", "failed", "cancelled"] },
] as const;

/**
 * When the job reached each timeline step, from the times the dashboard kept per status (so a
 * reloaded page shows them all): the earliest of the step's statuses; "accepted" is the submit.
 */
export function stepTimes(job: {
  created_at: string;
  status_times?: Record<string, string>;
}): Partial<Record<(typeof TIMELINE_STEPS)[number]["key"], string>> {
  const times: Partial<Record<(typeof TIMELINE_STEPS)[number]["key"], string>> = { accepted: job.created_at };
  for (const step of TIMELINE_STEPS.slice(1)) {
    const seen = step.statuses
      .map((s) => job.status_times?.[s])
      .filter((t): t is string => t !== undefined)
      .sort();
    if (seen[0]) times[step.key] = seen[0];
  }
  return times;
}
