import type http from "node:http";
import type { Logger } from "../../shared/logging/logger.js";
import { secretsEqual } from "../../shared/secrets/api-tokens.js";
import { type DurableEngine, InstanceNotFoundError, InstanceStateError, OrchestratorNotFoundError } from "./engine.js";
import type { RuntimeStatus } from "./store.js";

const STATUSES: ReadonlySet<string> = new Set([
  "Pending",
  "Running",
  "Completed",
  "ContinuedAsNew",
  "Failed",
  "Terminated",
  "Suspended",
]);
const MAX_BODY_BYTES = 4 * 1024 * 1024;
const INSTANCE_ID = /^[A-Za-z0-9:._@-]{1,256}$/;

async function readBody(req: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new RangeError("body too large");
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** Options of {@link createManagementApi}. */
export interface ManagementApiOptions {
  /**
   * Required of every call, like the Functions host's system key: as the first path segment
   * after the base path (the durable client's base URL carries it there, since the client
   * resolves relative paths and would drop a query), the `code` query parameter, or the
   * `x-functions-key` header. Compared in constant time.
   */
  key?: string;
}

function presentsKey(req: http.IncomingMessage, base: string, key: string): boolean {
  const url = new URL(req.url ?? "/", "http://localhost");
  const header = req.headers["x-functions-key"];
  const segment = url.pathname.startsWith(base) ? (url.pathname.slice(base.length).split("/")[0] ?? "") : "";
  let ok = secretsEqual(segment, key);
  ok = secretsEqual(url.searchParams.get("code") ?? "", key) || ok;
  ok = secretsEqual(typeof header === "string" ? header : "", key) || ok;
  return ok;
}

function send(res: http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  const text = body === undefined ? "" : JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

function jsonOrNull(text: string): string {
  if (text.trim() === "") return "null";
  JSON.parse(text);
  return text;
}

/**
 * The Durable Functions HTTP management API, served at the client binding's `rpcBaseUrl`, so
 * `df.getClient(context)` works unchanged: start, status, list (paged with
 * `x-ms-continuation-token`), raise event, terminate, suspend, resume and purge.
 */
export function createManagementApi(
  engine: DurableEngine,
  logger: Logger,
  basePath: string,
  options: ManagementApiOptions = {},
): http.RequestListener {
  const base = basePath.endsWith("/") ? basePath : `${basePath}/`;
  const { key } = options;
  return (req, res) => {
    if (key !== undefined && !presentsKey(req, base, key)) {
      req.resume();
      send(res, 401, {
        message: "a valid key is required (the code query parameter, x-functions-key, or the keyed base URL)",
      });
      return;
    }
    handle(req, res).catch((error: unknown) => {
      if (error instanceof InstanceNotFoundError) return send(res, 404, { message: error.message });
      if (error instanceof InstanceStateError) return send(res, 410, { message: error.message });
      if (error instanceof OrchestratorNotFoundError) return send(res, 400, { message: error.message });
      if (error instanceof SyntaxError || error instanceof RangeError || error instanceof URIError)
        return send(res, 400, { message: error.message });
      logger.error("durable management API failure", { error });
      send(res, 500, { message: "internal server error" });
    });
  };

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (!url.pathname.startsWith(base)) return send(res, 404, { message: "not found" });
    const parts = url.pathname
      .slice(base.length)
      .split("/")
      .filter((p) => p !== "")
      .map((p) => decodeURIComponent(p));
    // The keyed base URL (what the durable client is given): its key segment is not a route part.
    const keyed = key !== undefined && parts[0] !== undefined && secretsEqual(parts[0], key);
    if (keyed) parts.shift();
    const routeBase = keyed ? `${base}${encodeURIComponent(key)}/` : base;
    const method = req.method ?? "GET";
    const reason = url.searchParams.get("reason") ?? "";

    if (parts[0] === "orchestrators" && method === "POST" && (parts.length === 2 || parts.length === 3)) {
      const name = parts[1] ?? "";
      const instanceId = parts[2];
      if (instanceId !== undefined && !INSTANCE_ID.test(instanceId))
        return send(res, 400, { message: "invalid instance id" });
      const input = jsonOrNull(await readBody(req));
      try {
        const id = await engine.startNew(name, instanceId, input);
        return send(res, 202, { id }, { Location: `${routeBase}instances/${encodeURIComponent(id)}` });
      } catch (error) {
        if (error instanceof InstanceStateError) return send(res, 409, { message: error.message });
        throw error;
      }
    }

    if (parts[0] !== "instances") return send(res, 404, { message: "not found" });
    const instanceId = parts[1];

    if (instanceId === undefined) {
      const filter = {
        statuses: (url.searchParams.get("runtimeStatus") ?? "")
          .split(",")
          .filter((s) => s !== "")
          .map((s) => {
            if (!STATUSES.has(s)) throw new RangeError(`unknown runtimeStatus ${s}`);
            return s as RuntimeStatus;
          }),
        createdFrom: dateParam(url, "createdTimeFrom"),
        createdTo: dateParam(url, "createdTimeTo"),
      };
      if (method === "GET") {
        const page = await engine.list(
          filter,
          (req.headers["x-ms-continuation-token"] as string | undefined) ?? undefined,
        );
        return send(res, 200, page.items, page.continuation ? { "x-ms-continuation-token": page.continuation } : {});
      }
      if (method === "DELETE") {
        let deleted = 0;
        let continuation: string | undefined;
        const ids: string[] = [];
        do {
          const page = await engine.list(filter, continuation);
          ids.push(...page.items.map((i) => i.instanceId));
          continuation = page.continuation;
        } while (continuation);
        for (const id of ids) if (await engine.purge(id)) deleted++;
        return send(res, deleted > 0 ? 200 : 404, { instancesDeleted: deleted });
      }
      return send(res, 405, { message: "method not allowed" });
    }

    if (parts.length === 2) {
      if (method === "GET") {
        const status = await engine.getStatus(instanceId, url.searchParams.get("showHistory") === "true");
        if (!status) return send(res, 404, { message: "instance not found" });
        const body = url.searchParams.get("showInput") === "false" ? { ...status, input: null } : status;
        const active =
          status.runtimeStatus === "Pending" ||
          status.runtimeStatus === "Running" ||
          status.runtimeStatus === "Suspended";
        return send(res, active ? 202 : 200, body);
      }
      if (method === "DELETE") {
        const purged = await engine.purge(instanceId);
        return send(res, purged ? 200 : 404, { instancesDeleted: purged ? 1 : 0 });
      }
      return send(res, 405, { message: "method not allowed" });
    }

    if (method !== "POST") return send(res, 405, { message: "method not allowed" });
    const op = parts[2];
    if (op === "raiseEvent" && parts.length === 4) {
      await engine.raiseEvent(instanceId, parts[3] ?? "", jsonOrNull(await readBody(req)));
      return send(res, 202);
    }
    if (parts.length === 3 && op === "terminate") {
      await engine.terminate(instanceId, reason);
      return send(res, 202);
    }
    if (parts.length === 3 && op === "suspend") {
      await engine.suspend(instanceId, reason);
      return send(res, 202);
    }
    if (parts.length === 3 && op === "resume") {
      await engine.resume(instanceId, reason);
      return send(res, 202);
    }
    return send(res, 404, { message: "not found" });
  }
}

function dateParam(url: URL, name: string): Date | undefined {
  const v = url.searchParams.get(name);
  if (!v) return undefined;
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new RangeError(`invalid ${name}`);
  return d;
}
