import type { ServiceClient } from "@azure/core-client";
import type { HttpClient, Pipeline } from "@azure/core-rest-pipeline";
import { type ArmConnection, ARM_SCOPE, lazyClient, PUBLIC_ARM_ENDPOINT } from "./arm-connection.js";

/**
 * The registry task REST API (`Microsoft.ContainerRegistry`, api-version 2019-06-01-preview):
 * `@azure/arm-containerregistry` 12 no longer has runs, so these calls go through
 * `@azure/core-client`'s `ServiceClient` — the same pipeline the SDK clients use (the managed
 * identity's bearer token, TLS, retries) — per decision 0023.
 */
export const REGISTRY_TASKS_API_VERSION = "2019-06-01-preview";

/** The registry a build runs in. */
export interface RegistryRef {
  subscription_id: string;
  resource_group: string;
  name: string;
}

/** ACR's run states; the last five are terminal. */
export type RunStatus = "Queued" | "Started" | "Running" | "Succeeded" | "Failed" | "Canceled" | "Error" | "Timeout";
const TERMINAL = new Set<RunStatus>(["Succeeded", "Failed", "Canceled", "Error", "Timeout"]);

/** A run as the build orchestration needs it. */
export interface RunView {
  run_id: string;
  status: RunStatus;
  terminal: boolean;
  /** The image the run pushed (`repository`, `digest`), when it succeeded. */
  output_image?: { repository: string; tag?: string; digest: string };
  /** ACR's `runErrorMessage`, when it failed. */
  error?: string;
}

/** A refusal or failure from Resource Manager, shaped like the SDKs' `RestError` (so authorization refusals are explained). */
export class RegistryRequestError extends Error {
  constructor(
    message: string,
    readonly statusCode: number,
    readonly code: string,
  ) {
    super(message);
    this.name = "RegistryRequestError";
  }
}

const registryPath = (r: RegistryRef) =>
  `/subscriptions/${encodeURIComponent(r.subscription_id)}/resourceGroups/${encodeURIComponent(r.resource_group)}/providers/Microsoft.ContainerRegistry/registries/${encodeURIComponent(r.name)}`;

/** How long scheduling a run may take when ACR answers it as a long-running operation (202). */
const SCHEDULE_WAIT_SECONDS = 120;

/** ARM's `Retry-After` (seconds) as a wait: at least 1 s, at most 30 s, 5 s when it says nothing. */
function retryAfterMs(value: string | undefined): number {
  const seconds = Number(value);
  return (
    (Number.isFinite(seconds) && value !== undefined && value !== "" ? Math.min(30, Math.max(1, seconds)) : 5) * 1000
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Bytes of a run's log kept for the operation (its tail). */
export const LOG_TAIL_BYTES = 4 * 1024;

/**
 * Registry builds through Resource Manager: the build context's upload URL, the upload, the run,
 * its state and its log's tail. The token goes to Resource Manager only; the upload and the log
 * are read through the SAS URLs ARM answers, with no token, and those URLs are never returned or
 * logged.
 */
export function createRegistryBuilds(connection: ArmConnection) {
  const endpoint = (connection.clientOptions?.endpoint ?? PUBLIC_ARM_ENDPOINT).replace(/\/+$/, "");
  const client = lazyClient(async (): Promise<ServiceClient> => {
    const { ServiceClient } = await import("@azure/core-client");
    const options = connection.clientOptions ?? {};
    return new ServiceClient({
      credential: connection.credential,
      credentialScopes: [ARM_SCOPE],
      endpoint,
      ...(options.tlsOptions ? { tlsOptions: options.tlsOptions } : {}),
      ...(options.retryOptions ? { retryOptions: options.retryOptions } : {}),
    });
  });
  // The SAS side (upload, log): no bearer-token policy at all.
  const blobs = lazyClient(async (): Promise<{ pipeline: Pipeline; http: HttpClient }> => {
    const { createPipelineFromOptions, createDefaultHttpClient } = await import("@azure/core-rest-pipeline");
    const options = connection.clientOptions ?? {};
    return {
      pipeline: createPipelineFromOptions({
        ...(options.tlsOptions ? { tlsOptions: options.tlsOptions } : {}),
        ...(options.retryOptions ? { retryOptions: options.retryOptions } : {}),
      }),
      http: createDefaultHttpClient(),
    };
  });

  /** One Resource Manager request (a path under the endpoint, or a URL ARM gave, which must be on the endpoint). */
  async function send(
    method: "GET" | "POST" | "PUT",
    target: string,
    body?: unknown,
  ): Promise<{ status: number; headers: { get(name: string): string | undefined }; body: Record<string, unknown> }> {
    const { createPipelineRequest } = await import("@azure/core-rest-pipeline");
    const url = target.startsWith("/") ? `${endpoint}${target}?api-version=${REGISTRY_TASKS_API_VERSION}` : target;
    // The managed identity's token goes to Resource Manager only.
    if (!URL.canParse(url) || new URL(url).origin !== new URL(endpoint).origin)
      throw new RegistryRequestError("the registry answered a URL outside Resource Manager", 502, "ForeignUrl");
    const request = createPipelineRequest({
      url,
      method,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (body !== undefined) request.headers.set("Content-Type", "application/json");
    const response = await (await client()).sendRequest(request);
    const parsed = response.bodyAsText ? (safeJson(response.bodyAsText) as Record<string, unknown> | undefined) : {};
    if (response.status >= 400) {
      const error = (parsed?.error ?? {}) as { code?: string; message?: string };
      throw new RegistryRequestError(
        `${error.code ?? `HTTP ${response.status}`}: ${error.message ?? "the registry request failed"}`,
        response.status,
        error.code ?? "",
      );
    }
    return { status: response.status, headers: response.headers, body: parsed ?? {} };
  }

  async function arm(method: "GET" | "POST" | "PUT", path: string, body?: unknown): Promise<Record<string, unknown>> {
    return (await send(method, path, body)).body;
  }

  /**
   * A POST ARM may answer as a long-running operation (202 with `Azure-AsyncOperation` /
   * `Location` and `Retry-After`, as ACR answers `scheduleRun`): polls the operation until it ends
   * (at most {@link SCHEDULE_WAIT_SECONDS}), then reads the result at `Location`. A 200 is the result.
   */
  async function armAction(
    path: string,
    body: unknown,
    method: "POST" | "PUT" = "POST",
  ): Promise<Record<string, unknown>> {
    const first = await send(method, path, body);
    // A PUT answers 200/201 with the resource, its provisioning followed at Azure-AsyncOperation.
    if (first.status !== 202 && !(method === "PUT" && first.headers.get("azure-asyncoperation"))) return first.body;
    const status = first.headers.get("azure-asyncoperation");
    const location = first.headers.get("location");
    let retry = first.headers.get("retry-after");
    const deadline = Date.now() + SCHEDULE_WAIT_SECONDS * 1000;
    if (status) {
      for (;;) {
        await sleep(retryAfterMs(retry));
        const poll = await send("GET", status);
        const state = String(poll.body.status ?? "InProgress");
        if (state === "Succeeded") break;
        if (state === "Failed" || state === "Canceled") {
          const error = (poll.body.error ?? {}) as { code?: string; message?: string };
          throw new RegistryRequestError(
            `${error.code ?? state}: ${error.message ?? `the registry's operation ended ${state.toLowerCase()}`}`,
            502,
            error.code ?? state,
          );
        }
        if (Date.now() > deadline)
          throw new RegistryRequestError("the registry did not finish scheduling the run in time", 503, "Timeout");
        retry = poll.headers.get("retry-after");
      }
    }
    if (method === "PUT") return (await send("GET", path)).body;
    if (!location) return first.body;
    for (;;) {
      const result = await send("GET", location);
      if (result.status !== 202) return result.body;
      if (Date.now() > deadline)
        throw new RegistryRequestError("the registry did not finish scheduling the run in time", 503, "Timeout");
      await sleep(retryAfterMs(result.headers.get("retry-after")));
    }
  }

  async function sas(method: "GET" | "PUT", url: string, body?: Buffer): Promise<{ status: number; text: string }> {
    const { createPipelineRequest } = await import("@azure/core-rest-pipeline");
    const { pipeline, http } = await blobs();
    const request = createPipelineRequest({ url, method, ...(body ? { body } : {}) });
    if (body) {
      request.headers.set("x-ms-blob-type", "BlockBlob");
      request.headers.set("Content-Type", "application/gzip");
    }
    const response = await pipeline.sendRequest(http, request);
    return { status: response.status, text: response.bodyAsText ?? "" };
  }

  return {
    /** Uploads the packed build context through the registry's own upload URL; answers the run's `sourceLocation`. */
    async uploadContext(registry: RegistryRef, bytes: Buffer): Promise<{ source_location: string }> {
      const target = await arm("POST", `${registryPath(registry)}/listBuildSourceUploadUrl`);
      const uploadUrl = String(target.uploadUrl ?? "");
      const relativePath = String(target.relativePath ?? "");
      if (!URL.canParse(uploadUrl) || !relativePath)
        throw new RegistryRequestError("the registry answered no upload URL for the build context", 502, "NoUploadUrl");
      const put = await sas("PUT", uploadUrl, bytes);
      if (put.status !== 201 && put.status !== 200)
        throw new RegistryRequestError(
          `the build context upload was refused (HTTP ${put.status})`,
          put.status,
          "UploadFailed",
        );
      return { source_location: relativePath };
    },

    /** Schedules a Docker build run of the uploaded context; answers the run id. */
    async scheduleRun(
      registry: RegistryRef,
      request: { source_location: string; dockerfile: string; image_names: string[]; timeout_seconds: number },
    ): Promise<{ run_id: string }> {
      const run = await armAction(`${registryPath(registry)}/scheduleRun`, dockerBuildRequest(request));
      const runId = String((run.properties as { runId?: unknown } | undefined)?.runId ?? run.name ?? "");
      if (!runId) throw new RegistryRequestError("the registry answered no run id", 502, "NoRunId");
      return { run_id: runId };
    },

    /**
     * Schedules a Docker build run under a name of the caller's (ACR's `taskRuns`, whose PUT is
     * idempotent by name): when a taskRun of that name exists already — the registry accepted it
     * before the caller could record it — its run is answered, and no second run is scheduled.
     */
    async scheduleNamedRun(
      registry: RegistryRef,
      name: string,
      request: { source_location: string; dockerfile: string; image_names: string[]; timeout_seconds: number },
    ): Promise<{ run_id: string; reused: boolean }> {
      const path = `${registryPath(registry)}/taskRuns/${encodeURIComponent(name)}`;
      const runIdOf = (taskRun: Record<string, unknown>) =>
        String(
          (taskRun.properties as { runResult?: { properties?: { runId?: unknown }; name?: unknown } } | undefined)
            ?.runResult?.properties?.runId ??
            (taskRun.properties as { runResult?: { name?: unknown } } | undefined)?.runResult?.name ??
            "",
        );
      const found = await arm("GET", path).catch((error: unknown) => {
        if (error instanceof RegistryRequestError && error.statusCode === 404) return undefined;
        throw error;
      });
      if (found && runIdOf(found)) return { run_id: runIdOf(found), reused: true };
      const taskRun = await armAction(
        path,
        {
          properties: {
            runRequest: dockerBuildRequest(request),
          },
        },
        "PUT",
      );
      const runId = runIdOf(taskRun);
      if (!runId) throw new RegistryRequestError("the registry answered no run id", 502, "NoRunId");
      return { run_id: runId, reused: false };
    },

    /** The run's state, and its pushed image once it succeeded. */
    async getRun(registry: RegistryRef, runId: string): Promise<RunView> {
      const run = await arm("GET", `${registryPath(registry)}/runs/${encodeURIComponent(runId)}`);
      const p = (run.properties ?? {}) as {
        status?: RunStatus;
        outputImages?: { repository?: string; tag?: string; digest?: string }[];
        runErrorMessage?: string;
      };
      const status = p.status ?? "Queued";
      const image = p.outputImages?.find((i) => typeof i.digest === "string" && i.repository);
      return {
        run_id: runId,
        status,
        terminal: TERMINAL.has(status),
        ...(image
          ? {
              output_image: {
                repository: image.repository ?? "",
                digest: image.digest ?? "",
                ...(image.tag ? { tag: image.tag } : {}),
              },
            }
          : {}),
        ...(p.runErrorMessage ? { error: p.runErrorMessage } : {}),
      };
    },

    /** The last {@link LOG_TAIL_BYTES} of the run's log (read through its SAS link, which is not kept). */
    async logTail(registry: RegistryRef, runId: string): Promise<string> {
      const link = await arm("POST", `${registryPath(registry)}/runs/${encodeURIComponent(runId)}/listLogSasUrl`);
      const url = String(link.logLink ?? "");
      if (!URL.canParse(url)) return "";
      const log = await sas("GET", url);
      if (log.status !== 200) return "";
      const text = log.text.length > LOG_TAIL_BYTES ? log.text.slice(-LOG_TAIL_BYTES) : log.text;
      return text.trimEnd();
    },
  };
}

export type RegistryBuilds = ReturnType<typeof createRegistryBuilds>;

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The Docker build ACR runs for a context (the body of `scheduleRun`, a taskRun's `runRequest`). */
function dockerBuildRequest(request: {
  source_location: string;
  dockerfile: string;
  image_names: string[];
  timeout_seconds: number;
}): Record<string, unknown> {
  return {
    type: "DockerBuildRequest",
    sourceLocation: request.source_location,
    dockerFilePath: request.dockerfile,
    imageNames: request.image_names,
    isPushEnabled: true,
    noCache: false,
    platform: { os: "Linux", architecture: "amd64" },
    timeout: request.timeout_seconds,
  };
}
