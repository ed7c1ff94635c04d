import { describeCloudAuthorizationError } from "../../auth/cloud-authorization.js";

/** The six axes of the control plane's readiness, each observed by its own probe. */
export const READINESS_AXES = ["cluster", "nodes", "job_api", "databases", "identity", "storage"] as const;
export type ReadinessAxis = (typeof READINESS_AXES)[number];

/** The axes without which the control plane cannot run a search at all. */
const CORE_AXES: readonly ReadinessAxis[] = ["cluster", "job_api", "storage"];

/** What one probe observed: ready or not (with a one-line detail), or a coverage gap with its reason. */
export type AxisObservation = { status: "ready" | "not_ready"; detail: string } | { status: "gap"; reason: string };

/** One probe per axis; an axis without a probe is a coverage gap (nothing observes it here). */
export type ReadinessProbes = Partial<Record<ReadinessAxis, () => Promise<AxisObservation>>>;

export const DETECTION_READINESS_SCHEMA_VERSION = 1;

export interface DetectionReadiness {
  verdict: "ready" | "degraded" | "not_ready";
  /** The highest action mode the operations core may use given this readiness. */
  authority_ceiling: "enforce" | "shadow" | "observe_only";
  axes: { axis: ReadinessAxis; covered: boolean; ready: boolean | null; detail: string }[];
  coverage_gaps: { axis: ReadinessAxis; reason: string }[];
}

/**
 * A probe's failure as one safe line: an authorization refusal names its code and the role to
 * assign (not Azure's message, which carries resource ids); anything else is only "did not answer".
 */
export function failureDetail(error: unknown): string {
  const refusal = describeCloudAuthorizationError(error);
  return refusal ? `refused (${refusal.code}): the managed identity needs the ${refusal.role} role` : "did not answer";
}

async function observeAxis(
  probe: (() => Promise<AxisObservation>) | undefined,
  timeoutMs: number,
): Promise<AxisObservation> {
  if (!probe) return { status: "gap", reason: "no provider observes this axis in this deployment" };
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      probe(),
      new Promise<AxisObservation>((resolve) => {
        timer = setTimeout(
          () => resolve({ status: "not_ready", detail: `no answer within ${timeoutMs} ms` }),
          timeoutMs,
        );
      }),
    ]);
  } catch (error) {
    return { status: "not_ready", detail: failureDetail(error) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Evaluates readiness on the six axes at once. `ready` (ceiling `enforce`) only when all six are
 * covered and ready; `not_ready` (ceiling `observe_only`) when a core axis (cluster, job API,
 * storage) is not ready or not covered, or any covered axis is not ready; `degraded` (ceiling
 * `shadow`) otherwise: everything observed is ready but some axis is a coverage gap.
 */
export async function evaluateReadiness(
  probes: ReadinessProbes,
  options: { timeoutMs?: number } = {},
): Promise<DetectionReadiness> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const observations = await Promise.all(READINESS_AXES.map((axis) => observeAxis(probes[axis], timeoutMs)));
  const axes = READINESS_AXES.map((axis, i) => {
    const o = observations[i] as AxisObservation;
    return o.status === "gap"
      ? { axis, covered: false, ready: null, detail: o.reason }
      : { axis, covered: true, ready: o.status === "ready", detail: o.detail };
  });
  const coverage_gaps = axes.filter((a) => !a.covered).map((a) => ({ axis: a.axis, reason: a.detail }));
  const anyNotReady = axes.some((a) => a.covered && a.ready === false);
  const coreMissing = axes.some((a) => CORE_AXES.includes(a.axis) && !a.covered);
  const verdict = anyNotReady || coreMissing ? "not_ready" : coverage_gaps.length > 0 ? "degraded" : "ready";
  const authority_ceiling = verdict === "ready" ? "enforce" : verdict === "degraded" ? "shadow" : "observe_only";
  return { verdict, authority_ceiling, axes, coverage_gaps };
}
