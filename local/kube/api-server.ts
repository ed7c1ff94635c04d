import { timingSafeEqual } from "node:crypto";
import { type IncomingMessage, request as httpRequest, type ServerResponse } from "node:http";
import { parse as parseYaml } from "yaml";
import type { Logger } from "../../shared/logging/logger.js";
import { applyConfiguration, checkFieldManager, recordUpdate, updateManager } from "./apply.js";
import type { DeleteOptions, Deleter, PropagationPolicy } from "./deletion.js";
import type { Kubelet } from "./kubelet.js";
import { admit, type Any, field, withSecretData } from "./objects.js";
import {
  apiVersionOf,
  findResource,
  groupList,
  groupOf,
  podStatusText,
  RESOURCES,
  type ResourceDef,
  resourceList,
  toTable,
} from "./resources.js";
import { type KubeObject, parseFieldSelector, parseLabelSelector, SelectorError, type Selector } from "./selectors.js";
import { KubeStatusError, notFound, type ObjectStore, type StoreEvent } from "./store.js";

/** A failure the server answers instead of serving (failure injection in tests). */
export interface FaultRule {
  /** HTTP method to match (any when absent). */
  method?: string;
  /** Matched against `path?query`. */
  path?: RegExp;
  status: 429 | 500 | 503;
  /** How many matching requests fail; then the rule is spent. */
  times: number;
  retryAfterSeconds?: number;
}

/** The Kubernetes version this server reports (`/version`, node `kubeletVersion`). */
export const KUBE_VERSION = {
  major: "1",
  minor: "32",
  gitVersion: "v1.32.0-blastplane-local",
  platform: "linux/amd64",
};

const BODY_LIMIT_BYTES = 3 * 1024 * 1024;
const STATUS_REASON: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  404: "NotFound",
  405: "MethodNotAllowed",
  409: "Conflict",
  415: "UnsupportedMediaType",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
};

function statusBody(code: number, reason: string, message: string, details?: Record<string, unknown>): Any {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendStatus(res: ServerResponse, error: KubeStatusError, headers: Record<string, string> = {}): void {
  sendJson(res, error.code, statusBody(error.code, error.reason, error.message, error.details), headers);
}

async function readBody(req: IncomingMessage, yaml = false): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT_BYTES)
      throw new KubeStatusError(413, "RequestEntityTooLarge", "the request body is too large");
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    // An apply patch is YAML (JSON being YAML too); every other body is JSON.
    return yaml ? parseYaml(text) : JSON.parse(text);
  } catch {
    throw new KubeStatusError(400, "BadRequest", `the request body is not valid ${yaml ? "YAML" : "JSON"}`);
  }
}

/** RFC 7386 merge patch (strategic merge patches are read as merge patches here). */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out: Any =
    target !== null && typeof target === "object" && !Array.isArray(target) ? { ...(target as Any) } : {};
  for (const [k, v] of Object.entries(patch as Any)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

interface Route {
  def: ResourceDef;
  namespace: string | undefined;
  name: string | undefined;
  sub: string | undefined;
}

/** `/api/v1/...` and `/apis/<group>/<version>/...` into a resource route. */
function route(segments: string[]): Route | undefined {
  let group = "";
  let version: string | undefined;
  let rest: string[];
  if (segments[0] === "api") {
    version = segments[1];
    rest = segments.slice(2);
  } else if (segments[0] === "apis") {
    group = segments[1] ?? "";
    version = segments[2];
    rest = segments.slice(3);
  } else return undefined;
  if (!version || rest.length === 0) return undefined;
  let namespace: string | undefined;
  if (rest[0] === "namespaces" && rest.length >= 3 && !group) {
    const inner = findResource(group, version, rest[2] ?? "");
    if (inner?.namespaced) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
  } else if (rest[0] === "namespaces" && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const def = findResource(group, version, rest[0] ?? "");
  if (!def || rest.length > 3) return undefined;
  if (def.namespaced && namespace === undefined && rest.length > 1) return undefined;
  return { def, namespace, name: rest[1], sub: rest[2] };
}

interface OpenWatch {
  expire(): void;
}

/**
 * The HTTP face of the local cluster: discovery, CRUD, list/watch with label and field selectors,
 * server-side printing (Tables) for kubectl, pod logs, deletion with propagation, bearer-token
 * authentication, `Status` errors, request counting (`/metrics`) and injected failures.
 */
/** Default bound of the bytes a watch may have queued for its client (see the `watchBufferLimitBytes` option). */
export const DEFAULT_WATCH_BUFFER_BYTES = 16 * 1024 * 1024;

export class ApiServer {
  /** Requests served, by `VERB resource[/sub] code` (what the bench and tests count). */
  readonly requests = new Map<string, number>();
  /** Bodies of objects created through the API, newest last (tests validate them against the schemas). */
  readonly created: { resource: string; body: unknown }[] = [];
  private readonly faults: FaultRule[] = [];
  private readonly watches = new Set<OpenWatch>();
  /** Watches dropped because their client did not read fast enough. */
  droppedWatches = 0;
  private readonly token: Buffer;

  constructor(
    private readonly o: {
      store: ObjectStore;
      deleter: Deleter;
      kubelet: Kubelet;
      token: string;
      logger: Logger;
      /** Interval of BOOKMARK events on watches that allow them. */
      bookmarkIntervalMs: number;
      /**
       * Bytes a watch may have waiting for its client before the server drops it (default
       * {@link DEFAULT_WATCH_BUFFER_BYTES}); Kubernetes likewise closes a watcher too slow to keep up.
       */
      watchBufferLimitBytes?: number;
    },
  ) {
    this.token = Buffer.from(o.token);
  }

  /** Makes the next `times` requests matching the rule fail with its status. */
  inject(rule: FaultRule): void {
    this.faults.push({ ...rule });
  }

  /** Ends every open watch with `ERROR 410 Expired` and compacts history, as after etcd compaction. */
  expireWatches(): void {
    this.o.store.compact();
    for (const w of [...this.watches]) w.expire();
  }

  /** Requests whose key (`VERB resource code`) matches `filter`, summed. */
  count(filter: (key: string) => boolean = () => true): number {
    let n = 0;
    for (const [k, v] of this.requests) if (filter(k)) n += v;
    return n;
  }

  /** Closes open watches (the server is stopping). */
  closeWatches(): void {
    for (const w of [...this.watches]) w.expire();
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((error: unknown) => {
      if (error instanceof KubeStatusError) return sendStatus(res, error);
      this.o.logger.error("local API server request failed", { error, url: req.url });
      if (!res.headersSent)
        sendJson(
          res,
          500,
          statusBody(500, "InternalError", "an error on the server has prevented the request from succeeding"),
        );
      else res.destroy();
    });
  };

  private record(verb: string, resource: string, code: number): void {
    const key = `${verb} ${resource} ${code}`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
  }

  private authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization ?? "";
    // The scheme is case-insensitive (RFC 9110 §11.1): "bearer" and "BEARER" are the same scheme.
    const match = /^bearer +(\S+) *$/i.exec(header);
    const given = Buffer.from(match?.[1] ?? "");
    return given.length === this.token.length && timingSafeEqual(given, this.token);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://local");
    const method = req.method ?? "GET";
    const segments = url.pathname.split("/").filter(Boolean);
    if (["/healthz", "/livez", "/readyz"].includes(url.pathname)) {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("ok");
      return;
    }
    if (url.pathname === "/version")
      return sendJson(res, 200, {
        ...KUBE_VERSION,
        gitCommit: "",
        gitTreeState: "clean",
        buildDate: "2026-01-01T00:00:00Z",
        goVersion: "n/a",
        compiler: "n/a",
      });
    if (!this.authorized(req)) return sendJson(res, 401, statusBody(401, "Unauthorized", "Unauthorized"));
    const fault = this.faults.find(
      (f) =>
        f.times > 0 && (!f.method || f.method === method) && (!f.path || f.path.test(`${url.pathname}${url.search}`)),
    );
    if (fault) {
      fault.times--;
      this.record(method, `fault:${url.pathname}`, fault.status);
      const message =
        fault.status === 429
          ? "the server has received too many requests and has asked us to try again later"
          : "an error on the server has prevented the request from succeeding";
      return sendJson(
        res,
        fault.status,
        statusBody(fault.status, STATUS_REASON[fault.status] ?? "InternalError", message),
        fault.retryAfterSeconds ? { "Retry-After": String(fault.retryAfterSeconds) } : {},
      );
    }
    if (url.pathname === "/metrics") {
      const lines = ["# TYPE apiserver_request_total counter"];
      for (const [key, n] of this.requests) {
        const [verb, resource, code] = key.split(" ");
        lines.push(`apiserver_request_total{verb="${verb}",resource="${resource}",code="${code}"} ${n}`);
      }
      res.writeHead(200, { "Content-Type": "text/plain; version=0.0.4" });
      res.end(`${lines.join("\n")}\n`);
      return;
    }
    if (method === "GET") {
      const discovery = this.discovery(url.pathname, segments);
      if (discovery) return sendJson(res, 200, discovery);
    }
    if (segments[0] === "api" && segments[2] === "namespaces" && segments[4] === "services" && segments[6] === "proxy")
      return this.serviceProxy(req, res, url, segments);
    const r = route(segments);
    if (!r) throw new KubeStatusError(404, "NotFound", "the server could not find the requested resource");
    try {
      await this.resource(req, res, url, method, r);
    } catch (error) {
      if (error instanceof SelectorError) throw new KubeStatusError(400, "BadRequest", error.message);
      throw error;
    }
  }

  private discovery(pathname: string, segments: string[]): Any | undefined {
    if (pathname === "/api")
      return {
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: "127.0.0.1" }],
      };
    if (pathname === "/apis") return groupList();
    if (segments[0] === "api" && segments.length === 2) return resourceList("", segments[1] ?? "");
    if (segments[0] === "apis" && segments.length === 2 && RESOURCES.some((r) => r.group === segments[1]))
      return groupOf(segments[1] ?? "");
    if (segments[0] === "apis" && segments.length === 3) return resourceList(segments[1] ?? "", segments[2] ?? "");
    return undefined;
  }

  private async resource(req: IncomingMessage, res: ServerResponse, url: URL, method: string, r: Route): Promise<void> {
    const { def, namespace, name, sub } = r;
    const q = url.searchParams;
    const label = `${def.plural}${sub ? `/${sub}` : ""}`;
    const wantsTable = (req.headers.accept ?? "").includes("as=Table");
    const manager = () => updateManager(q.get("fieldManager"), req.headers["user-agent"]);
    const respond = (verb: string, code: number, body: unknown) => {
      this.record(verb, label, code);
      sendJson(res, code, body);
    };
    try {
      if (method === "GET" && name === undefined) {
        const selector = this.selector(q, namespace);
        if (q.get("watch") === "true" || q.get("watch") === "1") {
          this.record("WATCH", label, 200);
          return this.watch(req, res, def, selector, q);
        }
        const items = this.o.store.list(def.plural, namespace, selector);
        const rv = this.o.store.resourceVersion;
        if (wantsTable) return respond("LIST", 200, toTable(def.plural, items, rv));
        return respond("LIST", 200, {
          kind: `${def.kind}List`,
          apiVersion: apiVersionOf(def),
          metadata: { resourceVersion: rv },
          items,
        });
      }
      if (method === "GET" && name !== undefined && sub === "log") return this.logs(res, namespace, name, q, label);
      if (method === "GET" && name !== undefined) {
        const obj = this.o.store.get(def.plural, namespace, name);
        if (!obj) throw notFound(def.plural, name);
        return respond("GET", 200, wantsTable && !sub ? toTable(def.plural, [obj], this.o.store.resourceVersion) : obj);
      }
      if (method === "POST" && name === undefined) {
        const body = (await readBody(req)) as KubeObject | undefined;
        if (!body || typeof body !== "object")
          throw new KubeStatusError(400, "BadRequest", "the request body must be an object");
        this.created.push({ resource: def.plural, body: structuredClone(body) });
        if (this.created.length > 1000) this.created.shift();
        checkFieldManager(q.get("fieldManager"), false);
        const admitted = admit(def, namespace, body, this.o.store);
        admitted.metadata.managedFields = recordUpdate(undefined, body, manager(), apiVersionOf(def));
        if (q.get("dryRun") === "All") return respond("POST", 201, admitted);
        return respond("POST", 201, this.o.store.create(def.plural, admitted));
      }
      const type = req.headers["content-type"] ?? "application/json";
      if (method === "PATCH" && name !== undefined && /^application\/apply-patch\+yaml/.test(type)) {
        return this.apply(req, q, r, name, respond);
      }
      if ((method === "PUT" || method === "PATCH") && name !== undefined) {
        const body = await readBody(req);
        if (method === "PATCH" && !/merge-patch\+json|strategic-merge-patch\+json/.test(type)) {
          throw new KubeStatusError(
            415,
            "UnsupportedMediaType",
            `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml`,
          );
        }
        checkFieldManager(q.get("fieldManager"), false);
        if (q.has("force")) throw new KubeStatusError(400, "BadRequest", "force is only allowed for apply patches");
        const expectedRv = method === "PUT" ? field<string>(body, "metadata", "resourceVersion") : undefined;
        const change = (current: KubeObject): KubeObject => {
          const next = (method === "PUT" ? structuredClone(body) : mergePatch(current, body)) as KubeObject;
          // The status subresource changes status only; the main resource leaves status alone.
          if (sub === "status") return { ...current, status: next.status };
          const replaced = { ...next, apiVersion: current.apiVersion, kind: current.kind, status: current.status };
          replaced.metadata = {
            ...replaced.metadata,
            managedFields: recordUpdate(current, replaced, manager(), apiVersionOf(def)),
          };
          return def.plural === "secrets" ? withSecretData(replaced) : replaced;
        };
        // dryRun=All (kubectl --dry-run=server): the object as it would be, nothing stored.
        if (q.get("dryRun") === "All") {
          const current = this.o.store.get(def.plural, namespace, name);
          if (!current) throw notFound(def.plural, name);
          return respond(method, 200, change(current));
        }
        const updated = this.o.store.update(def.plural, namespace, name, change, expectedRv);
        return respond(method, 200, updated);
      }
      if (method === "DELETE") {
        const body = ((await readBody(req)) ?? {}) as Any;
        const options: DeleteOptions = {
          propagationPolicy: (q.get("propagationPolicy") ?? body.propagationPolicy) as PropagationPolicy | undefined,
          gracePeriodSeconds: q.has("gracePeriodSeconds")
            ? Number(q.get("gracePeriodSeconds"))
            : (body.gracePeriodSeconds as number | undefined),
          orphanDependents: q.has("orphanDependents")
            ? q.get("orphanDependents") === "true"
            : (body.orphanDependents as boolean | undefined),
        };
        if (options.propagationPolicy && !["Background", "Foreground", "Orphan"].includes(options.propagationPolicy)) {
          throw new KubeStatusError(
            422,
            "Invalid",
            `DeleteOptions.meta.k8s.io is invalid: propagationPolicy: Unsupported value: "${options.propagationPolicy}"`,
          );
        }
        if (name === undefined) {
          const items = this.o.store.list(def.plural, namespace, this.selector(q, namespace));
          for (const item of items) {
            try {
              this.o.deleter.delete(def.plural, item.metadata.namespace, item.metadata.name, options);
            } catch (error) {
              if (!(error instanceof KubeStatusError && error.code === 404)) throw error;
            }
          }
          return respond("DELETECOLLECTION", 200, {
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Success",
            details: { kind: def.plural, group: def.group },
          });
        }
        const { object, gone } = this.o.deleter.delete(def.plural, namespace, name, options);
        if (!gone || def.plural === "pods") return respond("DELETE", 200, object);
        return respond("DELETE", 200, {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Success",
          details: { name, group: def.group, kind: def.plural, uid: object.metadata.uid },
        });
      }
      throw new KubeStatusError(
        405,
        "MethodNotAllowed",
        `the server does not allow this method on the requested resource`,
      );
    } catch (error) {
      if (error instanceof KubeStatusError)
        this.record(method === "GET" && name === undefined ? "LIST" : method, label, error.code);
      throw error;
    }
  }

  /**
   * Server-side apply (`PATCH` with `application/apply-patch+yaml`): creates the object when it is
   * missing, else merges the configuration in under the request's field manager, refusing with 409
   * Conflict a change to fields another manager owns unless `force=true` (see `apply.ts`).
   */
  private async apply(
    req: IncomingMessage,
    q: URLSearchParams,
    r: Route,
    name: string,
    respond: (verb: string, code: number, body: unknown) => void,
  ): Promise<void> {
    const { def, namespace, sub } = r;
    const fieldManager = q.get("fieldManager");
    checkFieldManager(fieldManager, true);
    if (sub) throw new KubeStatusError(400, "BadRequest", `apply to the ${sub} subresource is not supported here`);
    const force = q.get("force");
    if (force !== null && force !== "true" && force !== "false")
      throw new KubeStatusError(400, "BadRequest", `invalid value for force: "${force}"`);
    const body = (await readBody(req, true)) as KubeObject | undefined;
    if (!body || typeof body !== "object" || Array.isArray(body) || typeof body.metadata !== "object")
      throw new KubeStatusError(400, "BadRequest", "the apply configuration must be an object with metadata");
    const apiVersion = apiVersionOf(def);
    if (body.apiVersion !== apiVersion || body.kind !== def.kind)
      throw new KubeStatusError(
        400,
        "BadRequest",
        `the apply configuration is ${String(body.apiVersion)}, Kind=${String(body.kind)}; the endpoint serves ${apiVersion}, Kind=${def.kind}`,
      );
    if (body.metadata.name !== name)
      throw new KubeStatusError(
        400,
        "BadRequest",
        `the name of the object (${String(body.metadata.name)}) does not match the name on the URL (${name})`,
      );
    if (def.namespaced && body.metadata.namespace !== undefined && body.metadata.namespace !== namespace)
      throw new KubeStatusError(
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    const options = {
      manager: String(fieldManager),
      force: force === "true",
      apiVersion,
      kind: def.kind,
      resource: def.plural,
    };
    const dryRun = q.get("dryRun") === "All";
    const current = this.o.store.get(def.plural, namespace, name);
    if (!current) {
      const { object, managedFields } = applyConfiguration(undefined, body, options);
      const admitted = admit(def, namespace, object, this.o.store);
      admitted.metadata.managedFields = managedFields;
      if (dryRun) return respond("APPLY", 201, admitted);
      this.created.push({ resource: def.plural, body: structuredClone(body) });
      if (this.created.length > 1000) this.created.shift();
      return respond("APPLY", 201, this.o.store.create(def.plural, admitted));
    }
    const change = (latest: KubeObject): KubeObject => {
      const { object, managedFields } = applyConfiguration(latest, body, options);
      const next = { ...object, status: latest.status, metadata: { ...object.metadata, managedFields } };
      return def.plural === "secrets" ? withSecretData(next) : next;
    };
    if (dryRun) return respond("APPLY", 200, change(current));
    return respond("APPLY", 200, this.o.store.update(def.plural, namespace, name, change));
  }

  /**
   * The Service proxy (`/api/v1/namespaces/{ns}/services/{name}[:{port}]/proxy/{path}`), as
   * `kubectl proxy` and the API server's clients use it: the request goes to a Ready pod the
   * Service selects, on the pod's port its `targetPort` names, and the answer streams back. As the
   * API server does, the caller's `Authorization` (which authenticated it here) is not passed on.
   * No Ready pod: 503 `no endpoints available for service "…"`; the pod refusing the connection:
   * 503 `error trying to reach service: …`.
   */
  private serviceProxy(req: IncomingMessage, res: ServerResponse, url: URL, segments: string[]): void {
    const method = req.method ?? "GET";
    const label = "services/proxy";
    const namespace = segments[3] ?? "";
    // `name`, `name:port` or `scheme:name:port` (only http is served here).
    const refusal = (code: number, reason: string, message: string) => {
      this.record(method, label, code);
      return new KubeStatusError(code, reason, message);
    };
    let reference: string;
    try {
      reference = decodeURIComponent(segments[5] ?? "");
    } catch {
      // A malformed escape in the name is the caller's mistake (400), never a server fault.
      throw refusal(400, "BadRequest", "the service name in the proxy path is not a valid escaped segment");
    }
    const parts = reference.split(":");
    const [name, portRef] = parts.length === 3 ? [parts[1] ?? "", parts[2]] : [parts[0] ?? "", parts[1]];
    const service = this.o.store.get("services", namespace, name);
    if (!service) throw refusal(404, "NotFound", `services "${name}" not found`);
    const ports = field<Any[]>(service, "spec", "ports") ?? [];
    const port =
      portRef === undefined || portRef === ""
        ? ports.length === 1
          ? ports[0]
          : undefined
        : ports.find((p) => p.name === portRef || String(p.port) === portRef);
    if (!port) throw refusal(503, "ServiceUnavailable", `no endpoints available for service "${name}"`);
    const selector = field<Record<string, string>>(service, "spec", "selector") ?? {};
    const selected = (o: KubeObject) =>
      Object.keys(selector).length > 0 &&
      Object.entries(selector).every(([k, v]) => o.metadata.labels?.[k] === v) &&
      (field<{ type: string; status: string }[]>(o, "status", "conditions") ?? []).some(
        (c) => c.type === "Ready" && c.status === "True",
      );
    const endpoints = this.o.store.list("pods", namespace, selected).flatMap((pod) => {
      const target = port.targetPort ?? port.port;
      const containerPort =
        typeof target === "number"
          ? target
          : (field<Any[]>(pod, "spec", "containers") ?? [])
              .flatMap((c) => (c.ports as Any[] | undefined) ?? [])
              .find((p) => p.name === target)?.containerPort;
      const hostPort =
        containerPort === undefined
          ? undefined
          : this.o.kubelet.hostPort(String(pod.metadata.uid), Number(containerPort));
      return hostPort === undefined ? [] : [hostPort];
    });
    const hostPort = endpoints[0];
    if (hostPort === undefined)
      throw refusal(503, "ServiceUnavailable", `no endpoints available for service "${name}"`);
    const headers = { ...req.headers };
    delete headers.authorization;
    delete headers.host;
    const upstream = httpRequest(
      {
        host: "127.0.0.1",
        port: hostPort,
        method,
        path: `/${segments.slice(7).join("/")}${url.pathname.endsWith("/") && segments.length > 7 ? "/" : ""}${url.search}`,
        headers,
      },
      (answer) => {
        this.record(method, label, answer.statusCode ?? 502);
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.once("error", (error) => {
      if (res.headersSent) {
        res.destroy(error);
        return;
      }
      this.record(method, label, 503);
      sendJson(res, 503, statusBody(503, "ServiceUnavailable", `error trying to reach service: ${error.message}`));
    });
    res.once("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  private selector(q: URLSearchParams, namespace: string | undefined): Selector {
    const labels = parseLabelSelector(q.get("labelSelector") ?? undefined);
    const fields = parseFieldSelector(q.get("fieldSelector") ?? undefined);
    return (o) => (namespace === undefined || o.metadata.namespace === namespace) && labels(o) && fields(o);
  }

  private logs(
    res: ServerResponse,
    namespace: string | undefined,
    name: string,
    q: URLSearchParams,
    label: string,
  ): void {
    const pod = this.o.store.get("pods", namespace, name);
    if (!pod) {
      this.record("GET", label, 404);
      throw notFound("pods", name);
    }
    const container = q.get("container") ?? String(field(pod, "spec", "containers", "0", "name"));
    const named = (field<Record<string, unknown>[]>(pod, "spec", "containers") ?? []).some((c) => c.name === container);
    if (!named) {
      this.record("GET", label, 400);
      throw new KubeStatusError(400, "BadRequest", `container ${container} is not valid for pod ${name}`);
    }
    const buffer = this.o.kubelet.logs(String(pod.metadata.uid), container);
    if (!buffer || (field(pod, "status", "phase") === "Pending" && buffer.text() === "")) {
      this.record("GET", label, 400);
      throw new KubeStatusError(
        400,
        "BadRequest",
        `container "${container}" in pod "${name}" is waiting to start: ${podStatusText(pod)}`,
      );
    }
    this.record("GET", label, 200);
    let text = buffer.text();
    const tail = q.get("tailLines");
    if (tail !== null) {
      const lines = text.split("\n");
      const ending = lines.at(-1) === "" ? lines.pop() : undefined;
      text = lines.slice(-Math.max(0, Number(tail))).join("\n") + (ending === "" ? "\n" : "");
    }
    const limit = q.get("limitBytes");
    if (limit !== null)
      text = Buffer.from(text)
        .subarray(0, Math.max(0, Number(limit)))
        .toString("utf8");
    res.writeHead(200, { "Content-Type": "text/plain" });
    res.write(text);
    if (q.get("follow") !== "true" || buffer.ended) {
      res.end();
      return;
    }
    const stop = buffer.follow((chunk) => (chunk ? res.write(chunk) : res.end()));
    res.once("close", stop);
  }

  /**
   * A watch: events after `resourceVersion` (410 Gone when it was compacted away), or the current
   * objects as ADDED first when none is given; changes into or out of the selector's set arrive as
   * ADDED and DELETED; BOOKMARKs carry the current version when `allowWatchBookmarks=true`.
   */
  private watch(
    req: IncomingMessage,
    res: ServerResponse,
    def: ResourceDef,
    selector: Selector,
    q: URLSearchParams,
  ): void {
    res.writeHead(200, { "Content-Type": "application/json", "Transfer-Encoding": "chunked" });
    // A client that does not read leaves events queued in this process: beyond the bound the watch
    // is dropped (the connection cut, its queue freed), and the client lists and watches again, as
    // after Kubernetes' "Forcing watcher close due to unresponsiveness". The initial burst (the
    // current objects, or the backlog since the given version) is written at once, so the bound
    // applies on top of what of it is still queued.
    let bufferLimit = Number.POSITIVE_INFINITY;
    let closed = false;
    let bookmarks: NodeJS.Timeout | undefined;
    let timeout: NodeJS.Timeout | undefined;
    const write = (type: string, object: unknown) => {
      if (closed) return;
      res.write(`${JSON.stringify({ type, object })}\n`);
      if (res.writableLength > bufferLimit) {
        this.o.logger.warn("dropping a watch whose client does not keep up", {
          resource: def.plural,
          buffered_bytes: res.writableLength,
        });
        this.droppedWatches++;
        close();
        res.destroy();
      }
    };
    const expired = (rv: string) =>
      write("ERROR", statusBody(410, "Expired", `too old resource version: ${rv} (${this.o.store.resourceVersion})`));
    const rvParam = q.get("resourceVersion") ?? "";
    const translate = (event: StoreEvent): [string, KubeObject] | undefined => {
      if (event.resource !== def.plural) return undefined;
      const isIn = selector(event.object);
      const wasIn = event.previous ? selector(event.previous) : false;
      if (event.type === "ADDED") return isIn ? ["ADDED", event.object] : undefined;
      if (event.type === "DELETED") return isIn ? ["DELETED", event.object] : undefined;
      if (isIn && wasIn) return ["MODIFIED", event.object];
      if (isIn) return ["ADDED", event.object];
      if (wasIn) return ["DELETED", event.object];
      return undefined;
    };
    const close = () => {
      if (closed) return;
      closed = true;
      unsubscribe();
      clearInterval(bookmarks);
      clearTimeout(timeout);
      this.watches.delete(handle);
      res.end();
    };
    const handle: OpenWatch = {
      expire: () => {
        if (closed) return;
        expired(rvParam);
        close();
      },
    };
    // Backlog and subscription in one turn of the event loop: no change falls between them.
    const unsubscribe = this.o.store.subscribe((event) => {
      const t = translate(event);
      if (t) write(t[0], t[1]);
    });
    if (rvParam === "" || rvParam === "0") {
      for (const obj of this.o.store.list(def.plural, undefined, selector)) write("ADDED", obj);
    } else {
      const backlog = this.o.store.eventsSince(Number(rvParam));
      if (!backlog || !/^\d+$/.test(rvParam)) {
        expired(rvParam);
        closed = true;
        unsubscribe();
        res.end();
        return;
      }
      for (const event of backlog) {
        const t = translate(event);
        if (t) write(t[0], t[1]);
      }
    }
    bufferLimit = res.writableLength + (this.o.watchBufferLimitBytes ?? DEFAULT_WATCH_BUFFER_BYTES);
    bookmarks = setInterval(() => {
      if (q.get("allowWatchBookmarks") === "true")
        write("BOOKMARK", {
          kind: def.kind,
          apiVersion: apiVersionOf(def),
          metadata: { resourceVersion: this.o.store.resourceVersion },
        });
    }, this.o.bookmarkIntervalMs);
    bookmarks.unref();
    const timeoutSeconds = Number(q.get("timeoutSeconds") ?? 1800);
    timeout = setTimeout(close, Math.max(1, timeoutSeconds) * 1000);
    timeout.unref();
    this.watches.add(handle);
    req.once("close", close);
    res.once("close", close);
  }
}
