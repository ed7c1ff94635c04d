import { DependencyFailedError } from "../errors.js";

/**
 * Azure's authorization refusals, as the spec (§7, ledger B-247) names them, turned into one line a
 * user can act on: which role the managed identity lacks, on which scope, and that a new role
 * assignment takes 1 to 5 minutes to take effect (spec §5, §8). Secrets and storage URLs never
 * appear: a storage account is named by its account name, a vault by its name.
 *
 * | Refusal | Seen from | Role named |
 * |---|---|---|
 * | `AuthorizationPermissionMismatch` | Blob / Table storage (403) | Storage Blob / Table Data Contributor |
 * | `AuthorizationFailed` | Azure Resource Manager (403) | Contributor; User Access Administrator for role assignments; Azure Kubernetes Service Cluster User Role for cluster credentials |
 * | `ForbiddenByRbac` | Key Vault (403, inner error) | Key Vault Secrets User (read) / Officer (write) |
 * | `Forbidden` | the cluster's API server (403 Status) | Azure Kubernetes Service Cluster User Role |
 */

/** What an authorization refusal means for the operator. */
export interface CloudAuthorizationFailure {
  /** Azure's error code: AuthorizationPermissionMismatch, AuthorizationFailed, ForbiddenByRbac or Forbidden. */
  readonly code: string;
  /** The built-in role to assign to the managed identity. */
  readonly role: string;
  /** Where to assign it. */
  readonly scope: string;
  /** One line saying all of it. */
  readonly message: string;
}

/** A cloud call refused for want of a role; its message names the role, the scope and the propagation delay. */
export class CloudAuthorizationError extends DependencyFailedError {
  readonly code: string;
  readonly role: string;
  readonly scope: string;
  constructor(failure: CloudAuthorizationFailure, options?: ErrorOptions) {
    super(failure.message, options);
    this.code = failure.code;
    this.role = failure.role;
    this.scope = failure.scope;
  }
}

/** The spec's words on propagation (§5: "propagation takes about 1 to 5 minutes"). */
export const ROLE_PROPAGATION_NOTE = "a new role assignment takes 1 to 5 minutes to take effect";

/** The refusal `error` stands for, or undefined when it is not an authorization refusal this codebase knows. */
export function describeCloudAuthorizationError(error: unknown): CloudAuthorizationFailure | undefined {
  if (error instanceof CloudAuthorizationError)
    return { code: error.code, role: error.role, scope: error.scope, message: error.message };
  if (typeof error !== "object" || error === null) return undefined;
  const e = error as {
    statusCode?: unknown;
    code?: unknown;
    message?: unknown;
    body?: unknown;
    details?: unknown;
    request?: { url?: unknown };
    response?: { bodyAsText?: unknown };
  };
  // @kubernetes/client-node's ApiException: a numeric code and the API server's Status as the body.
  if (e.code === 403 && isForbiddenStatus(e.body)) return clusterForbidden(e.body);
  if (e.statusCode !== 403) return undefined;
  const code = typeof e.code === "string" ? e.code : "";
  const message = typeof e.message === "string" ? e.message : "";
  // Where the service's error code sits differs by SDK: the RestError's code (Blob, ARM), the
  // OData body that becomes its message (Tables), the parsed body's inner error (Key Vault).
  const body = [typeof e.response?.bodyAsText === "string" ? e.response.bodyAsText : "", safeStringify(e.details)].join(
    "\n",
  );
  const url = typeof e.request?.url === "string" ? e.request.url : "";
  const names = (errorCode: string) =>
    code === errorCode || new RegExp(`\\b${errorCode}\\b`).test(`${message}\n${body}`);
  if (names("AuthorizationPermissionMismatch")) {
    // Tables answer OData JSON; Blobs answer XML.
    const table = `${message}\n${body}`.includes('"odata.error"') || /\.table\./.test(url);
    const role = table ? "Storage Table Data Contributor" : "Storage Blob Data Contributor";
    const scope = `storage account '${storageAccountName(url)}'`;
    return failure(
      "AuthorizationPermissionMismatch",
      role,
      scope,
      `the managed identity has no ${table ? "table" : "blob"} data role on ${scope}`,
    );
  }
  if (names("AuthorizationFailed")) {
    const text = message || body;
    const action = /perform action '([^']+)'/.exec(text)?.[1] ?? "this action";
    const scope = /over scope '([^']+)'/.exec(text)?.[1] ?? "the resource";
    const role = /^Microsoft\.Authorization\/roleAssignments\//i.test(action)
      ? "User Access Administrator"
      : /listClusterUserCredential/i.test(action)
        ? "Azure Kubernetes Service Cluster User Role"
        : "Contributor";
    return failure(
      "AuthorizationFailed",
      role,
      scope,
      `the managed identity does not have authorization to perform ${action} over ${scope}`,
    );
  }
  if (names("ForbiddenByRbac")) {
    const text = `${message}\n${body}`;
    const action = /Action: '([^']+)'/.exec(text)?.[1] ?? "";
    const vault =
      /Vault: ([^;\s\\]+)/.exec(text)?.[1] ?? (URL.canParse(url) ? new URL(url).hostname.split(".")[0] : undefined);
    const writes = /\/(setSecret|deleteSecret|purge|backup|restore|recover)/i.test(action);
    const role = writes ? "Key Vault Secrets Officer" : "Key Vault Secrets User";
    const scope = vault ? `key vault '${vault}'` : "the key vault";
    return failure(
      "ForbiddenByRbac",
      role,
      scope,
      `the managed identity has no Key Vault role allowing ${action ? action.replace(/^.*\/secrets\//, "secrets/") : "this call"} on ${scope}`,
    );
  }
  return undefined;
}

/**
 * `fn`, with an authorization refusal turned into a {@link CloudAuthorizationError} (other errors
 * pass unchanged): an activity wrapped in it fails with the role message, which the operation's
 * error then carries (an orchestrator sees only the activity's message, not Azure's error code).
 * `onRefusal` hears of each refusal first (the `role_assignment.missing` event); it must not throw.
 */
export function explainCloudAuthorization<A extends unknown[], R>(
  fn: (...args: A) => Promise<R>,
  onRefusal?: (failure: CloudAuthorizationFailure) => Promise<void>,
): (...args: A) => Promise<R> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (error) {
      const refusal = describeCloudAuthorizationError(error);
      if (refusal && onRefusal) await onRefusal(refusal);
      throw refusal && !(error instanceof CloudAuthorizationError)
        ? new CloudAuthorizationError(refusal, { cause: error })
        : error;
    }
  };
}

function failure(code: string, role: string, scope: string, what: string): CloudAuthorizationFailure {
  return {
    code,
    role,
    scope,
    message: `${code}: ${what}; assign it the ${role} role on ${scope} (${ROLE_PROPAGATION_NOTE})`,
  };
}

interface ForbiddenStatus {
  kind: "Status";
  reason: "Forbidden";
  message?: string;
  details?: { kind?: string; name?: string; group?: string };
}

function isForbiddenStatus(body: unknown): body is ForbiddenStatus {
  const parsed = typeof body === "string" ? safeJson(body) : body;
  return (
    typeof parsed === "object" &&
    parsed !== null &&
    (parsed as { kind?: unknown }).kind === "Status" &&
    (parsed as { reason?: unknown }).reason === "Forbidden"
  );
}

function clusterForbidden(body: ForbiddenStatus | string): CloudAuthorizationFailure {
  const status = (typeof body === "string" ? safeJson(body) : body) as ForbiddenStatus;
  const namespace = /in the namespace "([^"]+)"/.exec(status.message ?? "")?.[1];
  const scope = namespace ? `the cluster (namespace '${namespace}')` : "the cluster";
  // The API server's own sentence names the user, the verb and the resource.
  const what = (status.message ?? "the cluster's API server refused the call").replace(/\s+/g, " ").trim();
  return failure("Forbidden", "Azure Kubernetes Service Cluster User Role", scope, `on the cluster: ${what}`);
}

/** The storage account of a request URL: the host's first label in Azure, the first path segment on an emulator or IP host. */
function storageAccountName(url: string): string {
  if (!URL.canParse(url)) return "unknown";
  const { hostname, pathname } = new URL(url);
  if (/\.(blob|table|queue|dfs)\./.test(hostname)) return hostname.split(".")[0] ?? "unknown";
  return pathname.split("/")[1] || hostname;
}

function safeStringify(value: unknown): string {
  if (value === undefined) return "";
  try {
    return JSON.stringify(value);
  } catch {
    return "";
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
