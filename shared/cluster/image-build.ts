import { createHash } from "node:crypto";
import type { Caller } from "../auth/roles.js";
import { ConflictError, DependencyUnavailableError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import { describeOperation, OPERATION_TYPES, type OperationView, operationView } from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { StoredWorkspace, WorkspaceStore } from "../workspace/workspace.js";
import { isFolder, packBuildContext } from "./build-context.js";
import type { RegistryBuilds, RegistryRef, RunView } from "./registry-builds.js";

/** The image the build makes (the job API and the shard worker share it) and its Dockerfile in the context. */
export const JOB_API_IMAGE = { repository: "blastplane-jobapi", dockerfile: "jobapi/Dockerfile" } as const;

/** The build orchestration's input. */
export interface BuildImagesInput {
  registry: RegistryRef;
  login_server: string;
  repository: string;
  dockerfile: string;
  /** The run's timeout in the registry; the orchestration gives up a minute after it. */
  timeout_seconds: number;
  poll_seconds: number;
}

/** What the upload activity returns. */
export interface UploadedContext {
  source_location: string;
  context_digest: string;
  files: number;
  bytes: number;
}

/** A run as one poll saw it, with its log's tail. */
export type RunPoll = RunView & { log_tail: string };

/** The build activities, as factories over the registry client and the build context's folder. */
export function createImageBuildActivities(deps: {
  registry: () => RegistryBuilds;
  contextDir: () => string | undefined;
}) {
  return {
    /** Packs the build context and uploads it through the registry's upload URL. */
    async upload(input: BuildImagesInput): Promise<UploadedContext> {
      const dir = deps.contextDir();
      if (!dir || !(await isFolder(dir)))
        throw new DependencyUnavailableError("no build context: IMAGE_BUILD_CONTEXT_DIR names no folder");
      const context = await packBuildContext(dir);
      const { source_location } = await deps.registry().uploadContext(input.registry, context.bytes);
      return { source_location, context_digest: context.digest, files: context.files, bytes: context.bytes.length };
    },
    /**
     * Schedules the registry's Docker build run of the uploaded context under the build's run name
     * ({@link buildRunName}): run again after the host died between the registry accepting the run
     * and the orchestration recording it, it finds that run and answers it instead of a second.
     */
    async schedule(
      input: BuildImagesInput & { source_location: string; run_name: string },
    ): Promise<{ run_id: string }> {
      const { run_id } = await deps.registry().scheduleNamedRun(input.registry, input.run_name, {
        source_location: input.source_location,
        dockerfile: input.dockerfile,
        // ACR fills in the run id: each build has its own tag, and the deploy pins the digest anyway.
        image_names: [`${input.repository}:{{.Run.ID}}`],
        timeout_seconds: input.timeout_seconds,
      });
      return { run_id };
    },
    /** The run's state and its log's tail (the operation's progress). */
    async read(input: { registry: RegistryRef; run_id: string }): Promise<RunPoll> {
      const run = await deps.registry().getRun(input.registry, input.run_id);
      const log_tail = await deps
        .registry()
        .logTail(input.registry, input.run_id)
        .catch(() => "");
      return { ...run, log_tail };
    },
  };
}

/**
 * The name of one build's registry run (an ACR taskRun name: at most 50 letters, digits and `-`),
 * derived from the build's operation, when that execution of it started and the build context's
 * digest: the same on every replay and re-run of the schedule activity, another for another build.
 */
export function buildRunName(operationId: string, startedAt: string, contextDigest: string): string {
  return `bp-${createHash("sha256").update(`${operationId}\n${startedAt}\n${contextDigest}`).digest("hex").slice(0, 40)}`;
}

/** The lines of a log tail worth putting in an error message. */
export function lastLines(text: string, lines = 5): string {
  return text.split("\n").filter(Boolean).slice(-lines).join(" | ");
}

/**
 * The operation id of a registry's builds, derived from the registry (as a cluster's operations
 * are from the cluster): the durable host refuses a second build in one registry while one runs.
 */
export function imageBuildOperationId(registry: RegistryRef): string {
  const id = `/subscriptions/${registry.subscription_id}/resourceGroups/${registry.resource_group}/providers/Microsoft.ContainerRegistry/registries/${registry.name}#build`;
  return `op-${createHash("sha256").update(id.toLowerCase()).digest("hex").slice(0, 32)}`;
}

const POLL_AFTER_SECONDS = 10;

/**
 * `POST /api/images/build` (spec §1 items 1 and 3; ledger B-004, B-012): starts the build
 * orchestration for the saved workspace's registry and answers at once with the operation; a build
 * already running in that registry is answered instead. Audited as `images.build`.
 */
export function createImageBuildService(deps: {
  orchestrations: OrchestrationClient;
  workspace: Pick<WorkspaceStore, "get">;
  audit: Pick<AuditLog, "record">;
  logger: Logger;
  settings: {
    contextDir: string | undefined;
    loginServer: string | undefined;
    pollSeconds: number;
    timeoutSeconds: number;
  };
}) {
  const describe = (id: string) => describeOperation(deps.orchestrations, id, { pollAfterSeconds: POLL_AFTER_SECONDS });
  const active = (view: OperationView | undefined) => view && (view.state === "queued" || view.state === "running");
  const registryOf = ({ workspace }: StoredWorkspace): RegistryRef => ({
    subscription_id: workspace.subscription_id,
    resource_group: workspace.resource_group,
    name: workspace.registry,
  });
  return {
    /** The saved workspace's registry's latest build (running or finished: its progress has the digest), or null. */
    async latest(): Promise<OperationView | null> {
      const saved = await deps.workspace.get();
      if (!saved) return null;
      return (await describe(imageBuildOperationId(registryOf(saved)))) ?? null;
    },
    async build(caller: Caller, options: { requestId: string }): Promise<OperationView> {
      if (!deps.settings.contextDir)
        throw new DependencyUnavailableError("image builds are not configured (IMAGE_BUILD_CONTEXT_DIR)");
      const saved = await deps.workspace.get();
      if (!saved) throw new ConflictError("save the workspace configuration before building images");
      const { workspace } = saved;
      const registry = registryOf(saved);
      const operationId = imageBuildOperationId(registry);
      const current = await describe(operationId);
      if (active(current) && current) return current;
      const input: BuildImagesInput = {
        registry,
        login_server: deps.settings.loginServer ?? `${workspace.registry.toLowerCase()}.azurecr.io`,
        repository: JOB_API_IMAGE.repository,
        dockerfile: JOB_API_IMAGE.dockerfile,
        timeout_seconds: deps.settings.timeoutSeconds,
        poll_seconds: deps.settings.pollSeconds,
      };
      try {
        await deps.orchestrations.startNew(Orchestrations.buildImages, { instanceId: operationId, input });
      } catch (error) {
        // Another request started this registry's build since the look above: answer that one.
        const other = await describe(operationId);
        if (active(other) && other) return other;
        throw error;
      }
      await deps.audit.record({
        actor: { oid: caller.oid, name: caller.name },
        action: "images.build",
        target: `registry/${registry.name}/${input.repository}`,
        outcome: "succeeded",
        request_id: options.requestId,
        details: { operation_id: operationId },
      });
      deps.logger.info("image build started", { operation_id: operationId, registry: registry.name });
      const now = new Date().toISOString();
      return operationView({
        operationId,
        operationType: OPERATION_TYPES[Orchestrations.buildImages] ?? "images.build",
        state: "queued",
        createdAt: now,
        updatedAt: now,
        pollAfterSeconds: POLL_AFTER_SECONDS,
        target: { resource_type: "container_registry", name: registry.name, repository: input.repository },
      });
    },
  };
}

export type ImageBuildService = ReturnType<typeof createImageBuildService>;
