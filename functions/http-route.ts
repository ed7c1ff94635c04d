import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import * as df from "durable-functions";
import { authorize } from "../shared/auth/authorize.js";
import type { Caller, Role } from "../shared/auth/roles.js";
import { createHttpHandler, type RequestScope } from "../shared/http/handler.js";
import type { HttpResult } from "../shared/http/envelope.js";
import { appContext } from "./app-context.js";

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RouteScope extends RequestScope {
  /** The durable client, for routes registered with `durable: true`. */
  durable: () => df.DurableClient;
  /** The authenticated caller, for routes registered with a `role` floor. */
  caller: Caller | undefined;
}

/** The caller of a route registered with a role floor (always present there). */
export function callerOf(scope: RouteScope): Caller {
  if (!scope.caller) throw new Error("route has no role floor");
  return scope.caller;
}

/**
 * Registers one HTTP route: the trigger stays thin — the kit stamps the request id, maps errors to
 * the envelope and logs; the handler parses and calls shared/.
 */
export function route(
  name: string,
  options: { methods: Method[]; route: string; durable?: boolean; role?: Role },
  handler: (request: HttpRequest, scope: RouteScope) => Promise<HttpResult>,
): void {
  app.http(name, {
    methods: options.methods,
    route: options.route,
    authLevel: "anonymous",
    extraInputs: options.durable ? [df.input.durableClient()] : [],
    handler: async (request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> => {
      const wrapped = createHttpHandler<HttpRequest>(
        async (req, scope) => {
          // Authentication and the role floor come before any work.
          const caller = options.role ? await authorize(appContext.validator, req.headers.get("authorization"), options.role) : undefined;
          return handler(req, { ...scope, caller, durable: () => df.getClient(context) });
        },
        appContext.logger,
      );
      return (await wrapped(request)) as HttpResponseInit;
    },
  });
}
