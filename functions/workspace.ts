import { errorResponse, headerRef, jsonBody, ok, validationFailed } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { parseJsonBody } from "../shared/http/validation.js";
import { workspaceSchema } from "../shared/workspace/workspace.js";
import { workspaceService } from "./composition/dashboard-deps.js";
import { callerOf, route } from "./composition/http-route.js";

/** The saved workspace configuration (Reader); 404 until one is saved. */
route(
  "getWorkspace",
  {
    methods: ["GET"],
    route: "workspace",
    role: "Reader",
    openapi: {
      summary: "The saved workspace configuration",
      responses: {
        ...ok("the workspace and its version", "StoredWorkspace", { ETag: headerRef("ETag") }),
        "404": errorResponse("no workspace has been saved yet"),
      },
    },
  },
  async (_request, { requestId }) => {
    const current = await workspaceService().get();
    return jsonResult(200, current, requestId, { ETag: current.etag });
  },
);

/**
 * Saves the workspace configuration (Contributor). Creating needs no `If-Match`; updating needs the
 * current etag in `If-Match` (missing → 428, stale → 412). Every save and every refused save is
 * audited as `workspace.update`.
 */
route(
  "putWorkspace",
  {
    methods: ["PUT"],
    route: "workspace",
    role: "Contributor",
    openapi: {
      summary: "Save the workspace configuration",
      description:
        "Creating needs no If-Match; updating needs the current ETag in If-Match (missing: 428; stale, or none saved: 412). Audited as workspace.update.",
      parameters: [
        { name: "If-Match", in: "header", schema: { type: "string" }, description: "the ETag of the version replaced" },
      ],
      requestBody: jsonBody("Workspace"),
      responses: {
        ...ok("saved", "StoredWorkspace", { ETag: headerRef("ETag") }),
        "400": errorResponse("malformed JSON"),
        "412": errorResponse("If-Match is stale (the workspace changed since it was read) or names no saved workspace"),
        "413": errorResponse("request body too large"),
        ...validationFailed,
        "428": errorResponse("a workspace is saved: send its ETag in If-Match"),
      },
    },
  },
  async (request, scope) => {
    const workspace = await parseJsonBody(request, workspaceSchema);
    const ifMatch = request.headers.get("if-match")?.trim() || undefined;
    const saved = await workspaceService().save(callerOf(scope), workspace, { ifMatch, requestId: scope.requestId });
    return jsonResult(200, saved, scope.requestId, { ETag: saved.etag });
  },
);
