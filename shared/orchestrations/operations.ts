import { type FieldIssue, NotFoundError } from "../errors.js";
import type { OrchestrationClient, OrchestrationInstance } from "./orchestration-client.js";
import { Orchestrations } from "./queue-labels.js";

/** Operation types the dashboard reports, by the orchestration that carries them out. */
export const OPERATION_TYPES: Readonly<Record<string, string>> = Object.freeze({
  [Orchestrations.submitBlastJob]: "blast.submit",
  [Orchestrations.prepareDatabase]: "database.prepare",
  [Orchestrations.addDatabase]: "database.add",
  [Orchestrations.warmDatabase]: "database.warmup",
  [Orchestrations.checkDatabaseUpdates]: "database.update_check",
  [Orchestrations.provisionCluster]: "cluster.provision",
  [Orchestrations.deployJobApi]: "jobapi.deploy",
  [Orchestrations.buildImages]: "images.build",
  [Orchestrations.readInvestigation]: "console.read_investigation",
});

export type OperationState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** Operation ids are the orchestration instance ids: `op-` and 32 hex digits. */
export const OPERATION_ID = /^op-[0-9a-f]{32}$/;

export function newOperationId(): string {
  return `op-${crypto.randomUUID().replaceAll("-", "")}`;
}

/**
 * The operation state from the orchestration's runtime status and, for a completed one, its
 * outcome (an orchestration may finish normally while reporting a failed or cancelled result).
 */
export function operationState(runtimeStatus: string, output: unknown): OperationState {
  switch (runtimeStatus) {
    case "Pending":
      return "queued";
    case "Running":
    case "Suspended":
    case "ContinuedAsNew":
      return "running";
    case "Failed":
      return "failed";
    case "Terminated":
      return "cancelled";
    case "Completed": {
      const outcome = (output as { outcome?: string } | null)?.outcome;
      return outcome === "failed" ? "failed" : outcome === "cancelled" ? "cancelled" : "succeeded";
    }
    default:
      return "queued";
  }
}

/** The view of one operation the dashboard reports (`GET /api/operations/{operation_id}`). */
export type OperationView = ReturnType<typeof operationView>;

/** Builds the operation view from its parts; a terminal operation asks for no further polls. */
export function operationView(input: {
  operationId: string;
  operationType: string;
  state: OperationState;
  createdAt: string;
  updatedAt: string;
  pollAfterSeconds: number;
  target?: Record<string, unknown>;
  targetLink?: string;
  error?: string;
  /** The field issues of a refusal (`loc`, `msg`, `type`, as in a 422), beside its `detail`. */
  errorIssues?: readonly FieldIssue[];
  /** Progress the operation reports (a warm-up: each node's bytes). */
  progress?: Record<string, unknown>;
}) {
  const terminal = input.state === "succeeded" || input.state === "failed" || input.state === "cancelled";
  return {
    operation_id: input.operationId,
    operation_type: input.operationType,
    state: input.state,
    created_at: input.createdAt,
    updated_at: input.updatedAt,
    poll_after_seconds: terminal ? 0 : input.pollAfterSeconds,
    links: { self: `/api/operations/${input.operationId}`, ...(input.targetLink ? { target: input.targetLink } : {}) },
    ...(input.target ? { target: input.target } : {}),
    ...(input.progress ? { progress: input.progress } : {}),
    ...(input.state === "failed"
      ? {
          error: {
            detail: input.error || "the operation failed",
            ...(input.errorIssues?.length ? { issues: input.errorIssues } : {}),
          },
        }
      : {}),
  };
}

/** What a step-by-step operation reports: its output once done, its custom status while it runs. */
function progressSource(customStatus: unknown, output: unknown): Record<string, unknown> | undefined {
  if (output !== null && typeof output === "object") return output as Record<string, unknown>;
  if (customStatus !== null && typeof customStatus === "object") return customStatus as Record<string, unknown>;
  return undefined;
}

/**
 * An image build's progress: the step (`upload`, `schedule`, `run`, `done`), the registry run and
 * its state, the tail of its log, and at the end the image pinned by digest.
 */
function buildProgress(customStatus: unknown, output: unknown): Record<string, unknown> | undefined {
  const source = progressSource(customStatus, output);
  if (!source || typeof source.step !== "string") return undefined;
  const keys = ["step", "run_id", "run_status", "context_digest", "image", "image_digest", "log_tail"];
  return Object.fromEntries(keys.filter((k) => source[k] !== undefined).map((k) => [k, source[k]]));
}

/**
 * A step-by-step operation's progress (the job API deploy): the step reached and what it reports
 * (the rollout's replicas and each pod's reason), from its custom status while it runs and from its
 * output once it is done.
 */
function stepProgress(customStatus: unknown, output: unknown): Record<string, unknown> | undefined {
  const source = progressSource(customStatus, output);
  if (!source || typeof source.step !== "string") return undefined;
  return {
    step: source.step,
    ...(source.image_digest ? { image_digest: source.image_digest } : {}),
    ...(source.rollout ? { rollout: source.rollout } : {}),
  };
}

/** Options of {@link describeOperation}. */
export interface DescribeOperationOptions {
  /** What a running operation tells its caller to wait before polling again. */
  pollAfterSeconds: number;
  /**
   * Progress an operation's activity records outside the task hub while it runs (a database
   * build's steps, kept with its name's claim); asked only for an unfinished operation that
   * reports none itself.
   */
  liveProgress?: (instance: OrchestrationInstance) => Promise<Record<string, unknown> | undefined>;
}

/**
 * The operation view of an orchestration instance, or undefined when there is none (or it is an
 * orchestration the dashboard does not report, such as the no-op diagnostic).
 */
export async function describeOperation(
  orchestrations: OrchestrationClient,
  operationId: string,
  options: DescribeOperationOptions,
): Promise<OperationView | undefined> {
  const instance = await orchestrations.getInstance(operationId);
  if (!instance) return undefined;
  const baseType = OPERATION_TYPES[instance.name];
  if (!baseType) return undefined;
  const input = instance.input as {
    dashboard_job_id?: string;
    name?: string;
    action?: string;
    target?: { cluster_name?: string };
  } | null;
  // A cluster operation is one orchestration for every action: the type names the action.
  const cluster = instance.name === Orchestrations.provisionCluster;
  const operationType = cluster && input?.action ? `cluster.${input.action}` : baseType;
  const output = instance.output as {
    error?: string;
    issues?: FieldIssue[];
    nodes?: unknown;
    steps?: unknown;
    cluster?: unknown;
  } | null;
  // A warm-up reports its nodes while it runs (custom status) and when it ends (its output).
  const nodes = (instance.customStatus as { nodes?: unknown } | null | undefined)?.nodes ?? output?.nodes;
  // A cluster operation reports its steps (and the role-assignment commands) while it runs and when it ends.
  const steps = (instance.customStatus as { steps?: unknown } | null | undefined)?.steps ?? output?.steps;
  const state = operationState(instance.runtimeStatus, instance.output);
  const reported =
    operationType === OPERATION_TYPES[Orchestrations.warmDatabase] && Array.isArray(nodes)
      ? { nodes }
      : (cluster || instance.name === Orchestrations.addDatabase) && Array.isArray(steps)
        ? { steps, ...(output?.cluster ? { cluster: output.cluster } : {}) }
        : operationType === OPERATION_TYPES[Orchestrations.deployJobApi]
          ? stepProgress(instance.customStatus, instance.output)
          : instance.name === Orchestrations.buildImages
            ? buildProgress(instance.customStatus, instance.output)
            : undefined;
  // Live progress only decorates the answer: a store that cannot be read leaves it out, never fails the poll.
  const progress =
    reported ??
    (state === "queued" || state === "running"
      ? await options.liveProgress?.(instance).catch(() => undefined)
      : undefined);
  const build =
    instance.name === Orchestrations.buildImages
      ? (instance.input as { registry?: { name?: string }; repository?: string } | null)
      : null;
  const target = build
    ? {
        target: {
          resource_type: "container_registry",
          name: build.registry?.name ?? "",
          repository: build.repository ?? "",
        },
        targetLink: "/api/workspace",
      }
    : cluster
      ? {
          target: { resource_type: "aks_cluster", name: input?.target?.cluster_name ?? "" },
          targetLink: "/api/workspace",
        }
      : input?.dashboard_job_id
        ? {
            target: { resource_type: "blast_job", dashboard_job_id: input.dashboard_job_id },
            targetLink: `/api/blast/jobs/${input.dashboard_job_id}`,
          }
        : input?.name
          ? { target: { resource_type: "blast_database", name: input.name }, targetLink: "/api/databases" }
          : {};
  return operationView({
    operationId,
    operationType,
    state,
    createdAt: instance.createdAt.toISOString(),
    updatedAt: instance.lastUpdatedAt.toISOString(),
    pollAfterSeconds: options.pollAfterSeconds,
    ...target,
    progress,
    error: typeof instance.output === "string" ? instance.output : (output?.error ?? ""),
    errorIssues: typeof instance.output === "object" && Array.isArray(output?.issues) ? output.issues : undefined,
  });
}

/** Like {@link describeOperation}, for a caller that asked for this operation: none is a NotFoundError. */
export async function getOperation(
  orchestrations: OrchestrationClient,
  operationId: string,
  options: DescribeOperationOptions,
): Promise<OperationView> {
  const operation = await describeOperation(orchestrations, operationId, options);
  if (!operation) throw new NotFoundError(`no operation with id '${operationId}'`);
  return operation;
}
