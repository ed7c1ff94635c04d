import { z } from "zod";
import type { Caller } from "../auth/roles.js";
import { ConflictError, DependencyUnavailableError } from "../errors.js";
import type { Logger } from "../logging/logger.js";
import type { AuditLog } from "../ops/audit.js";
import {
  describeOperation,
  newOperationId,
  OPERATION_TYPES,
  type OperationView,
  operationView,
} from "../orchestrations/operations.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { Orchestrations } from "../orchestrations/queue-labels.js";
import type { WorkspaceStore } from "../workspace/workspace.js";
import type { DeployJobApiInput } from "./job-api-deploy-activities.js";
import { ApplyConflictError, type RolloutView } from "./job-api-deploy.js";
import { IMAGE_DIGEST, type JobApiValues, jobApiValuesSchema } from "./job-api-manifests.js";

/** `POST /api/jobapi/deploy`: the image to deploy (by digest) and whether to take over others' fields. */
export const deployJobApiRequestSchema = z.strictObject({
  image_digest: z.string().regex(IMAGE_DIGEST, "must be an image digest 'sha256:<64 hex digits>'"),
  force: z.boolean().default(false),
});
export type DeployJobApiRequest = z.infer<typeof deployJobApiRequestSchema>;

/** The deploy's settings beyond the workspace (the Functions app's configuration). */
export interface JobApiDeploySettings {
  namespace: string;
  /** The registry's login server; `<workspace registry>.azurecr.io` when unset. */
  registryLoginServer: string | undefined;
  workloadIdentityClientId: string | undefined;
  keyVaultUrl: string | undefined;
  appSubnetCidr: string | undefined;
  /** The dashboard's app registration (`AUTH_CLIENT_ID`, `AUTH_TENANT_ID`): the terminal checks tokens with it. */
  authClientId: string;
  authTenantId: string;
  /** The web app's origin (of `SVC_CONSOLE_BASE_URL`); undefined: the terminal refuses every origin. */
  webAppOrigin: string | undefined;
  /** The terminal's public ingress (decision 0022); undefined: none. */
  terminalIngress?: { host: string; tlsCertificateUri: string } | undefined;
  rolloutTimeoutSeconds: number;
  pollSeconds: number;
}

/** What the deploy service is built from. */
export interface JobApiDeployServiceDependencies {
  orchestrations: OrchestrationClient;
  workspace: Pick<WorkspaceStore, "get">;
  audit: Pick<AuditLog, "record">;
  logger: Logger;
  settings: JobApiDeploySettings;
  /**
   * Checks the apply with the API server without storing anything (server-side dry run): a field
   * another manager owns is refused up front (409), not half-way through the operation.
   */
  dryRun: (values: JobApiValues, force: boolean) => Promise<void>;
  /** Reads the job API Deployment's rollout in `namespace` (undefined Deployment: state `missing`). */
  readRollout: (namespace: string) => Promise<RolloutView>;
}

const POLL_AFTER_SECONDS = 5;
const ACTIVE = ["Pending", "Running"] as const;

/**
 * The job API's deployment from the dashboard: renders the workspace's values, checks the apply
 * (conflicts → 409 unless `force`), and starts the deploy orchestration; a deploy already running
 * is answered instead of starting a second one. Audited as `jobapi.deploy`.
 */
export function createJobApiDeployService(deps: JobApiDeployServiceDependencies) {
  const { orchestrations, settings } = deps;

  async function running(): Promise<OperationView | undefined> {
    for await (const instance of orchestrations.listInstances({ runtimeStatus: ACTIVE })) {
      if (instance.name !== Orchestrations.deployJobApi) continue;
      return describeOperation(orchestrations, instance.instanceId, { pollAfterSeconds: POLL_AFTER_SECONDS });
    }
    return undefined;
  }

  async function values(imageDigest: string): Promise<JobApiValues> {
    const saved = await deps.workspace.get();
    if (!saved) throw new ConflictError("save the workspace configuration before deploying the job API");
    const missing = [
      ["JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID", settings.workloadIdentityClientId],
      ["KEY_VAULT_URL (or JOBAPI_DEPLOY_KEY_VAULT_URL)", settings.keyVaultUrl],
      ["JOBAPI_APP_SUBNET_CIDR", settings.appSubnetCidr],
    ].filter(([, v]) => !v);
    if (missing.length > 0)
      throw new DependencyUnavailableError(
        `the job API cannot be deployed without ${missing.map(([name]) => name).join(", ")}`,
      );
    return jobApiValuesSchema.parse({
      namespace: settings.namespace,
      registry: settings.registryLoginServer ?? `${saved.workspace.registry.toLowerCase()}.azurecr.io`,
      image_digest: imageDigest,
      workload_identity_client_id: settings.workloadIdentityClientId,
      key_vault_url: settings.keyVaultUrl,
      storage_account_name: saved.workspace.storage_account,
      app_subnet_cidr: settings.appSubnetCidr,
      auth_client_id: settings.authClientId,
      auth_tenant_id: settings.authTenantId,
      web_app_origin: settings.webAppOrigin ?? "",
      terminal_host: settings.terminalIngress?.host ?? "",
      terminal_tls_cert_uri: settings.terminalIngress?.tlsCertificateUri ?? "",
    });
  }

  return {
    /**
     * The job API's deployment as the cluster reports it (the prerequisites checklist's "job API
     * deployed" row), with the deploy operation running now, if any.
     */
    async status(): Promise<{ namespace: string; rollout: RolloutView; running_operation: OperationView | null }> {
      const [rollout, operation] = await Promise.all([deps.readRollout(settings.namespace), running()]);
      return { namespace: settings.namespace, rollout, running_operation: operation ?? null };
    },

    /** Starts a deploy (or answers the one running). */
    async deploy(caller: Caller, request: DeployJobApiRequest, options: { requestId: string }): Promise<OperationView> {
      const current = await running();
      if (current) return current;
      const rendered = await values(request.image_digest);
      const audit = (outcome: "succeeded" | "failed", details: Record<string, unknown>) =>
        deps.audit.record({
          actor: { oid: caller.oid, name: caller.name },
          action: "jobapi.deploy",
          target: `deployment/${rendered.namespace}/blastplane-jobapi`,
          outcome,
          request_id: options.requestId,
          details: { image_digest: rendered.image_digest, force: request.force, ...details },
        });
      try {
        await deps.dryRun(rendered, request.force);
      } catch (error) {
        if (error instanceof ApplyConflictError) await audit("failed", { conflicts: error.conflicts });
        throw error;
      }
      const operationId = newOperationId();
      const input: DeployJobApiInput = {
        values: rendered,
        force: request.force,
        rollout_timeout_seconds: settings.rolloutTimeoutSeconds,
        poll_seconds: settings.pollSeconds,
      };
      await orchestrations.startNew(Orchestrations.deployJobApi, { instanceId: operationId, input });
      await audit("succeeded", { operation_id: operationId });
      deps.logger.info("job API deploy started", { operation_id: operationId, image_digest: rendered.image_digest });
      const now = new Date().toISOString();
      return operationView({
        operationId,
        operationType: OPERATION_TYPES[Orchestrations.deployJobApi] ?? "jobapi.deploy",
        state: "queued",
        createdAt: now,
        updatedAt: now,
        pollAfterSeconds: POLL_AFTER_SECONDS,
        target: { resource_type: "jobapi_deployment", namespace: rendered.namespace },
      });
    },
  };
}

export type JobApiDeployService = ReturnType<typeof createJobApiDeployService>;
