import { formatBytes, formatTime } from "../format.js";

/** One node of a cluster warm-up as its operation reports it (`progress.nodes`). */
interface WarmupNode {
  node: string;
  state: string;
  bytes_done: number;
  bytes_total: number;
  error?: string;
}

function isWarmupNode(value: unknown): value is WarmupNode {
  const n = value as Partial<WarmupNode> | null;
  return (
    typeof n?.node === "string" &&
    typeof n.state === "string" &&
    typeof n.bytes_done === "number" &&
    typeof n.bytes_total === "number"
  );
}

/**
 * A warm-up's per-node progress as the Databases page lists it (issue 23, item 8): one line per
 * node of the cluster, "aks-blast-0: running, 1.2 GB of 3.4 GB"; none for a local warm-up (this
 * machine reads the release itself and reports no nodes).
 */
export function warmupNodeLines(progress: Record<string, unknown> | undefined): string[] {
  const nodes = Array.isArray(progress?.nodes) ? progress.nodes.filter(isWarmupNode) : [];
  return nodes.map((n) => {
    const error = n.error ? ` — ${n.error.split("\n").pop()}` : "";
    return `${n.node}: ${n.state}, ${formatBytes(n.bytes_done)} of ${formatBytes(n.bytes_total)}${error}`;
  });
}

/** What each step of adding a database is called on the page. */
const ADD_STEP_LABEL: Record<string, string> = {
  upload_checked: "Upload checked",
  makeblastdb: "makeblastdb",
  partitions: "Partitions",
  published: "Published",
};

interface AddStepView {
  name: string;
  state: string;
  at?: string;
  error?: string;
}

function isAddStep(value: unknown): value is AddStepView {
  const s = value as Partial<AddStepView> | null;
  return typeof s?.name === "string" && typeof s.state === "string" && s.name in ADD_STEP_LABEL;
}

/**
 * A database build's steps as the Databases page lists them (issue 23): "makeblastdb: running
 * (since 12:03:04)", "Partitions: skipped (not partitioned)", from the operation's `progress.steps`.
 */
export function addStepLines(progress: Record<string, unknown> | undefined): string[] {
  const steps = Array.isArray(progress?.steps) ? progress.steps.filter(isAddStep) : [];
  return steps.map((s) => {
    const label = ADD_STEP_LABEL[s.name] ?? s.name;
    if (s.state === "skipped") return `${label}: skipped (not partitioned)`;
    const when = s.at ? ` (${s.state === "running" ? "since " : ""}${formatTime(s.at)})` : "";
    const error = s.error ? ` — ${s.error}` : "";
    return `${label}: ${s.state}${when}${error}`;
  });
}
