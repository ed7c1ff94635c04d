import type * as df from "durable-functions";
import { z } from "zod";
import { OPERATION_TYPES, operationState, operationView } from "../shared/dashboard/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { NotFoundError } from "../shared/errors.js";
import { parsePath } from "../shared/http/validation.js";
import { appContext } from "./app-context.js";
import { route } from "./http-route.js";

/** The operation view of an orchestration instance, or undefined when there is none. */
export async function describeOperation(client: df.DurableClient, operationId: string) {
  const status = await client.getStatus(operationId).catch((error: unknown) => {
    // The client reports a missing instance as an error mentioning the 404 it received.
    if (error instanceof Error && / 404 /.test(error.message)) return undefined;
    throw error;
  });
  if (!status) return undefined;
  const type = OPERATION_TYPES[status.name];
  if (!type) return undefined;
  const input = status.input as { dashboard_job_id?: string; name?: string } | null;
  const output = status.output as { error?: string } | null;
  const target = input?.dashboard_job_id
    ? { target: { resource_type: "blast_job", dashboard_job_id: input.dashboard_job_id }, targetLink: `/api/blast/jobs/${input.dashboard_job_id}` }
    : input?.name
      ? { target: { resource_type: "blast_database", name: input.name }, targetLink: "/api/databases" }
      : {};
  return operationView({
    operationId,
    operationType: type,
    state: operationState(String(status.runtimeStatus), status.output),
    createdAt: new Date(status.createdTime).toISOString(),
    updatedAt: new Date(status.lastUpdatedTime).toISOString(),
    pollAfterSeconds: appContext.config.jobPollIntervalSeconds,
    ...target,
    error: typeof status.output === "string" ? status.output : (output?.error ?? ""),
  });
}

route("getOperation", { methods: ["GET"], route: "operations/{operation_id}", role: "Reader", durable: true }, async (request, scope) => {
  const { operation_id } = parsePath(request, z.object({ operation_id: z.string().regex(/^op-[0-9a-f]{32}$/, "malformed operation id") }));
  const op = await describeOperation(scope.durable(), operation_id);
  if (!op) throw new NotFoundError(`no operation with id '${operation_id}'`);
  return jsonResult(200, { ...op, meta: { request_id: scope.requestId } }, scope.requestId);
});
