import { createHash } from "node:crypto";
import type { AuthorizationManagementClient } from "@azure/arm-authorization";
import type { CloudAuthorizationFailure } from "../auth/cloud-authorization.js";
import { ROLE_PROPAGATION_NOTE } from "../auth/cloud-authorization.js";
import { type ArmConnection, lazyClient } from "./arm-connection.js";

/** Built-in role definition ids (the same in every Azure tenant). */
export const BUILT_IN_ROLES = Object.freeze({
  Contributor: "b24988ac-6180-42a0-ab88-20f7382dd24c",
  AcrPull: "7f951dda-4ed3-4680-a7ca-43fe172d538d",
  AcrPush: "8311e382-0749-4cb8-b61a-304f252e45ec",
  "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
  "Azure Kubernetes Service Cluster User Role": "4abbcc35-e782-43d8-92c5-2d3f1bd2253f",
  "Key Vault Secrets Officer": "b86a8fe4-44ce-4948-aee5-eccb2c155cd7",
});
export type BuiltInRole = keyof typeof BUILT_IN_ROLES;

/** One runtime role assignment (spec §5, second table). */
export interface WantedAssignment {
  /** Who: `kubelet`, `workload`, `user`, for the report. */
  principal_kind: "kubelet" | "workload" | "user";
  principal_id: string;
  principal_type: "ServicePrincipal" | "User";
  role: BuiltInRole;
  scope: string;
}

/** What became of one assignment. */
export interface AssignmentResult extends WantedAssignment {
  /** The assignment's name: `guid(scope, principal, role)`, so a re-run finds the same one. */
  name: string;
  /** `assigned` (created now), `exists` (already there), `missing` (the identity may not write it: run `command`). */
  state: "assigned" | "exists" | "missing";
  /** For `missing`: the exact command a person with the right to assign roles can run. */
  command?: string;
}

/** ARM template / Bicep `guid()`: a name-based (version 5) UUID of the arguments joined by `-`, in ARM's namespace. */
export function armGuid(...parts: string[]): string {
  const namespace = Buffer.from("11fb06fb712d4ddd98c7e71bbd588830", "hex");
  const hash = createHash("sha1").update(namespace).update(parts.join("-"), "utf8").digest();
  hash[6] = ((hash[6] ?? 0) & 0x0f) | 0x50;
  hash[8] = ((hash[8] ?? 0) & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** The assignment's deterministic name (`guid(scope, principal, role)`, as the Bicep assigns its own). */
export function assignmentName(a: Pick<WantedAssignment, "scope" | "principal_id" | "role">): string {
  return armGuid(a.scope.toLowerCase(), a.principal_id.toLowerCase(), BUILT_IN_ROLES[a.role]);
}

/** The `az` command that makes the assignment, for a person who may write role assignments. */
export function assignmentCommand(a: WantedAssignment): string {
  return `az role assignment create --assignee-object-id ${a.principal_id} --assignee-principal-type ${a.principal_type} --role "${a.role}" --scope "${a.scope}"`;
}

/** The spec's runtime table (§5) for one workspace: who gets which role where. Rows without a principal are left out. */
export function runtimeAssignments(input: {
  subscription_id: string;
  resource_group: string;
  cluster_name: string;
  registry?: string;
  storage_account?: string;
  vault?: string;
  kubelet_object_id?: string | null;
  workload_principal_id?: string | null;
  user_object_id?: string | null;
}): WantedAssignment[] {
  const group = `/subscriptions/${input.subscription_id}/resourceGroups/${input.resource_group}`;
  const registry = input.registry
    ? `${group}/providers/Microsoft.ContainerRegistry/registries/${input.registry}`
    : undefined;
  const storage = input.storage_account
    ? `${group}/providers/Microsoft.Storage/storageAccounts/${input.storage_account}`
    : undefined;
  const vault = input.vault ? `${group}/providers/Microsoft.KeyVault/vaults/${input.vault}` : undefined;
  const cluster = `${group}/providers/Microsoft.ContainerService/managedClusters/${input.cluster_name}`;
  const rows: [WantedAssignment["principal_kind"], string | null | undefined, BuiltInRole, string | undefined][] = [
    ["kubelet", input.kubelet_object_id, "AcrPull", registry],
    ["kubelet", input.kubelet_object_id, "Storage Blob Data Contributor", storage],
    ["workload", input.workload_principal_id, "Contributor", group],
    ["workload", input.workload_principal_id, "Storage Blob Data Contributor", storage],
    ["workload", input.workload_principal_id, "Azure Kubernetes Service Cluster User Role", cluster],
    ["user", input.user_object_id, "Storage Blob Data Contributor", storage],
    ["user", input.user_object_id, "AcrPush", registry],
    ["user", input.user_object_id, "Key Vault Secrets Officer", vault],
  ];
  return rows.flatMap(([kind, principal, role, scope]) =>
    principal && scope
      ? [
          {
            principal_kind: kind,
            principal_id: principal,
            principal_type: kind === "user" ? ("User" as const) : ("ServicePrincipal" as const),
            role,
            scope,
          },
        ]
      : [],
  );
}

/**
 * Runtime role assignments through `@azure/arm-authorization` (spec §5): idempotent (the
 * deterministic name, and an existing assignment of the same role is success), and soft-failing:
 * when the identity may not write role assignments, the result says so per assignment with the
 * `az` command to run, and `onMissing` hears of it (the `role_assignment.missing` event).
 */
export function createRoleAssignments(
  connection: ArmConnection,
  options: { onMissing?: (failure: CloudAuthorizationFailure) => Promise<void> } = {},
) {
  const clients = new Map<string, () => Promise<AuthorizationManagementClient>>();
  const client = (subscriptionId: string) => {
    let get = clients.get(subscriptionId);
    if (!get) {
      get = lazyClient(async () => {
        type Module = typeof import("@azure/arm-authorization");
        // The package has no ESM entry the bundler picks (no `exports`), so in the Functions bundle
        // its dynamic import is the CommonJS module under `default`; under Node it has named exports too.
        const loaded = (await import("@azure/arm-authorization")) as unknown as Partial<Module> & {
          default?: Module;
        };
        const AuthorizationManagementClient =
          loaded.AuthorizationManagementClient ?? loaded.default?.AuthorizationManagementClient;
        if (!AuthorizationManagementClient)
          throw new Error("@azure/arm-authorization has no AuthorizationManagementClient");
        return new AuthorizationManagementClient(connection.credential, subscriptionId, connection.clientOptions);
      });
      clients.set(subscriptionId, get);
    }
    return get();
  };
  const subscriptionOf = (scope: string) => /^\/subscriptions\/([^/]+)/i.exec(scope)?.[1] ?? "";
  const roleDefinitionId = (a: WantedAssignment) =>
    `/subscriptions/${subscriptionOf(a.scope)}/providers/Microsoft.Authorization/roleDefinitions/${BUILT_IN_ROLES[a.role]}`;

  async function assignOne(a: WantedAssignment): Promise<AssignmentResult> {
    const name = assignmentName(a);
    try {
      await (await client(subscriptionOf(a.scope))).roleAssignments.create(a.scope, name, {
        roleDefinitionId: roleDefinitionId(a),
        principalId: a.principal_id,
        principalType: a.principal_type,
      });
      return { ...a, name, state: "assigned" };
    } catch (error) {
      const e = error as { statusCode?: number; code?: string };
      if (e.statusCode === 409 && e.code === "RoleAssignmentExists") return { ...a, name, state: "exists" };
      if (e.statusCode === 403) {
        await options.onMissing?.({
          code: e.code ?? "AuthorizationFailed",
          role: "User Access Administrator",
          scope: a.scope,
          message: `the managed identity may not assign ${a.role} on ${a.scope} to the ${a.principal_kind} identity; run: ${assignmentCommand(a)} (${ROLE_PROPAGATION_NOTE})`,
        });
        return { ...a, name, state: "missing", command: assignmentCommand(a) };
      }
      throw error;
    }
  }

  return {
    /** Makes each assignment (in order); a refused write is a `missing` result, never an error. */
    async assign(wanted: readonly WantedAssignment[]): Promise<AssignmentResult[]> {
      const results: AssignmentResult[] = [];
      for (const a of wanted) results.push(await assignOne(a));
      return results;
    },

    /**
     * Which of `wanted` exist now (the re-check after someone ran the commands): an assignment of
     * the role to the principal at the scope, whatever its name.
     */
    async check(wanted: readonly WantedAssignment[]): Promise<AssignmentResult[]> {
      const results: AssignmentResult[] = [];
      for (const a of wanted) {
        const api = (await client(subscriptionOf(a.scope))).roleAssignments;
        let found = false;
        for await (const existing of api.listForScope(a.scope, { filter: `principalId eq '${a.principal_id}'` })) {
          if (
            existing.roleDefinitionId?.toLowerCase().endsWith(BUILT_IN_ROLES[a.role]) &&
            existing.scope?.toLowerCase() === a.scope.toLowerCase()
          ) {
            found = true;
            break;
          }
        }
        results.push(
          found
            ? { ...a, name: assignmentName(a), state: "exists" }
            : { ...a, name: assignmentName(a), state: "missing", command: assignmentCommand(a) },
        );
      }
      return results;
    },
  };
}

export type RoleAssignments = ReturnType<typeof createRoleAssignments>;
