import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import * as df from "durable-functions";
import { authorize } from "../../shared/auth/authorize.js";
import type { Caller, Role } from "../../shared/auth/roles.js";
import type { DescribedRoute } from "../../shared/dashboard/openapi.js";
import type { HttpResult } from "../../shared/http/envelope.js";
import { createHttpHandler, type RequestScope } from "../../shared/http/handler.js";
import type { Operation } from "../../shared/http/openapi.js";
import type { OrchestrationClient, OrchestrationInstance } from "../../shared/orchestrations/orchestration-client.js";
import { appContext } from "./app-context.js";
import { type ClientConnection, clientConnection } from "./http-connection.js";
import { withInvocationDurable } from "./invocation-durable.js";

// Triggers other than routes (the approval orchestration's settle activity) reach it through the kit.
export { withInvocationDurable };

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RouteScope extends RequestScope {
  /** The durable client (as the domain's port), for routes registered with `durable: true`. */
  durable: () => OrchestrationClient;
  /** The authenticated caller, for routes registered with a `role` floor. */
  caller: Caller | undefined;
  /** The client connection: its close signal and unread backlog (what streamed responses watch). */
  connection: () => ClientConnection;
}

/** Options of {@link route}. */
export interface RouteOptions {
  methods: Method[];
  route: string;
  /** The route reads or starts orchestrations (adds the durable client input). */
  durable?: boolean;
  /** The role floor: the caller is authenticated and checked before the handler runs. */
  role?: Role;
  /**
   * The route's OpenAPI operation (summary, parameters, body, responses); the kit adds its
   * operationId (the name), security and 401/403 from `role`. `GET /api/openapi.json` lists it.
   */
  openapi?: Operation;
}

const registered: DescribedRoute[] = [];

/** Every route registered so far, in order: what the dashboard's OpenAPI document describes. */
export function registeredRoutes(): readonly DescribedRoute[] {
  return registered;
}

/** The caller of a route registered with a role floor (always present there). */
export function callerOf(scope: RouteScope): Caller {
  if (!scope.caller) throw new Error("route has no role floor");
  return scope.caller;
}

function instanceOf(status: df.DurableOrchestrationStatus): OrchestrationInstance {
  return {
    name: status.name,
    instanceId: status.instanceId,
    runtimeStatus: String(status.runtimeStatus),
    input: status.input,
    output: status.output,
    // The client hands over the JSON it received: the times may arrive as strings.
    createdAt: new Date(status.createdTime),
    lastUpdatedAt: new Date(status.lastUpdatedTime),
    customStatus: status.customStatus,
  };
}

/**
 * Adapts the invocation's durable client to the domain's {@link OrchestrationClient} port. The
 * client is read from the invocation on first use: only routes registered with `durable: true`
 * have one, and a service may be built on a route that never calls it.
 */
export function orchestrationClient(context: InvocationContext): OrchestrationClient {
  let durableClient: df.DurableClient | undefined;
  const client = () => (durableClient ??= df.getClient(context));
  return {
    startNew: (name, options) => client().startNew(name, options),
    async getInstance(instanceId) {
      try {
        return instanceOf(await client().getStatus(instanceId));
      } catch (error) {
        // The client reports a missing instance as an error mentioning the 404 it received.
        if (error instanceof Error && / 404 /.test(error.message)) return undefined;
        throw error;
      }
    },
    async *listInstances(options) {
      const statuses = await client().getStatusBy({
        runtimeStatus: options.runtimeStatus as df.OrchestrationRuntimeStatus[],
      });
      for (const status of statuses) yield instanceOf(status);
    },
    raiseEvent: (instanceId, eventName, eventData) => client().raiseEvent(instanceId, eventName, eventData),
  };
}

/**
 * Registers one HTTP route: the trigger stays thin — the kit stamps the request id, authorizes,
 * maps errors to the envelope and logs; the handler parses, calls one service and maps its result.
 */
export function route(
  name: string,
  options: RouteOptions,
  handler: (request: HttpRequest, scope: RouteScope) => Promise<HttpResult>,
): void {
  registered.push({
    name,
    methods: options.methods,
    route: options.route,
    role: options.role,
    openapi: options.openapi,
  });
  app.http(name, {
    methods: options.methods,
    route: options.route,
    authLevel: "anonymous",
    extraInputs: options.durable ? [df.input.durableClient()] : [],
    handler: async (request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> => {
      const wrapped = createHttpHandler<HttpRequest>(async (httpRequest, scope) => {
        // Authentication and the role floor come before any work.
        const caller = options.role
          ? await authorize(appContext.validator, httpRequest.headers.get("authorization"), options.role)
          : undefined;
        const durable = orchestrationClient(context);
        const connection = () => clientConnection(context.invocationId);
        const handle = () => handler(httpRequest, { ...scope, caller, durable: () => durable, connection });
        // Work built outside the request (the console's action executors) finds this invocation's client.
        return options.durable ? withInvocationDurable(durable, handle) : handle();
      }, appContext.logger);
      return (await wrapped(request)) as HttpResponseInit;
    },
  });
}
