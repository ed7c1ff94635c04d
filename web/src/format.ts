/** Formatting for display: sizes, counts, times. */

const UNITS = ["B", "KB", "MB", "GB", "TB"];

/** A byte count as people read it: `1.5 MB` (decimal units, as storage is sold). */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(value >= 100 ? 0 : 1)} ${UNITS[unit]}`;
}

/** A count with thousands separators. */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/** An ISO timestamp in the reader's locale, or a dash when absent. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

/** How long ago, roughly: "12 s ago", "3 min ago". */
export function formatAgo(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "—";
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  return formatTime(iso);
}
