import { Orchestrations } from "../orchestrations/queue-labels.js";

/**
 * The steps of adding a database from an upload, as its operation reports them (issue 23): the
 * upload checked (by the upload route, while it streamed), makeblastdb, the partitions (skipped for
 * an unpartitioned database) and the release published. Each step has its state and the time it
 * reached it, like a cluster operation's steps.
 */

export const ADD_STEPS = ["upload_checked", "makeblastdb", "partitions", "published"] as const;
export type AddStepName = (typeof ADD_STEPS)[number];

export interface AddStep {
  name: AddStepName;
  state: "pending" | "running" | "succeeded" | "failed" | "skipped";
  /** When the step reached its state (ISO 8601). */
  at?: string;
  /** Why the step failed. */
  error?: string;
}

/** The steps of a build that has not started: the upload checked at `checkedAt`, the rest to come. */
export function initialAddSteps(partitioned: boolean, checkedAt: string): AddStep[] {
  return ADD_STEPS.map((name) =>
    name === "upload_checked"
      ? { name, state: "succeeded", at: checkedAt }
      : name === "partitions" && !partitioned
        ? { name, state: "skipped" }
        : { name, state: "pending" },
  );
}

function isStep(value: unknown): value is AddStep {
  const step = value as Partial<AddStep> | null;
  return typeof step?.name === "string" && (ADD_STEPS as readonly string[]).includes(step.name) && !!step.state;
}

/** Steps read back from storage (JSON); anything malformed reads as none. */
export function parseAddSteps(text: unknown): AddStep[] | undefined {
  if (typeof text !== "string" || text === "") return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) && parsed.every(isStep) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Moves a build through its steps, saving them after every change (`save` errors are the caller's
 * to log: a step report lost must not fail the build).
 */
export function addStepTracker(steps: AddStep[], save: (steps: AddStep[]) => Promise<void>, now: () => Date) {
  const set = async (name: AddStepName, state: AddStep["state"], error?: string) => {
    const step = steps.find((s) => s.name === name);
    if (!step || step.state === "skipped") return;
    step.state = state;
    step.at = now().toISOString();
    if (error !== undefined) step.error = error;
    await save(steps);
  };
  return {
    steps,
    start: (name: AddStepName) => set(name, "running"),
    succeed: (name: AddStepName) => set(name, "succeeded"),
    /** Marks the step running now (else the first pending one) failed with `error`. */
    async fail(error: string) {
      const step = steps.find((s) => s.state === "running") ?? steps.find((s) => s.state === "pending");
      if (step) await set(step.name, "failed", error);
    },
  };
}

/**
 * A database build's steps while it runs, from its name's claim (the add activity records them
 * there); undefined for any other operation or once the claim is another upload's.
 */
export async function addProgressFromClaim(
  claims: { get(name: string): Promise<{ operation_id: string; steps?: AddStep[] } | undefined> },
  instance: { name: string; instanceId: string; input: unknown },
): Promise<{ steps: AddStep[] } | undefined> {
  if (instance.name !== Orchestrations.addDatabase) return undefined;
  const name = (instance.input as { name?: unknown } | null)?.name;
  if (typeof name !== "string") return undefined;
  const claim = await claims.get(name);
  return claim?.operation_id === instance.instanceId && claim.steps ? { steps: claim.steps } : undefined;
}
