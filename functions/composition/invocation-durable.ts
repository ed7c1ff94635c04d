/**
 * The durable client of the invocation being served. The console's parts are built once, but a
 * durable client belongs to one invocation (its function's binding): the action executors ask for
 * the current one when they start or signal an orchestration. A module of its own, without
 * `durable-functions`, so the console's lazy chunk can read it without sharing the route kit.
 */

import { AsyncLocalStorage } from "node:async_hooks";
import { DependencyUnavailableError } from "../../shared/errors.js";
import type { OrchestrationClient } from "../../shared/orchestrations/orchestration-client.js";

const current = new AsyncLocalStorage<OrchestrationClient>();

/** Runs `work` with `client` as the invocation's durable client. */
export function withInvocationDurable<T>(client: OrchestrationClient, work: () => T): T {
  return current.run(client, work);
}

/** The current invocation's durable client; refused outside a function registered with one. */
export function invocationDurable(): OrchestrationClient {
  const client = current.getStore();
  if (!client)
    throw new DependencyUnavailableError(
      "no durable client in this invocation: the action needs one to start or signal an orchestration",
    );
  return client;
}
