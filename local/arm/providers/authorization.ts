import { ArmError, type ArmProvider, type LocalArm } from "../server.js";
import type { StoredResource } from "../resource-store.js";

const TYPE = "Microsoft.Authorization/roleAssignments";
const ROLE_DEFINITION =
  /^\/subscriptions\/[^/]+\/providers\/Microsoft\.Authorization\/roleDefinitions\/[0-9a-f-]{36}$/i;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function assignmentJson(r: StoredResource) {
  return { id: r.id, name: r.name, type: TYPE, properties: r.properties };
}

/**
 * Microsoft.Authorization: role assignments at any scope, with ARM's rules: the name must be a
 * GUID, a second assignment of the same role to the same principal at the same scope is 409
 * `RoleAssignmentExists`, and the write needs `Microsoft.Authorization/roleAssignments/write`
 * (deny it to see the refusal an identity without User Access Administrator gets).
 */
export function authorizationProvider(arm: LocalArm): ArmProvider {
  const store = arm.store;
  const at = (scope: string) =>
    store.list(TYPE).filter((r) => String(r.properties.scope).toLowerCase() === scope.toLowerCase());
  const path = "{*scope}/providers/Microsoft.Authorization/roleAssignments";
  return {
    namespace: "Microsoft.Authorization",
    routes: [
      {
        method: "PUT",
        pattern: `${path}/{roleAssignmentName}`,
        action: "Microsoft.Authorization/roleAssignments/write",
        scope: (req) => req.params.scope ?? "",
        handle: (req) => {
          const scope = req.params.scope ?? "";
          const name = req.params.roleAssignmentName ?? "";
          if (!GUID.test(name))
            throw new ArmError(
              400,
              "InvalidRoleAssignmentId",
              `The role assignment ID '${name}' is not valid. The role assignment ID must be a GUID.`,
            );
          const props = (req.body.properties ?? {}) as Record<string, unknown>;
          const roleDefinitionId = String(props.roleDefinitionId ?? "");
          const principalId = String(props.principalId ?? "");
          if (!ROLE_DEFINITION.test(roleDefinitionId))
            throw new ArmError(
              400,
              "InvalidRoleDefinitionId",
              `The role definition ID '${roleDefinitionId}' is not valid.`,
            );
          if (!GUID.test(principalId))
            throw new ArmError(400, "InvalidPrincipalId", "A valid principal ID must be provided for role assignment.");
          const id = `${scope}/providers/Microsoft.Authorization/roleAssignments/${name}`;
          const existing = store.get(id);
          const same = at(scope).find(
            (r) =>
              String(r.properties.principalId).toLowerCase() === principalId.toLowerCase() &&
              String(r.properties.roleDefinitionId).toLowerCase() === roleDefinitionId.toLowerCase(),
          );
          if (same && same.id.toLowerCase() !== id.toLowerCase())
            throw new ArmError(409, "RoleAssignmentExists", "The role assignment already exists.");
          if (existing && String(existing.properties.principalId).toLowerCase() !== principalId.toLowerCase())
            throw new ArmError(
              409,
              "RoleAssignmentUpdateNotPermitted",
              "Tenant ID, application ID, principal ID, and scope are not allowed to be updated.",
            );
          const stored =
            existing ??
            store.put({
              id,
              name,
              type: TYPE,
              properties: {
                roleDefinitionId,
                principalId,
                principalType: props.principalType ?? "ServicePrincipal",
                scope,
                createdOn: new Date().toISOString(),
              },
            });
          return { status: existing ? 200 : 201, body: assignmentJson(stored) };
        },
      },
      {
        method: "GET",
        pattern: `${path}/{roleAssignmentName}`,
        action: "Microsoft.Authorization/roleAssignments/read",
        scope: (req) => req.params.scope ?? "",
        handle: (req) => {
          const found = store.get(req.path);
          if (!found) throw new ArmError(404, "RoleAssignmentNotFound", "The role assignment does not exist.");
          return { status: 200, body: assignmentJson(found) };
        },
      },
      {
        method: "DELETE",
        pattern: `${path}/{roleAssignmentName}`,
        action: "Microsoft.Authorization/roleAssignments/delete",
        scope: (req) => req.params.scope ?? "",
        handle: (req) => {
          const found = store.get(req.path);
          if (!found) return { status: 204 };
          store.delete(found.id);
          return { status: 200, body: assignmentJson(found) };
        },
      },
      {
        method: "GET",
        pattern: path,
        action: "Microsoft.Authorization/roleAssignments/read",
        scope: (req) => req.params.scope ?? "",
        handle: (req, ctx) => {
          const scope = (req.params.scope ?? "").toLowerCase();
          const principal = /principalId\s+eq\s+'([^']+)'/i.exec(req.query.get("$filter") ?? "")?.[1]?.toLowerCase();
          // ARM lists the assignments that apply at the scope: at it and above it.
          const applying = store
            .list(TYPE)
            .filter((r) => {
              const s = String(r.properties.scope).toLowerCase();
              return scope === s || scope.startsWith(`${s}/`);
            })
            .filter((r) => !principal || String(r.properties.principalId).toLowerCase() === principal);
          return ctx.page(req, applying.map(assignmentJson));
        },
      },
    ],
  };
}
