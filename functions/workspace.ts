import { httpMappingOf, jsonResult } from "../shared/http/envelope.js";
import { ConflictError, NotFoundError, PreconditionRequiredError } from "../shared/errors.js";
import { parseJsonBody } from "../shared/http/validation.js";
import { createWorkspaceStore, type Workspace, workspaceSchema } from "../shared/workspace/workspace.js";
import { appContext } from "./app-context.js";
import { callerOf, route } from "./http-route.js";

const store = createWorkspaceStore(appContext.config.storageConnectionString);
const audit = appContext.audit;

function changedFields(before: Workspace | undefined, after: Workspace): string[] {
  return (Object.keys(after) as (keyof Workspace)[]).filter((k) => before?.[k] !== after[k]);
}

/** The saved workspace configuration (Reader); 404 until one is saved. */
route("getWorkspace", { methods: ["GET"], route: "workspace", role: "Reader" }, async (_request, { requestId }) => {
  const current = await store.get();
  if (!current) throw new NotFoundError("no workspace configuration has been saved yet");
  return jsonResult(200, current, requestId, { ETag: current.etag });
});

/**
 * Saves the workspace configuration (Contributor). Creating needs no `If-Match`; updating needs the
 * current etag in `If-Match` (missing → 428, stale → 409). Every save and every refused save is
 * audited as `workspace.update`.
 */
route("putWorkspace", { methods: ["PUT"], route: "workspace", role: "Contributor" }, async (request, scope) => {
  const caller = callerOf(scope);
  const actor = { oid: caller.oid, name: caller.name };
  const workspace = await parseJsonBody(request, workspaceSchema);
  const ifMatch = request.headers.get("if-match")?.trim() || undefined;
  const base = { actor, action: "workspace.update", target: "workspace", request_id: scope.requestId };
  let saved: Awaited<ReturnType<typeof store.put>>;
  try {
    saved = await store.put(workspace, { ifMatch, actor });
  } catch (error) {
    if (error instanceof ConflictError || error instanceof PreconditionRequiredError) {
      await audit.record({ ...base, outcome: "failed", details: { status: httpMappingOf(error)?.status, reason: error.message } });
    }
    throw error;
  }
  await audit.record({
    ...base,
    outcome: "succeeded",
    details: { created: saved.previous === undefined, changed_fields: changedFields(saved.previous, saved.workspace), etag: saved.etag },
  });
  const { previous: _previous, ...body } = saved;
  return jsonResult(200, body, scope.requestId, { ETag: saved.etag });
});
