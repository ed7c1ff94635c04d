import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody } from "../shared/http/validation.js";
import { workspaceSchema } from "../shared/workspace/workspace.js";
import { workspaceService } from "./composition/dashboard-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** The saved workspace configuration (Reader); 404 until one is saved. */
route("getWorkspace", { methods: ["GET"], route: "workspace", role: "Reader" }, async (_request, { requestId }) => {
  const current = await workspaceService().get();
  return jsonResult(200, current, requestId, { ETag: current.etag });
});

/**
 * Saves the workspace configuration (Contributor). Creating needs no `If-Match`; updating needs the
 * current etag in `If-Match` (missing → 428, stale → 409). Every save and every refused save is
 * audited as `workspace.update`.
 */
route("putWorkspace", { methods: ["PUT"], route: "workspace", role: "Contributor" }, async (request, scope) => {
  const workspace = await parseJsonBody(request, workspaceSchema);
  const ifMatch = request.headers.get("if-match")?.trim() || undefined;
  const saved = await workspaceService().save(callerOf(scope), workspace, { ifMatch, requestId: scope.requestId });
  return jsonResult(200, saved, scope.requestId, { ETag: saved.etag });
});
