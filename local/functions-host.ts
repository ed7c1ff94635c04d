import { randomUUID } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { pathToFileURL } from "node:url";
import { errorEnvelope, INTERNAL_ERROR_DETAIL } from "../shared/http/envelope.js";
import { REQUEST_ID_HEADER, resolveRequestId } from "../shared/http/request-id.js";
import { NOSNIFF_HEADERS } from "../shared/http/security-headers.js";
import type { Logger } from "../shared/logging/logger.js";
import {
  type CoreBinding,
  type CoreFunctionMetadata,
  FunctionsCoreRegistry,
  type InvocationContextLike,
  installFunctionsCore,
  type RegisteredFunction,
} from "./functions-core.js";
import { createRouteTable } from "./route-template.js";

/** Durable trigger types, handed to the durable backend rather than served. */
export const DURABLE_TRIGGER_TYPES = new Set(["orchestrationTrigger", "activityTrigger", "entityTrigger"]);
const CLIENT_INPUT_TYPES = new Set(["durableClient", "orchestrationClient"]);

/** What `df.getClient` reads from its input binding. */
export interface DurableClientInputData {
  taskHubName: string;
  creationUrls: Record<string, string>;
  managementUrls: Record<string, string>;
  baseUrl: string;
  requiredQueryStringParameters: string;
  rpcBaseUrl: string;
}

export interface InvocationOutcome {
  context: InvocationContextLike;
  result: unknown;
}

/** Azure Functions' default request body limit (`FUNCTIONS_REQUEST_BODY_SIZE_LIMIT`, 100 MB). */
export const DEFAULT_MAX_REQUEST_BODY_BYTES = 104_857_600;

export interface LocalFunctionsHostOptions {
  logger: Logger;
  /** Bodies over this many bytes get 413 from the host itself, as on Azure (default 100 MB). */
  maxRequestBodyBytes?: number;
  /** Azure's `extensions.http.routePrefix` (host.json); `api` by default. */
  routePrefix?: string;
  /** Supplies the durable client binding's data; required when any function binds a durable client. */
  durableClientInput?: () => DurableClientInputData;
}

function triggerOf(metadata: CoreFunctionMetadata): [string, CoreBinding] {
  for (const entry of Object.entries(metadata.bindings)) {
    if (/trigger$/i.test(entry[1].type)) return entry;
  }
  throw new Error(`function "${metadata.name}" has no trigger binding`);
}

/** Where listeners that name no address bind while {@link listeningOnLoopback} runs. */
const LOOPBACK = "127.0.0.1";

/**
 * Runs `start` while `listen` calls that name no address bind to IPv4 loopback instead of every
 * interface. `setupHttpProxy` of `@azure/functions` (run by `getCapabilities` when HTTP streaming
 * is on) calls `server.listen()` with no host, which binds `*:<port>` on IPv4 and IPv6; its proxy
 * takes any request that names an invocation id and has no authentication of its own. On Azure the
 * worker sits in a sandbox; locally it would be reachable from the network. Only calls made while
 * `start` runs are changed (the proxy listens, and may re-listen on another port, before it
 * resolves); the original method is restored afterwards.
 */
export async function listeningOnLoopback<T>(start: () => Promise<T>): Promise<T> {
  const original = net.Server.prototype.listen;
  const patched = function (this: net.Server, ...args: unknown[]) {
    return Reflect.apply(original, this, loopbackListenArgs(args));
  };
  net.Server.prototype.listen = patched as typeof original;
  try {
    return await start();
  } finally {
    if (net.Server.prototype.listen === patched) net.Server.prototype.listen = original;
  }
}

/** The `listen` arguments with a loopback host added where none (and no path or handle) is given. */
function loopbackListenArgs(args: unknown[]): unknown[] {
  const [first, second] = args;
  const callbacks = args.filter((a) => typeof a === "function");
  // listen(), listen(callback)
  if (first === undefined || typeof first === "function") return [{ port: 0, host: LOOPBACK }, ...callbacks];
  // listen(port[, backlog][, callback]): a string second argument is a host and stays.
  if (typeof first === "number" && typeof second !== "string") {
    const backlog = typeof second === "number" ? { backlog: second } : {};
    return [{ port: first, host: LOOPBACK, ...backlog }, ...callbacks];
  }
  // listen({ port }) without host, path or handle.
  if (typeof first === "object" && first !== null && !("host" in first) && !("path" in first) && !("fd" in first)) {
    if (!("handle" in first) && !("_handle" in first)) return [{ ...first, host: LOOPBACK }, ...args.slice(1)];
  }
  return args;
}

function headerRecord(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  }
  return out;
}

function sendJsonError(
  res: http.ServerResponse,
  status: number,
  detail: string,
  requestId: string,
  extra: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorEnvelope(detail, requestId));
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
    ...NOSNIFF_HEADERS,
    [REQUEST_ID_HEADER]: requestId,
    ...extra,
  });
  res.end(body);
}

/**
 * The embedded Functions host: loads an app built on `@azure/functions` and `durable-functions`
 * exactly as Azure's Node worker would (through `@azure/functions-core`), serves its HTTP triggers
 * with Azure's route templates and route prefix, and invokes any function through the library's
 * own invocation model. HTTP bodies are streamed both ways via the library's HTTP proxy, as on
 * Azure with `app.setup({ enableHttpStream: true })`.
 */
export class LocalFunctionsHost {
  readonly registry: FunctionsCoreRegistry;
  private readonly logger: Logger;
  private readonly routePrefix: string;
  private readonly maxRequestBodyBytes: number;
  private httpProxyUri: string | undefined;
  private routeTable: ReturnType<typeof createRouteTable<RegisteredFunction>> | undefined;

  constructor(private readonly options: LocalFunctionsHostOptions) {
    this.logger = options.logger;
    this.routePrefix = (options.routePrefix ?? "api").replace(/^\/+|\/+$/g, "");
    this.maxRequestBodyBytes = options.maxRequestBodyBytes ?? DEFAULT_MAX_REQUEST_BODY_BYTES;
    this.registry = new FunctionsCoreRegistry((level, category, message) => {
      const lvl = level === "error" || level === "critical" ? "error" : level === "warning" ? "warn" : "debug";
      this.logger[lvl](message, { category });
    });
    installFunctionsCore(this.registry);
  }

  /** Imports the app (its registrations reach the registry) and prepares routes. */
  async load(entryPath: string): Promise<void> {
    await import(pathToFileURL(entryPath).href);
    await this.prepare();
  }

  /** For apps imported by other means (tests): reads the registry and prepares routes. */
  async prepare(): Promise<void> {
    const model = this.registry.programmingModel;
    if (!model) throw new Error("the app registered no functions through @azure/functions");
    const capabilities = await listeningOnLoopback(() => model.getCapabilities({}));
    // The library announces "localhost"; on hosts without IPv6 that name may resolve to an address
    // its proxy does not listen on, so talk to it over IPv4 loopback.
    this.httpProxyUri = capabilities.HttpUri?.replace("//localhost:", "//127.0.0.1:");
    const httpEntries: { template: string; methods: string[]; value: RegisteredFunction }[] = [];
    for (const fn of this.registry.functions.values()) {
      const [, trigger] = triggerOf(fn.metadata);
      for (const [name, binding] of Object.entries(fn.metadata.bindings)) {
        if (binding.direction === "in" && !/trigger$/i.test(binding.type) && !CLIENT_INPUT_TYPES.has(binding.type)) {
          throw new Error(
            `function "${fn.metadata.name}": input binding "${name}" of type ${binding.type} is not supported locally`,
          );
        }
      }
      if (trigger.type === "httpTrigger") {
        if (!this.httpProxyUri) {
          throw new Error("HTTP triggers need app.setup({ enableHttpStream: true }) (the local host streams bodies)");
        }
        httpEntries.push({
          template: (trigger.route ?? fn.metadata.name).replace(/^\/+/, ""),
          methods: (trigger.methods ?? ["GET", "POST"]).map((m) => m.toUpperCase()),
          value: fn,
        });
      }
    }
    this.routeTable = createRouteTable(httpEntries);
    await this.registry.runHooks("appStart", { hookData: {}, appHookData: {} });
  }

  /** Functions whose trigger has the given type. */
  functionsByTrigger(type: string): RegisteredFunction[] {
    return [...this.registry.functions.values()].filter((f) => triggerOf(f.metadata)[1].type === type);
  }

  getFunction(name: string): RegisteredFunction | undefined {
    return this.registry.functions.get(name);
  }

  /**
   * Invokes a function through the library's invocation model with the trigger's data and any
   * extra inputs the host supplies. Returns the invocation context (durable orchestrations expose
   * their replay state on it) and the handler's result.
   */
  async invoke(
    fn: RegisteredFunction,
    triggerData: unknown,
    triggerMetadata: Record<string, unknown> = {},
    invocationId: string = randomUUID(),
  ): Promise<InvocationOutcome> {
    const model = this.registry.programmingModel;
    if (!model) throw new Error("no programming model");
    const [triggerName] = triggerOf(fn.metadata);
    const inputData = [{ name: triggerName, data: triggerData }, ...this.extraInputs(fn.metadata)];
    const invocation = model.getInvocationModel({
      invocationId,
      metadata: fn.metadata,
      request: { invocationId, inputData, triggerMetadata },
      log: (level: string, category: string, message: string) => {
        const lvl = level === "error" || level === "critical" ? "error" : level === "warning" ? "warn" : "info";
        this.logger[lvl](message, { function: fn.metadata.name, invocation_id: invocationId, category });
      },
      state: undefined,
    });
    const { context, inputs } = await invocation.getArguments();
    await this.registry.runHooks("preInvocation", { invocationContext: context, inputs, hookData: {} });
    const result = await invocation.invokeFunction(context, inputs, fn.callback);
    await this.registry.runHooks("postInvocation", { invocationContext: context, inputs, result, hookData: {} });
    await invocation.getResponse(context, result);
    return { context, result };
  }

  private extraInputs(metadata: CoreFunctionMetadata): { name: string; data: unknown }[] {
    const out: { name: string; data: unknown }[] = [];
    for (const [name, binding] of Object.entries(metadata.bindings)) {
      if (binding.direction === "in" && CLIENT_INPUT_TYPES.has(binding.type)) {
        const provider = this.options.durableClientInput;
        if (!provider)
          throw new Error(`function "${metadata.name}" binds a durable client but no durable backend runs`);
        out.push({ name, data: { string: JSON.stringify(provider()) } });
      }
    }
    return out;
  }

  /** Node `http` request listener serving the app's HTTP triggers under the route prefix. */
  readonly handleHttp = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const requestId = resolveRequestId(req.headers[REQUEST_ID_HEADER.toLowerCase()] as string | undefined);
    this.serveHttp(req, res, requestId).catch((error: unknown) => {
      this.logger.error("host failure serving request", { request_id: requestId, error });
      sendJsonError(res, 500, INTERNAL_ERROR_DETAIL, requestId);
    });
  };

  private async serveHttp(req: http.IncomingMessage, res: http.ServerResponse, requestId: string): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const prefix = this.routePrefix ? `/${this.routePrefix}` : "";
    const path = url.pathname;
    const table = this.routeTable;
    if (!table || (prefix && path !== prefix && !path.startsWith(`${prefix}/`))) {
      req.resume();
      sendJsonError(res, 404, "not found", requestId);
      return;
    }
    const relative = path.slice(prefix.length).replace(/^\/+/, "");
    const found = table.find(req.method ?? "GET", relative);
    if (found.kind === "not-found") {
      req.resume();
      sendJsonError(res, 404, "not found", requestId);
      return;
    }
    if (found.kind === "method-not-allowed") {
      req.resume();
      sendJsonError(res, 405, "method not allowed", requestId, { Allow: found.allowed.join(", ") });
      return;
    }
    await this.invokeHttp(found.value, found.params, req, res, requestId);
  }

  private async invokeHttp(
    fn: RegisteredFunction,
    params: Record<string, string>,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    requestId: string,
  ): Promise<void> {
    const proxyUri = this.httpProxyUri;
    if (!proxyUri) throw new Error("HTTP proxy not set up");
    const invocationId = randomUUID();
    const headers = headerRecord(req.headers);
    // Keep the id we resolved, so the app and the host answer with the same one.
    headers[REQUEST_ID_HEADER.toLowerCase()] = requestId;
    // As Azure's front end does: append the peer this connection came from.
    const peer = req.socket.remoteAddress ?? "";
    if (peer) headers["x-forwarded-for"] = headers["x-forwarded-for"] ? `${headers["x-forwarded-for"]}, ${peer}` : peer;
    const host = req.headers.host ?? "localhost";
    const triggerMetadata: Record<string, unknown> = {
      Headers: { json: JSON.stringify(headers) },
      Query: { json: "{}" },
    };
    for (const [k, v] of Object.entries(params)) triggerMetadata[k] = { string: v };

    let responded = false;
    const proxied = new Promise<void>((resolve, reject) => {
      const target = new URL(req.url ?? "/", proxyUri);
      const proxyReq = http.request(target, {
        method: req.method,
        headers: {
          ...headers,
          "x-ms-invocation-id": invocationId,
          "x-forwarded-host": host,
          "x-forwarded-proto": "http",
        },
      });
      proxyReq.on("response", (proxyRes) => {
        responded = true;
        const outHeaders = { ...proxyRes.headers };
        delete outHeaders["x-ms-invocation-id"];
        res.writeHead(proxyRes.statusCode ?? 500, outHeaders);
        proxyRes.pipe(res);
        proxyRes.on("end", () => {
          // The function answered without reading the whole body (a 413): pass no more of the
          // upload on; what is left is read and dropped, never held.
          if (!req.complete) {
            req.unpipe(proxyReq);
            proxyReq.destroy();
            req.resume();
          }
          resolve();
        });
        // The body broke off after the status was sent: the client must see a broken download
        // (a reset connection), never a clean end of a short body.
        proxyRes.on("aborted", () => res.destroy());
        proxyRes.on("error", (error) => {
          res.destroy();
          reject(error);
        });
      });
      proxyReq.on("error", reject);
      res.on("close", () => {
        if (!res.writableFinished) proxyReq.destroy();
      });
      // Azure's host refuses a body over its limit whatever the function does; so does this one,
      // counting while it streams (a chunked upload declares no length).
      let received = 0;
      req.on("data", (chunk: Buffer) => {
        received += chunk.length;
        if (received > this.maxRequestBodyBytes && !responded) {
          responded = true;
          req.unpipe(proxyReq);
          proxyReq.destroy();
          sendJsonError(res, 413, `request body too large (limit ${this.maxRequestBodyBytes} bytes)`, requestId, {
            Connection: "close",
          });
          resolve();
        }
      });
      req.pipe(proxyReq);
    });
    proxied.catch(() => undefined);
    // If the proxy cannot be reached the library waits for a request forever; stop waiting then.
    const proxyFailed = new Promise<never>((_, reject) => {
      proxied.catch((error: unknown) => {
        if (!responded) reject(error);
      });
    });

    try {
      await Promise.race([
        this.invoke(
          fn,
          { http: { method: req.method, url: `http://${host}${req.url ?? "/"}` } },
          triggerMetadata,
          invocationId,
        ),
        proxyFailed,
      ]);
    } catch (error) {
      this.logger.error("function failed", { function: fn.metadata.name, request_id: requestId, error });
      if (!responded) sendJsonError(res, 500, INTERNAL_ERROR_DETAIL, requestId);
      else if (!res.writableFinished) {
        // It failed while streaming its body (the library then never ends its proxy response): the
        // status is sent, so the only honest answer left is a broken connection.
        res.destroy();
      }
      return;
    }
    // The library has written its response to the proxy; wait for it to arrive here.
    const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5000).unref());
    const outcome = await Promise.race([proxied.then(() => "done" as const), timeout]).catch(() => "failed" as const);
    if (outcome !== "done" && !responded) {
      this.logger.error("function returned no HTTP response", { function: fn.metadata.name, request_id: requestId });
      sendJsonError(res, 500, INTERNAL_ERROR_DETAIL, requestId);
    }
  }

  async stop(): Promise<void> {
    await this.registry.runHooks("appTerminate", { hookData: {}, appHookData: {} });
  }
}
