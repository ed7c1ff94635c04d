/**
 * A local Azure Resource Manager: the subset of ARM's REST API the product calls, over HTTPS, with
 * ARM's semantics (long-running operations with `Azure-AsyncOperation` / `Location` /
 * `Retry-After`, `provisioningState`, 409 for a concurrent operation, ETags, `AuthorizationFailed`
 * bodies), so the real `@azure/arm-*` clients are what runs against it. Each resource provider is a
 * module under `providers/` that registers its routes; the store, operations, authorization,
 * paging and failure injection are generic and live here.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import {
  type ArmErrorDetail,
  type ArmOperation,
  type OperationHook,
  type OperationRecord,
  Operations,
  operationStatusJson,
  type PlannedOutcome,
} from "./operations.js";
import { ResourceStore, resourceJson, type StoredResource } from "./resource-store.js";

/** A refusal with ARM's error body `{error: {code, message}}`. */
export class ArmError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = "ArmError";
  }
}

export interface ArmRequest {
  method: string;
  path: string;
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
}

export interface ArmResponse {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** One REST route of a resource provider. */
export interface ArmRoute {
  method: "GET" | "PUT" | "POST" | "DELETE" | "PATCH";
  /**
   * `/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/…`; literals match
   * case-insensitively; `{*scope}` matches a whole ARM scope (several segments, with its leading `/`).
   */
  pattern: string;
  /** The RBAC action it needs (`Microsoft.ContainerService/managedClusters/write`), checked before the handler runs. */
  action: string;
  /** The scope the action is checked at; default the request path. */
  scope?: (req: ArmRequest) => string;
  handle(req: ArmRequest, arm: ArmContext): ArmResponse | Promise<ArmResponse>;
}

/** A resource provider module: its routes, and its setup on the server (seeding, hooks). */
export interface ArmProvider {
  namespace: string;
  routes: ArmRoute[];
  /** After the saved state was loaded: make what lives outside it (nodes, images) match it again. */
  restored?(): void;
}

/** What a provider's handlers get: the store, operations, and the generic ARM behaviours. */
export interface ArmContext {
  store: ResourceStore;
  operations: Operations;
  baseUrl: string;
  /** The caller's object id (from the bearer token). */
  callerObjectId: string;
  /** PUT of a resource whose provisioning is a long-running operation (see {@link putWithOperation}). */
  putWithOperation(req: ArmRequest, spec: PutSpec): ArmResponse;
  /** DELETE as a long-running operation: 202, the resource gone when the operation succeeds, then `onDeleted` runs. */
  deleteWithOperation(req: ArmRequest, resourceId: string, namespace: string, onDeleted?: OperationHook): ArmResponse;
  /** A POST action as a long-running operation (start, stop, a registry's scheduleRun…): 202 + Azure-AsyncOperation + Location; the hook `apply` runs on success. */
  actionWithOperation(req: ArmRequest, resource: StoredResource, namespace: string, apply?: OperationHook): ArmResponse;
  /** A page of a list: `{value, nextLink}` with `$skiptoken` paging. */
  page(req: ArmRequest, items: unknown[]): ArmResponse;
  /** 404 `ResourceNotFound` / `ResourceGroupNotFound`, ARM's wording. */
  notFound(kind: string, id: string): ArmError;
}

export interface PutSpec {
  id: string;
  name: string;
  type: string;
  namespace: string;
  location: string;
  properties: Record<string, unknown>;
  tags?: Record<string, string>;
  extra?: Record<string, unknown>;
  /** Runs when the operation succeeds (after `provisioningState` becomes `Succeeded`): a hook of `LocalArm.hooks`. */
  onSucceeded?: OperationHook;
}

/** A provider's named side effect of a succeeded operation: the resource (undefined once deleted) and the hook's data. */
export type HookHandler = (resource: StoredResource | undefined, data: unknown) => void;

/** A fault a test injects: the next matching requests get this error instead of their answer. */
export interface InjectedFault {
  method?: string;
  /** Matched against the request path. */
  path?: RegExp;
  /** Matching requests let through before the fault applies (1 = "fail the second poll"). */
  skip?: number;
  /** How many matching requests fail (default 1). */
  times?: number;
  status: number;
  code?: string;
  message?: string;
  /** Sent as `Retry-After` (429 and 503). */
  retryAfterSeconds?: number;
}

/** A refusal of an action at a scope, answered with ARM's `AuthorizationFailed` body. */
export interface Denial {
  action: string | RegExp;
  /** Scope prefix (case-insensitive); default every scope. */
  scope?: string;
}

export interface LocalArmOptions {
  key: string;
  cert: string;
  /** Verifies a bearer token; returns the caller's object id, or throws when the token is not valid. */
  verifyToken(token: string): Promise<{ objectId: string }>;
  providers: ((arm: LocalArm) => ArmProvider)[];
  host?: string;
  port?: number;
  /** Polls answered InProgress before an operation ends (default 1). */
  pollsBeforeDone?: number;
  /** `Retry-After` on accepted operations, in seconds (default 1, as ARM's usual hint is small). */
  retryAfterSeconds?: number;
  /** Items per list page (default 100). */
  pageSize?: number;
  /**
   * Where the resources and operations are kept across restarts (JSON, replaced atomically after
   * every request that may change them); loaded at start when it exists. Unset: memory only.
   */
  stateFile?: string;
}

export interface LocalArm {
  url: string;
  store: ResourceStore;
  operations: Operations;
  /** Every request answered: method, path and status (for "created once" assertions). */
  requests: { method: string; path: string; status: number }[];
  settings: { pollsBeforeDone: number; retryAfterSeconds: number; pageSize: number };
  inject(fault: InjectedFault): void;
  /** The next operation on a resource matching `plan.resource` ends Failed or Canceled. */
  planOperation(plan: PlannedOutcome): void;
  deny(denial: Denial): () => void;
  /**
   * Blobs behind SAS URLs, as ARM hands out storage URLs (a registry's build-source upload, a run's
   * log): `PUT` / `GET` on `/_blobs/<name>?sv=…&sig=…`, no bearer token, the signature checked.
   */
  blobs: Map<string, Buffer>;
  /** A SAS URL for the blob `name` on this server. */
  sasUrl(name: string): string;
  /** Side effects of succeeded operations by name (providers register theirs when made). */
  hooks: Map<string, HookHandler>;
  /** A resource type's wire JSON where it is not {@link resourceJson} (an operation's Location result). */
  views: Map<string, (resource: StoredResource) => unknown>;
  /** True when the state was loaded from `stateFile` at start. */
  restored: boolean;
  /** Clears faults, planned outcomes and denials. */
  reset(): void;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Blobs up to this size (run logs) are kept in the state file; build contexts are not. */
const MAX_SAVED_BLOB_BYTES = 256 * 1024;
/** A build context may be this large (ACR allows far more; this repository's is a few MiB). */
const MAX_BLOB_BYTES = 64 * 1024 * 1024;
const DEFAULT_CODES: Record<number, string> = {
  400: "BadRequest",
  404: "NotFound",
  409: "Conflict",
  429: "TooManyRequests",
  500: "InternalServerError",
  503: "ServiceUnavailable",
};

/** Starts the local Resource Manager on loopback TLS with the given provider modules. */
export async function startLocalArm(options: LocalArmOptions): Promise<LocalArm> {
  const store = new ResourceStore();
  const settings = {
    pollsBeforeDone: options.pollsBeforeDone ?? 1,
    retryAfterSeconds: options.retryAfterSeconds ?? 1,
    pageSize: options.pageSize ?? 100,
  };
  const operations = new Operations({ pollsBeforeDone: () => settings.pollsBeforeDone });
  const faults: (InjectedFault & { seen: number; failed: number })[] = [];
  const denials: Denial[] = [];
  const requests: LocalArm["requests"] = [];
  let baseUrl = "";
  const blobs = new Map<string, Buffer>();
  const sasSignature = randomBytes(24).toString("base64url");

  const arm: LocalArm = {
    url: "",
    store,
    operations,
    requests,
    settings,
    inject: (fault) => void faults.push({ ...fault, seen: 0, failed: 0 }),
    planOperation: (plan) => void operations.planned.push(plan),
    blobs,
    sasUrl: (name) =>
      `${baseUrl}/_blobs/${name.split("/").map(encodeURIComponent).join("/")}?sv=2024-11-04&sr=b&sp=rw&sig=${sasSignature}`,
    hooks: new Map(),
    views: new Map(),
    restored: false,
    deny(denial) {
      denials.push(denial);
      return () => {
        const i = denials.indexOf(denial);
        if (i >= 0) denials.splice(i, 1);
      };
    },
    reset() {
      faults.length = 0;
      denials.length = 0;
      operations.planned.length = 0;
    },
    close: async () => undefined,
  };

  const providers = options.providers.map((make) => make(arm));
  const routes = providers.flatMap((provider) =>
    provider.routes.map((route) => ({
      route,
      regex: compilePattern(route.pattern),
      names: paramNames(route.pattern),
    })),
  );

  const runHook = (hook: OperationHook | undefined, resource: StoredResource | undefined) => {
    if (!hook) return;
    const handler = arm.hooks.get(hook.name);
    if (!handler) throw new Error(`local ARM: no hook named ${hook.name}`);
    handler(resource, hook.data);
  };
  /** What an operation does when it ends: its kind's change, then its provider's hook on success. */
  const completion =
    (op: Pick<OperationRecord, "kind" | "resourceId" | "hook">) =>
    (outcome: OperationRecord["status"]): void => {
      if (op.kind === "put") {
        store.update(op.resourceId, (r) => {
          r.properties.provisioningState = outcome;
        });
        if (outcome === "Succeeded" && store.get(op.resourceId)) runHook(op.hook, store.get(op.resourceId));
      } else if (op.kind === "delete") {
        if (outcome === "Succeeded") {
          store.delete(op.resourceId);
          runHook(op.hook, undefined);
        } else
          store.update(op.resourceId, (r) => {
            r.properties.provisioningState = "Failed";
          });
      } else if (outcome === "Succeeded") runHook(op.hook, store.get(op.resourceId));
    };

  // The saved state (a restarted stack): resources and operations as they were, a running
  // operation going on where it stopped; each provider then makes the world outside match.
  if (options.stateFile && existsSync(options.stateFile)) {
    const saved = JSON.parse(readFileSync(options.stateFile, "utf8")) as {
      resources: StoredResource[];
      operations: OperationRecord[];
      blobs?: Record<string, string>;
    };
    store.restore(saved.resources);
    operations.restore(saved.operations, completion);
    for (const [name, base64] of Object.entries(saved.blobs ?? {})) blobs.set(name, Buffer.from(base64, "base64"));
    arm.restored = true;
    for (const provider of providers) provider.restored?.();
  }
  /** Replaces the state file (a new file renamed over the old: a kill leaves the old or the new, never half). */
  const persist = () => {
    if (!options.stateFile) return;
    const small: Record<string, string> = {};
    // Build contexts (MiB) are not kept: a run that was scheduled has read its own already.
    for (const [name, blob] of blobs) if (blob.length <= MAX_SAVED_BLOB_BYTES) small[name] = blob.toString("base64");
    const text = JSON.stringify({ resources: store.records(), operations: operations.records(), blobs: small });
    const temporary = `${options.stateFile}.${process.pid}.tmp`;
    writeFileSync(temporary, text, { mode: 0o600 });
    renameSync(temporary, options.stateFile);
  };
  const saveState = () => {
    try {
      persist();
    } catch (error) {
      // The answer still goes out; a restart would then find the state of the last good save.
      process.emitWarning(
        `local ARM could not save its state: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  };

  const lroHeaders = (op: ArmOperation, apiVersion: string): Record<string, string> => {
    const base = `${baseUrl}/subscriptions/${op.subscriptionId}/providers/${op.namespace}/locations/${op.location}`;
    return {
      "Azure-AsyncOperation": `${base}/operations/${op.id}?api-version=${apiVersion}`,
      Location: `${base}/operationresults/${op.id}?api-version=${apiVersion}`,
      "Retry-After": String(settings.retryAfterSeconds),
    };
  };
  const conflictIfRunning = (resourceId: string) => {
    const running = operations.running(resourceId);
    if (running)
      throw new ArmError(
        409,
        "Conflict",
        `Operation is not allowed because there's an in progress operation (${running.id}) on resource '${running.resourceId}'. Please wait for it to finish before starting a new operation.`,
      );
  };
  const subscriptionOf = (id: string) => /^\/subscriptions\/([^/]+)/i.exec(id)?.[1] ?? "";

  const context = (callerObjectId: string): ArmContext => ({
    store,
    operations,
    baseUrl,
    callerObjectId,
    notFound(kind, id) {
      return new ArmError(
        404,
        kind === "resourceGroup" ? "ResourceGroupNotFound" : "ResourceNotFound",
        kind === "resourceGroup"
          ? `Resource group '${id}' could not be found.`
          : `The Resource '${id.replace(/^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\//i, "")}' under resource group '${/resourceGroups\/([^/]+)/i.exec(id)?.[1] ?? ""}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`,
      );
    },
    putWithOperation(req, spec) {
      conflictIfRunning(spec.id);
      const existing = store.get(spec.id);
      checkPreconditions(req.headers, existing);
      const state = existing ? "Updating" : "Creating";
      const stored = store.put({
        id: existing?.id ?? spec.id,
        name: spec.name,
        type: spec.type,
        location: spec.location,
        ...(spec.tags ? { tags: spec.tags } : {}),
        ...(spec.extra ? { extra: spec.extra } : {}),
        properties: { ...spec.properties, provisioningState: state },
      });
      const init = {
        kind: "put" as const,
        resourceId: stored.id,
        ...(spec.onSucceeded ? { hook: spec.onSucceeded } : {}),
      };
      const op = operations.start({
        ...init,
        namespace: spec.namespace,
        location: spec.location,
        subscriptionId: subscriptionOf(stored.id),
        isDelete: false,
        complete: completion(init),
      });
      const current = store.get(stored.id) ?? stored;
      return {
        status: existing ? 200 : 201,
        body: resourceJson(current),
        headers: { ETag: current.etag, ...lroHeaders(op, apiVersionOf(req)) },
      };
    },
    deleteWithOperation(req, resourceId, namespace, onDeleted) {
      const existing = store.get(resourceId);
      if (!existing) return { status: 204 };
      conflictIfRunning(resourceId);
      checkPreconditions(req.headers, existing);
      store.update(resourceId, (r) => {
        r.properties.provisioningState = "Deleting";
      });
      const init = { kind: "delete" as const, resourceId: existing.id, ...(onDeleted ? { hook: onDeleted } : {}) };
      const op = operations.start({
        ...init,
        namespace,
        location: existing.location ?? "eastus",
        subscriptionId: subscriptionOf(existing.id),
        isDelete: true,
        complete: completion(init),
      });
      return { status: 202, headers: lroHeaders(op, apiVersionOf(req)) };
    },
    actionWithOperation(req, resource, namespace, apply) {
      conflictIfRunning(resource.id);
      const init = { kind: "action" as const, resourceId: resource.id, ...(apply ? { hook: apply } : {}) };
      const op = operations.start({
        ...init,
        namespace,
        location: resource.location ?? "eastus",
        subscriptionId: subscriptionOf(resource.id),
        isDelete: false,
        complete: completion(init),
      });
      return { status: 202, headers: lroHeaders(op, apiVersionOf(req)) };
    },
    page(req, items) {
      const skip = Number(req.query.get("$skiptoken") ?? "0");
      const start = Number.isInteger(skip) && skip > 0 ? skip : 0;
      const value = items.slice(start, start + settings.pageSize);
      const next = start + settings.pageSize;
      const nextUrl = new URL(`${baseUrl}${req.path}`);
      for (const [k, v] of req.query) if (k !== "$skiptoken") nextUrl.searchParams.set(k, v);
      nextUrl.searchParams.set("$skiptoken", String(next));
      return { status: 200, body: { value, ...(next < items.length ? { nextLink: nextUrl.toString() } : {}) } };
    },
  });

  async function answer(req: IncomingMessage, text: string): Promise<ArmResponse> {
    const url = requestUrl(req);
    const method = req.method ?? "GET";
    const auth = req.headers.authorization ?? "";
    if (!auth.startsWith("Bearer "))
      throw new ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.");
    let caller: { objectId: string };
    try {
      caller = await options.verifyToken(auth.slice("Bearer ".length));
    } catch {
      throw new ArmError(401, "InvalidAuthenticationToken", "The access token is invalid.");
    }
    const apiVersion = url.searchParams.get("api-version");
    if (!apiVersion)
      throw new ArmError(
        400,
        "MissingApiVersionParameter",
        "The api-version query parameter (?api-version=) is required for all requests.",
      );
    for (const fault of faults) {
      if (fault.method && fault.method !== method) continue;
      if (fault.path && !fault.path.test(url.pathname)) continue;
      fault.seen += 1;
      if (fault.seen <= (fault.skip ?? 0) || fault.failed >= (fault.times ?? 1)) continue;
      fault.failed += 1;
      const status = fault.status;
      throw new ArmError(
        status,
        fault.code ?? DEFAULT_CODES[status] ?? "InternalServerError",
        fault.message ?? `Injected failure (${status}).`,
        fault.retryAfterSeconds === undefined ? {} : { "Retry-After": String(fault.retryAfterSeconds) },
      );
    }
    const operation =
      /^\/subscriptions\/([^/]+)\/providers\/([^/]+)\/locations\/([^/]+)\/(operations|operationresults)\/([^/]+)$/i.exec(
        url.pathname,
      );
    if (method === "GET" && operation) return pollOperation(operation[4] ?? "", operation[5] ?? "", apiVersion);
    let body: Record<string, unknown> = {};
    if (text) {
      try {
        const parsed: unknown = JSON.parse(text);
        if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
        body = parsed as Record<string, unknown>;
      } catch {
        throw new ArmError(
          400,
          "InvalidRequestContent",
          "The request content was invalid and could not be deserialized.",
        );
      }
    }
    for (const { route, regex, names } of routes) {
      if (route.method !== method) continue;
      const match = regex.exec(url.pathname);
      if (!match) continue;
      const params = Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(match[i + 1] ?? "")]));
      const request: ArmRequest = {
        method,
        path: url.pathname,
        params,
        query: url.searchParams,
        body,
        headers: req.headers,
      };
      const scope = route.scope?.(request) ?? url.pathname;
      const denied = denials.find(
        (d) =>
          (typeof d.action === "string"
            ? d.action.toLowerCase() === route.action.toLowerCase()
            : d.action.test(route.action)) &&
          (!d.scope || scope.toLowerCase().startsWith(d.scope.toLowerCase())),
      );
      if (denied) throw authorizationFailed(caller.objectId, route.action, scope);
      // Reading a resource whose operation runs counts as a poll of it: a client that polls
      // provisioningState (not the operation URL) sees the operation end as time goes by in ARM.
      if (method === "GET") {
        const running = operations.running(url.pathname);
        if (running && running.resourceId.toLowerCase() === url.pathname.toLowerCase()) operations.poll(running.id);
      }
      return route.handle(request, context(caller.objectId));
    }
    throw new ArmError(
      400,
      "InvalidResourceType",
      `The resource type could not be found in the namespace for api version '${apiVersion}' (${method} ${url.pathname}).`,
    );
  }

  function pollOperation(kind: string, id: string, apiVersion: string): ArmResponse {
    const op = operations.poll(id);
    if (!op) throw new ArmError(404, "NotFound", `The operation '${id}' was not found.`);
    const retry = { "Retry-After": String(settings.retryAfterSeconds) };
    if (kind.toLowerCase() === "operations") {
      return { status: 200, body: operationStatusJson(op), headers: op.status === "InProgress" ? retry : {} };
    }
    if (op.status === "InProgress") return { status: 202, headers: { ...retry, ...lroHeadersFor(op, apiVersion) } };
    if (op.status !== "Succeeded") {
      const error = (operationStatusJson(op).error as ArmErrorDetail | undefined) ?? { code: op.status, message: "" };
      throw new ArmError(op.status === "Canceled" ? 409 : 400, error.code, error.message);
    }
    const resource = store.get(op.resourceId);
    if (op.isDelete || !resource) return { status: 204 };
    return { status: 200, body: (arm.views.get(resource.type.toLowerCase()) ?? resourceJson)(resource) };
  }
  const lroHeadersFor = (op: ArmOperation, apiVersion: string) => {
    const { Location } = lroHeaders(op, apiVersion);
    return { Location: Location ?? "" };
  };

  /** Blob storage's side of a SAS URL: Put Blob (BlockBlob) and Get Blob, Storage's error codes. */
  function answerBlob(req: IncomingMessage, res: ServerResponse, path: string, body: Buffer, size: number) {
    const url = requestUrl(req);
    let name = "";
    try {
      name = path.slice("/_blobs/".length).split("/").map(decodeURIComponent).join("/");
    } catch {
      name = "";
    }
    const send = (status: number, text: string | Buffer, type = "application/xml") => {
      requests.push({ method: req.method ?? "", path: "/_blobs/…", status });
      res.writeHead(status, { "Content-Type": type, "x-ms-request-id": crypto.randomUUID() }).end(text);
    };
    const storageError = (status: number, code: string, message: string) =>
      send(
        status,
        `<?xml version="1.0" encoding="utf-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`,
      );
    const sig = url.searchParams.get("sig") ?? "";
    if (sig.length !== sasSignature.length || !timingSafeEqual(Buffer.from(sig), Buffer.from(sasSignature)))
      return storageError(403, "AuthenticationFailed", "Signature did not match.");
    if (!name)
      return storageError(400, "InvalidUri", "The requested URI does not represent any resource on the server.");
    if (req.method === "PUT") {
      if (req.headers["x-ms-blob-type"] !== "BlockBlob")
        return storageError(
          400,
          "MissingRequiredHeader",
          "An HTTP header that's mandatory for this request is not specified.",
        );
      if (size > MAX_BLOB_BYTES) return storageError(413, "RequestBodyTooLarge", "The request body is too large.");
      blobs.set(name, body);
      saveState();
      return send(201, "");
    }
    if (req.method === "GET") {
      const blob = blobs.get(name);
      if (!blob) return storageError(404, "BlobNotFound", "The specified blob does not exist.");
      return send(200, blob, "application/octet-stream");
    }
    return storageError(405, "UnsupportedHttpVerb", "The resource doesn't support the specified HTTP verb.");
  }

  const server = https.createServer(
    { key: options.key, cert: options.cert },
    (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const limit = (req.url ?? "").startsWith("/_blobs/") ? MAX_BLOB_BYTES : MAX_BODY_BYTES;
      req.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size <= limit) chunks.push(chunk);
      });
      req.on("error", () => res.destroy());
      req.on("end", () => {
        const path = requestUrl(req).pathname;
        const send = (response: ArmResponse) => {
          requests.push({ method: req.method ?? "", path, status: response.status });
          // Reads change state too (a poll advances its operation; a run advances when read).
          saveState();
          const text = response.body === undefined ? "" : JSON.stringify(response.body);
          res.writeHead(response.status, {
            ...(text ? { "Content-Type": "application/json; charset=utf-8" } : {}),
            "x-ms-request-id": crypto.randomUUID(),
            ...(response.headers ?? {}),
          });
          res.end(text);
        };
        const fail = (error: unknown) => {
          if (error instanceof ArmError)
            send({
              status: error.status,
              body: { error: { code: error.code, message: error.message } },
              headers: { ...error.headers },
            });
          else send({ status: 500, body: { error: { code: "InternalServerError", message: String(error) } } });
        };
        if (path.startsWith("/_blobs/")) return answerBlob(req, res, path, Buffer.concat(chunks), size);
        if (size > MAX_BODY_BYTES)
          return fail(new ArmError(413, "RequestEntityTooLarge", "The request content is too large."));
        answer(req, Buffer.concat(chunks).toString("utf8")).then(send, fail);
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  });
  baseUrl = `https://${options.host ?? "127.0.0.1"}:${(server.address() as AddressInfo).port}`;
  arm.url = baseUrl;
  arm.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return arm;
}

/** ARM's `AuthorizationFailed` (403) for `action` at `scope`, word for word. */
export function authorizationFailed(objectId: string, action: string, scope: string): ArmError {
  return new ArmError(
    403,
    "AuthorizationFailed",
    `The client '${objectId}' with object id '${objectId}' does not have authorization to perform action '${action}' over scope '${scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.`,
  );
}

/** If-Match / If-None-Match against the stored ETag: 412 `PreconditionFailed` when they do not hold. */
export function checkPreconditions(headers: IncomingHttpHeaders, existing: StoredResource | undefined): void {
  const ifMatch = headers["if-match"];
  const ifNoneMatch = headers["if-none-match"];
  if (ifMatch && ifMatch !== "*" && ifMatch !== existing?.etag)
    throw new ArmError(412, "PreconditionFailed", "The specified precondition 'If-Match' failed.");
  if (ifMatch === "*" && !existing)
    throw new ArmError(412, "PreconditionFailed", "The specified precondition 'If-Match' failed.");
  if (ifNoneMatch === "*" && existing)
    throw new ArmError(412, "PreconditionFailed", "The specified precondition 'If-None-Match' failed.");
}

/**
 * The request URL. Clients that join a scope starting with `/` to the endpoint send `//subscriptions/…`
 * (`@azure/arm-authorization` does); ARM collapses the slashes, and so must the parse (a leading `//`
 * would otherwise read as a host).
 */
function requestUrl(req: IncomingMessage): URL {
  return new URL((req.url ?? "/").replace(/^\/{2,}/, "/"), "https://127.0.0.1");
}

function apiVersionOf(req: ArmRequest): string {
  return req.query.get("api-version") ?? "";
}

function compilePattern(pattern: string): RegExp {
  const source = pattern
    .split("/")
    .map((segment) =>
      /^\{\*\w+\}$/.test(segment)
        ? "(.+?)"
        : /^\{\w+\}$/.test(segment)
          ? "([^/]+)"
          : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"),
    )
    .join("/");
  return new RegExp(`^${source}$`, "i");
}

function paramNames(pattern: string): string[] {
  return [...pattern.matchAll(/\{\*?(\w+)\}/g)].map((m) => m[1] ?? "");
}
