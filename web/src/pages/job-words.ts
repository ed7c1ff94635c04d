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
