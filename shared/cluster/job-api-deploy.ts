import type { KubeConfig, KubernetesObject, V1Pod } from "@kubernetes/client-node";
import { ConflictError, DependencyUnavailableError } from "../errors.js";
import type { KubeManifest } from "./job-api-manifests.js";

/** The field manager every apply of blastplane's objects uses (spec'd in issue 28: `blastplane`). */
export const FIELD_MANAGER = "blastplane";

/** One field another field manager owns, which an apply would have changed. */
export interface FieldConflict {
  /** The object, `Kind/name`. */
  object: string;
  /** The manager owning the field (`kubectl-edit`, `kubectl`, `helm`…). */
  manager: string;
  /** The field path, `.spec.replicas`. */
  field: string;
}

/**
 * An apply refused because fields it sets are owned by another field manager (someone changed the
 * object by hand, or another tool manages it). Applying again with `force` takes those fields over.
 */
export class ApplyConflictError extends ConflictError {
  constructor(readonly conflicts: readonly FieldConflict[]) {
    super(
      `the apply conflicts with changes made by another field manager: ${conflicts
        .map((c) => `${c.object} ${c.field} (owned by "${c.manager}")`)
        .join(", ")}; deploy again with force to take these fields over`,
    );
  }
}

/** One object the apply wrote. */
export interface AppliedObject {
  kind: string;
  name: string;
  namespace?: string;
  /** The object's generation after the apply (a Deployment's rollout waits for it to be observed). */
  generation?: number;
}

/** What the pods of a rollout are doing, as a person reads it. */
export interface PodReport {
  name: string;
  phase: string;
  ready: boolean;
  /** `ImagePullBackOff`, `CrashLoopBackOff`, `Unschedulable`, `CreateContainerConfigError`, …; absent while fine. */
  reason?: string;
  message?: string;
  restarts: number;
}

/** A Deployment's rollout, read once. */
export interface RolloutView {
  /** `complete`: the new template's pods are all available and no old one is left. */
  state: "complete" | "progressing" | "missing";
  generation: number;
  observed_generation: number;
  replicas: number;
  updated_replicas: number;
  available_replicas: number;
  pods: PodReport[];
}

type ApiModule = typeof import("@kubernetes/client-node");

/** `@kubernetes/client-node`, loaded on first use (it is large; most requests never need it). */
let clientModule: Promise<ApiModule> | undefined;
const kubeClient = () => {
  clientModule ??= import("@kubernetes/client-node");
  return clientModule;
};

/** A Kubernetes `Status` body from an ApiException (the client keeps it as text or parsed). */
function statusBody(
  error: unknown,
): { code?: number; details?: { causes?: { field?: string; message?: string; reason?: string }[] } } | undefined {
  const body = (error as { body?: unknown }).body;
  if (typeof body === "string") {
    try {
      return JSON.parse(body) as ReturnType<typeof statusBody>;
    } catch {
      return undefined;
    }
  }
  return typeof body === "object" && body !== null ? (body as ReturnType<typeof statusBody>) : undefined;
}

/**
 * Server-side applies `objects` in order as field manager `blastplane` (the Namespace first, so the
 * rest have somewhere to go). A 409 from fields another manager owns becomes an
 * {@link ApplyConflictError} listing each field, for every object of the set (so one answer names
 * them all), unless `force`. `dryRun` asks the API server to check everything and store nothing.
 */
export async function applyManifests(
  kc: KubeConfig,
  objects: readonly KubeManifest[],
  options: { force: boolean; dryRun?: boolean },
): Promise<AppliedObject[]> {
  const { KubernetesObjectApi, PatchStrategy, ApiException } = await kubeClient();
  const api = KubernetesObjectApi.makeApiClient(kc);
  const applied: AppliedObject[] = [];
  const conflicts: FieldConflict[] = [];
  for (const object of objects) {
    try {
      const result = await api.patch(
        object as KubernetesObject,
        undefined,
        options.dryRun ? "All" : undefined,
        FIELD_MANAGER,
        options.force,
        PatchStrategy.ServerSideApply,
      );
      applied.push({
        kind: object.kind,
        name: object.metadata.name,
        ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}),
        ...(result.metadata?.generation === undefined ? {} : { generation: result.metadata.generation }),
      });
    } catch (error) {
      if (!(error instanceof ApiException))
        throw new DependencyUnavailableError(
          `the cluster's API server could not be reached: ${error instanceof Error ? error.message : String(error)}`,
          undefined,
          { cause: error },
        );
      if (error.code !== 409) throw error;
      const causes = statusBody(error)?.details?.causes ?? [];
      for (const cause of causes.filter((c) => c.reason === "FieldManagerConflict")) {
        conflicts.push({
          object: `${object.kind}/${object.metadata.name}`,
          manager: /conflict with "([^"]+)"/.exec(cause.message ?? "")?.[1] ?? "unknown",
          field: cause.field ?? "",
        });
      }
      if (causes.length === 0) throw error;
      // A dry run checks the rest too; a real apply stops at the first refusal (nothing after it is half-done).
      if (!options.dryRun) break;
    }
  }
  if (conflicts.length > 0) throw new ApplyConflictError(conflicts);
  return applied;
}

/** The first reason a pod is not running and ready, as `kubectl get pods` would show it. */
export function podReport(pod: V1Pod): PodReport {
  const status = pod.status ?? {};
  const container = status.containerStatuses?.[0];
  const scheduled = status.conditions?.find((c) => c.type === "PodScheduled");
  const waiting = container?.state?.waiting;
  const terminated = container?.state?.terminated ?? container?.lastState?.terminated;
  let reason: string | undefined;
  let message: string | undefined;
  if (scheduled?.status === "False") {
    reason = scheduled.reason ?? "Unschedulable";
    message = scheduled.message;
  } else if (waiting?.reason) {
    reason = waiting.reason;
    // CrashLoopBackOff's own message says only "back-off"; the last exit says why.
    message =
      waiting.reason === "CrashLoopBackOff" && terminated
        ? `last exit code ${terminated.exitCode}${terminated.reason ? ` (${terminated.reason})` : ""}${terminated.message ? `: ${terminated.message.trim().split("\n").slice(-3).join(" | ")}` : ""}`
        : waiting.message;
  } else if (container?.state?.terminated) {
    reason = container.state.terminated.reason ?? "Terminated";
    message = `exit code ${container.state.terminated.exitCode}`;
  }
  return {
    name: pod.metadata?.name ?? "",
    phase: status.phase ?? "Pending",
    ready: container?.ready === true,
    ...(reason ? { reason } : {}),
    ...(message ? { message: message.slice(0, 500) } : {}),
    restarts: container?.restartCount ?? 0,
  };
}

/** Reads a Deployment's rollout and its pods (by the Deployment's selector). */
export async function readRollout(kc: KubeConfig, namespace: string, name: string): Promise<RolloutView> {
  const { AppsV1Api, CoreV1Api, ApiException } = await kubeClient();
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  let deployment: Awaited<ReturnType<typeof apps.readNamespacedDeployment>>;
  try {
    deployment = await apps.readNamespacedDeployment({ name, namespace });
  } catch (error) {
    if (error instanceof ApiException && error.code === 404)
      return {
        state: "missing",
        generation: 0,
        observed_generation: 0,
        replicas: 0,
        updated_replicas: 0,
        available_replicas: 0,
        pods: [],
      };
    throw error;
  }
  const labels = deployment.spec?.selector.matchLabels ?? {};
  const labelSelector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  const pods = await core.listNamespacedPod({ namespace, labelSelector });
  const desired = deployment.spec?.replicas ?? 1;
  const s = deployment.status ?? {};
  const generation = deployment.metadata?.generation ?? 0;
  const observed = s.observedGeneration ?? 0;
  const updated = s.updatedReplicas ?? 0;
  const available = s.availableReplicas ?? 0;
  // As `kubectl rollout status`: the new generation observed, every replica updated and available, no old one left.
  const complete = observed >= generation && updated >= desired && available >= desired && (s.replicas ?? 0) <= updated;
  return {
    state: complete ? "complete" : "progressing",
    generation,
    observed_generation: observed,
    replicas: desired,
    updated_replicas: updated,
    available_replicas: available,
    pods: pods.items.filter((p) => !p.metadata?.deletionTimestamp).map(podReport),
  };
}

/** One line naming why the rollout did not finish: each pod's reason, or what the Deployment reports. */
export function rolloutFailure(view: RolloutView, waitedSeconds: number): string {
  if (view.state === "missing") return "the job API Deployment is gone from the cluster";
  const troubled = view.pods.filter((p) => p.reason);
  const why =
    troubled.length > 0
      ? troubled.map((p) => `${p.name}: ${p.reason}${p.message ? ` (${p.message})` : ""}`).join("; ")
      : view.pods.length === 0
        ? "no pod was created"
        : `${view.available_replicas} of ${view.replicas} replicas available`;
  return `the job API did not become ready within ${waitedSeconds} s: ${why}`;
}
