import { createHash, randomUUID } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { tarEntries } from "../../../shared/cluster/build-context.js";
import { resourceJson, type StoredResource } from "../resource-store.js";
import { ArmError, type ArmProvider, type ArmRequest, type LocalArm } from "../server.js";
import { readRoutes, seedResource } from "./simple-routes.js";

const NAMESPACE = "Microsoft.ContainerRegistry";
const RUN = "Microsoft.ContainerRegistry/registries/runs";
const TASK_RUN = "Microsoft.ContainerRegistry/registries/taskRuns";
const REGISTRY_PATH =
  "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/Microsoft.ContainerRegistry/registries/{registryName}";

/** An image a registry run pushed: what the local kubelet may now run. */
export interface BuiltImage {
  /** `<loginServer>/<repository>@<digest>` */
  reference: string;
  repository: string;
  digest: string;
}

export interface ContainerRegistryOptions {
  /** Called when a run succeeds (the local stack lets its kubelet run the image). */
  onImageBuilt?: (image: BuiltImage) => void;
}

/**
 * Microsoft.ContainerRegistry: registries (read), and registry task runs as ACR has them —
 * `listBuildSourceUploadUrl` (a SAS URL on this server's blob side), `scheduleRun` of a
 * `DockerBuildRequest` (202 with `Azure-AsyncOperation`, `Location` and `Retry-After`, as ACR
 * answers: the operation succeeds once polled, and its Location gives the run, `Queued`), `runs/{runId}` advancing `Queued` → `Running`
 * → `Succeeded` as it is polled (the server's `pollsBeforeDone`), and `listLogSasUrl`. A run
 * "builds" by recording its uploaded context's digest as the image digest; a context without the
 * Dockerfile the run names fails as ACR's would, with its log saying why.
 */
export function containerRegistryProvider(options: ContainerRegistryOptions = {}) {
  return (arm: LocalArm): ArmProvider => {
    const store = arm.store;
    let runCounter = 0;
    const registry = (req: ArmRequest): StoredResource => {
      const id = `/subscriptions/${req.params.subscriptionId}/resourceGroups/${req.params.resourceGroupName}/providers/Microsoft.ContainerRegistry/registries/${req.params.registryName}`;
      const found = store.get(id);
      if (!found) throw notFound(req);
      return found;
    };
    const notFound = (req: ArmRequest) =>
      new ArmError(
        404,
        "ResourceNotFound",
        `The Resource 'Microsoft.ContainerRegistry/registries/${req.params.registryName}' under resource group '${req.params.resourceGroupName}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`,
      );
    const runOf = (req: ArmRequest) => {
      const r = registry(req);
      const run = store.get(`${r.id}/runs/${req.params.runId}`);
      if (!run) throw new ArmError(404, "RunNotFound", `The run '${req.params.runId}' was not found.`);
      return { r, run };
    };
    const logName = (runId: string, r: StoredResource) => `logs/${r.name}/${runId}/rawtext.log`;

    /** Moves a run on by one poll: Queued → Running → its outcome once polled enough. */
    const announce = (properties: Record<string, unknown>) => {
      const image = (
        properties.outputImages as { registry: string; repository: string; digest: string }[] | undefined
      )?.[0];
      if (properties.status === "Succeeded" && image)
        options.onImageBuilt?.({
          reference: `${image.registry}/${image.repository}@${image.digest}`,
          repository: image.repository,
          digest: image.digest,
        });
    };
    const advance = (r: StoredResource, run: StoredResource) => {
      const p = run.properties as Record<string, unknown> & { polls: number; planned: Record<string, unknown> };
      if (["Succeeded", "Failed", "Canceled", "Error", "Timeout"].includes(String(p.status))) return;
      store.update(run.id, (x) => {
        const q = x.properties as typeof p;
        q.polls += 1;
        if (q.polls <= arm.settings.pollsBeforeDone) {
          q.status = "Running";
          q.startTime ??= new Date().toISOString();
          return;
        }
        Object.assign(q, q.planned, { finishTime: new Date().toISOString(), provisioningState: "Succeeded" });
      });
      const done = store.get(run.id)?.properties as typeof p;
      announce(done);
      arm.blobs.set(logName(run.name, r), Buffer.from(String(done.log ?? "")));
    };
    /** A DockerBuildRequest accepted: its run, `Queued`, and what it will end as. */
    const createRun = (r: StoredResource, request: unknown): StoredResource => {
      const body = (request ?? {}) as {
        type?: unknown;
        sourceLocation?: unknown;
        dockerFilePath?: unknown;
        imageNames?: unknown;
        platform?: { os?: unknown };
      };
      if (body.type !== "DockerBuildRequest")
        throw new ArmError(400, "InvalidRequestContent", "Only DockerBuildRequest runs are supported here.");
      if (typeof body.dockerFilePath !== "string" || !body.dockerFilePath)
        throw new ArmError(400, "InvalidParameter", "The parameter dockerFilePath is required.");
      if (typeof body.platform?.os !== "string")
        throw new ArmError(400, "InvalidParameter", "The parameter platform.os is required.");
      const names = Array.isArray(body.imageNames) ? body.imageNames.map(String) : [];
      const source =
        typeof body.sourceLocation === "string" ? arm.blobs.get(`${r.name}/${body.sourceLocation}`) : undefined;
      if (!source)
        throw new ArmError(
          400,
          "InvalidSourceLocation",
          `The source location '${String(body.sourceLocation)}' could not be read.`,
        );
      runCounter += 1;
      const runId = `ca${runCounter}`;
      const loginServer = String(r.properties.loginServer);
      const digest = `sha256:${createHash("sha256").update(source).digest("hex")}`;
      let files: string[] = [];
      try {
        files = tarEntries(gunzipSync(source));
      } catch {
        files = [];
      }
      const [repository = "", tag] = (names[0] ?? "").replaceAll("{{.Run.ID}}", runId).split(":");
      const planned = files.includes(body.dockerFilePath)
        ? {
            status: "Succeeded",
            outputImages: [{ registry: loginServer, repository, ...(tag ? { tag } : {}), digest }],
            log: [
              `Queued a build with ID: ${runId}`,
              "Waiting for an agent...",
              `Sending context (${source.length} bytes) to registry: ${loginServer}...`,
              `Step 1/1 : building ${body.dockerFilePath} (local registry: the context's digest is the image's)`,
              `${loginServer}/${repository}@${digest} pushed`,
              `Run ID: ${runId} was successful`,
            ].join("\n"),
          }
        : {
            status: "Failed",
            runErrorMessage: "failed during run, err: exit status 1",
            log: [
              `Queued a build with ID: ${runId}`,
              `Sending context (${source.length} bytes) to registry: ${loginServer}...`,
              `failed to solve: failed to read dockerfile: open ${body.dockerFilePath}: no such file or directory`,
              `Run ID: ${runId} failed after 2s. Error: failed during run, err: exit status 1`,
            ].join("\n"),
          };
      const run = store.put({
        id: `${r.id}/runs/${runId}`,
        name: runId,
        type: RUN,
        properties: {
          runId,
          status: "Queued",
          runType: "QuickRun",
          createTime: new Date().toISOString(),
          platform: { os: body.platform.os, architecture: "amd64" },
          imageUpdateTrigger: null,
          provisioningState: "Succeeded",
          polls: 0,
          planned,
        },
      });
      arm.blobs.set(logName(runId, r), Buffer.from(`Queued a build with ID: ${runId}\n`));
      return run;
    };
    const runJson = (run: StoredResource) => {
      const { polls: _polls, planned: _planned, log: _log, ...properties } = run.properties;
      return { ...resourceJson(run), properties };
    };
    arm.views.set(RUN.toLowerCase(), runJson);
    /** A taskRun as ACR answers it: its `runResult` is the run it scheduled, as that run is now. */
    const taskRunJson = (taskRun: StoredResource) => {
      const { runId, ...properties } = taskRun.properties as { runId?: string };
      const run = runId ? store.get(`${taskRun.id.replace(/\/taskRuns\/[^/]+$/, "")}/runs/${runId}`) : undefined;
      return { ...resourceJson(taskRun), properties: { ...properties, ...(run ? { runResult: runJson(run) } : {}) } };
    };

    return {
      namespace: NAMESPACE,
      // A restarted stack: run ids go on from the saved runs, and the images they built can run again.
      restored() {
        const runs = store.list(RUN);
        runCounter = runs.length;
        for (const run of runs) announce(run.properties);
      },
      routes: [
        ...readRoutes(store, NAMESPACE, "registries"),
        {
          method: "POST",
          pattern: `${REGISTRY_PATH}/listBuildSourceUploadUrl`,
          action: "Microsoft.ContainerRegistry/registries/listBuildSourceUploadUrl/action",
          scope: (req) => req.path.slice(0, -"/listBuildSourceUploadUrl".length),
          handle: (req) => {
            const r = registry(req);
            const relativePath = `source/${new Date().toISOString().slice(0, 10).replaceAll("-", "")}/${randomUUID()}.tar.gz`;
            return { status: 200, body: { uploadUrl: arm.sasUrl(`${r.name}/${relativePath}`), relativePath } };
          },
        },
        {
          method: "POST",
          pattern: `${REGISTRY_PATH}/scheduleRun`,
          action: "Microsoft.ContainerRegistry/registries/scheduleRun/action",
          scope: (req) => req.path.slice(0, -"/scheduleRun".length),
          handle: (req, ctx) => {
            const r = registry(req);
            const run = createRun(r, req.body);
            // As ACR answers: 202, the run at the operation's Location once it is scheduled.
            return ctx.actionWithOperation(req, run, NAMESPACE);
          },
        },
        {
          // A named run (ACR's taskRuns): PUT is idempotent by name — the run a taskRun's first PUT
          // scheduled is answered again, never a second one — and the taskRun names its run.
          method: "PUT",
          pattern: `${REGISTRY_PATH}/taskRuns/{taskRunName}`,
          action: "Microsoft.ContainerRegistry/registries/taskRuns/write",
          handle: (req, ctx) => {
            const r = registry(req);
            const id = `${r.id}/taskRuns/${req.params.taskRunName}`;
            const existing = store.get(id);
            if (existing) return { status: 200, body: taskRunJson(existing) };
            const body = req.body as { properties?: { runRequest?: unknown } } | undefined;
            const run = createRun(r, body?.properties?.runRequest);
            const answer = ctx.putWithOperation(req, {
              id,
              name: String(req.params.taskRunName),
              type: TASK_RUN,
              namespace: NAMESPACE,
              location: r.location ?? "eastus",
              properties: { runRequest: body?.properties?.runRequest, runId: run.name },
            });
            return { ...answer, body: taskRunJson(store.get(id) ?? run) };
          },
        },
        {
          method: "GET",
          pattern: `${REGISTRY_PATH}/taskRuns/{taskRunName}`,
          action: "Microsoft.ContainerRegistry/registries/taskRuns/read",
          handle: (req) => {
            const r = registry(req);
            const taskRun = store.get(`${r.id}/taskRuns/${req.params.taskRunName}`);
            if (!taskRun)
              throw new ArmError(404, "ResourceNotFound", `The task run '${req.params.taskRunName}' was not found.`);
            return { status: 200, body: taskRunJson(taskRun) };
          },
        },
        {
          method: "GET",
          pattern: `${REGISTRY_PATH}/runs/{runId}`,
          action: "Microsoft.ContainerRegistry/registries/runs/read",
          handle: (req) => {
            const { r, run } = runOf(req);
            advance(r, run);
            return { status: 200, body: runJson(store.get(run.id) ?? run) };
          },
        },
        {
          method: "POST",
          pattern: `${REGISTRY_PATH}/runs/{runId}/listLogSasUrl`,
          action: "Microsoft.ContainerRegistry/registries/runs/listLogSasUrl/action",
          scope: (req) => req.path.slice(0, -"/listLogSasUrl".length),
          handle: (req) => {
            const { r, run } = runOf(req);
            return { status: 200, body: { logLink: arm.sasUrl(logName(run.name, r)) } };
          },
        },
      ],
    };
  };
}

/** Adds a registry (Standard, admin user off). */
export function seedRegistry(
  arm: LocalArm,
  at: { subscriptionId: string; resourceGroup: string; location: string },
  name: string,
) {
  return seedResource(
    arm.store,
    at,
    "Microsoft.ContainerRegistry",
    "registries",
    name,
    { loginServer: `${name.toLowerCase()}.azurecr.io`, adminUserEnabled: false },
    { sku: { name: "Standard", tier: "Standard" } },
  );
}
