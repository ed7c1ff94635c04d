import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import * as df from "durable-functions";
import { createHttpHandler, type RequestScope } from "../shared/http/handler.js";
import type { HttpResult } from "../shared/http/envelope.js";
import { appContext } from "./app-context.js";

type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface RouteScope extends RequestScope {
  /** The durable client, for routes registered with `durable: true`. */
  durable: () => df.DurableClient;
}

/**
 * Registers one HTTP route: the trigger stays thin — the kit stamps the request id, maps errors to
 * the envelope and logs; the handler parses and calls shared/.
 */
export function route(
  name: string,
  options: { methods: Method[]; route: string; durable?: boolean },
  handler: (request: HttpRequest, scope: RouteScope) => Promise<HttpResult>,
): void {
  app.http(name, {
    methods: options.methods,
    route: options.route,
    authLevel: "anonymous",
    extraInputs: options.durable ? [df.input.durableClient()] : [],
    handler: async (request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> => {
      const wrapped = createHttpHandler<HttpRequest>(
        (req, scope) => handler(req, { ...scope, durable: () => df.getClient(context) }),
        appContext.logger,
      );
      return (await wrapped(request)) as HttpResponseInit;
    },
  });
}
