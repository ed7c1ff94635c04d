import { z } from "zod";
import { DATABASE_NAME } from "../shared/blast/database-builder.js";
import { newOperationId, OPERATION_TYPES, operationView } from "../shared/dashboard/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { NotFoundError, DependencyUnavailableError } from "../shared/errors.js";
import { parsePath } from "../shared/http/validation.js";
import { createFileDatabaseCatalog, databaseSummary } from "../shared/databases/database-catalog.js";
import { Orchestrations } from "../shared/ops/queue-labels.js";
import { appContext } from "./app-context.js";
import { route } from "./http-route.js";
import { databaseState } from "./orchestrations/database-ops.js";

const namePath = z.object({ name: z.string().regex(DATABASE_NAME, "malformed database name") });

function catalog() {
  const dir = appContext.config.databasesDir;
  if (!dir) throw new DependencyUnavailableError("no database store is configured (DATABASES_DIR)");
  return createFileDatabaseCatalog(dir);
}

route("databasesList", { methods: ["GET"], route: "databases", role: "Reader" }, async (_req, scope) => {
  const entries = await catalog().list();
  const databases = await Promise.all(
    entries.map(async (e) => {
      const s = await databaseState().get(e.manifest.name);
      return {
        ...databaseSummary(e),
        warm_state: s.warmed_version === e.manifest.version || s.warm_state === "warming" ? s.warm_state : "cold",
        warmed_at: s.warmed_version === e.manifest.version ? s.warmed_at : null,
        // A check that read the catalog just before a prepare swapped in its release may flag the
        // release now serving; that is not an update.
        update_available: s.update_available && s.latest_release !== e.manifest.version,
        latest_release: s.latest_release,
        checked_at: s.checked_at,
      };
    }),
  );
  return jsonResult(200, { databases, meta: { request_id: scope.requestId } }, scope.requestId);
});

/** Starts a database orchestration and answers with its operation (200 on start, per spec §1 item 3). */
async function startOperation(scope: Parameters<Parameters<typeof route>[2]>[1], orchestration: string, input: Record<string, unknown>, name: string) {
  const operationId = newOperationId();
  await scope.durable().startNew(orchestration, { instanceId: operationId, input });
  const caller = scope.caller;
  if (caller) {
    await appContext.audit.record({
      actor: { oid: caller.oid, name: caller.name },
      action: `database.${orchestration === Orchestrations.prepareDatabase ? "prepare" : "warmup"}`,
      target: `blast_database/${name}`,
      outcome: "succeeded",
      request_id: scope.requestId,
      details: { operation_id: operationId },
    });
  }
  const now = new Date().toISOString();
  const operation = operationView({
    operationId,
    operationType: OPERATION_TYPES[orchestration] ?? orchestration,
    state: "queued",
    createdAt: now,
    updatedAt: now,
    pollAfterSeconds: 5,
    target: { resource_type: "blast_database", name },
  });
  return jsonResult(200, { operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } }, scope.requestId);
}

route("databasesPrepare", { methods: ["POST"], route: "databases/{name}/prepare", role: "Contributor", durable: true }, async (request, scope) => {
  const { name } = parsePath(request, namePath);
  if (!appContext.config.databaseSourceUrl) throw new DependencyUnavailableError("no database source is configured (DATABASE_SOURCE_URL)");
  scope.logger.info("database prepare requested", { name, oid: scope.caller?.oid });
  return startOperation(scope, Orchestrations.prepareDatabase, { name, partitions: appContext.config.databasePartitions }, name);
});

route("databasesWarmup", { methods: ["POST"], route: "databases/{name}/warmup", role: "Contributor", durable: true }, async (request, scope) => {
  const { name } = parsePath(request, namePath);
  if (!(await catalog().get(name))) throw new NotFoundError(`database '${name}' is not prepared`);
  scope.logger.info("database warm-up requested", { name, oid: scope.caller?.oid });
  return startOperation(scope, Orchestrations.warmDatabase, { name }, name);
});
