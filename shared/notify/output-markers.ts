/**
 * The output markers of spec operator-console.md §2.4 rule 5, shared by the outbound channels and
 * the inbound conversation replies: both are shown when both apply.
 */

/** The evidence producer supplied partial output. */
export const UPSTREAM_TRUNCATED = "[UPSTREAM OUTPUT TRUNCATED]";
/** An adapter clipped the output to its vendor's limits. */
export const CHANNEL_TRUNCATED = "[CHANNEL OUTPUT TRUNCATED]";
