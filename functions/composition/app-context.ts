import type { TableServiceClient } from "@azure/data-tables";
import type { TokenCredential } from "@azure/identity";
import { azureCredential } from "../../shared/auth/azure-credential.js";
import { DependencyUnavailableError } from "../../shared/errors.js";
import { apiAudience, createJwtValidator, entraDiscoveryUrl } from "../../shared/auth/jwt-validator.js";
import { type AppConfig, loadConfig } from "../../shared/config/load-config.js";
import {
  createDeployedJobApiLookup,
  createJobApiTargets,
  type JobApiTargets,
  type JobApiTargetsDependencies,
} from "../../shared/cluster/deployed-job-api.js";
import { createJobApiClient, type JobApiClient } from "../../shared/dashboard/job-api-client.js";
import { createWorkspaceStore } from "../../shared/workspace/workspace.js";
import { createLogger, type Logger } from "../../shared/logging/logger.js";
import { ApiTokenService, type SecretStore } from "../../shared/secrets/api-tokens.js";
import { selectSecretStore } from "../../shared/secrets/key-vault-secret-store.js";
import { type AuditLog, createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog, type EventLog } from "../../shared/ops/events.js";
import { createPerClientLimiter } from "../../shared/http/rate-limiter.js";
import { openTableServiceClient } from "../../shared/storage/storage-connection.js";
import { clusterConfigured, clusterKubeConfig, jobApiNamespace } from "./cluster-kube.js";

/**
 * The app's dependencies, built once from the one validated configuration when the app loads, so
 * a bad setting stops start-up instead of failing the first request.
 */
export interface AppContext {
  config: AppConfig;
  logger: Logger;
  validator: ReturnType<typeof createJwtValidator>;
  tableService: TableServiceClient;
  noopLimiter: ReturnType<typeof createPerClientLimiter>;
  /** The secret store shared with the job API (Key Vault in Azure; a local folder in the local stack). */
  secrets: SecretStore;
  /** The job API's shared token, read from the same store the job API reads. */
  apiTokens: ApiTokenService;
  /** Append-only record of privileged acts. */
  audit: AuditLog;
  /** Notable happenings, for the operator console. */
  events: EventLog;
  /** The dashboard's one client of the job API (the results route and the submit activities). */
  jobApi: JobApiClient;
  /**
   * Which job API {@link jobApi} calls, looked up per call (cached): the workspace's deployed one
   * once available, else `JOBAPI_URL`. The deploy invalidates it when its rollout completes.
   */
  jobApiTargets: JobApiTargets;
  /**
   * The app's Azure identity (the storage connection's user-assigned identity, else `AZURE_CLIENT_ID`):
   * the process's one cached credential, shared by storage, Key Vault and the console's providers.
   */
  credential: TokenCredential;
}

/** The secret store shared with the job API: Key Vault in Azure, a local folder in the local stack. */
function secretStore(config: AppConfig): SecretStore {
  const selected = selectSecretStore({
    keyVaultUrl: config.keyVaultUrl,
    secretsDir: config.secretsDir,
    clientId: config.storage.kind === "identity" ? config.storage.clientId : undefined,
  });
  const unavailable = () =>
    new DependencyUnavailableError("no secret store is configured (KEY_VAULT_URL or SECRETS_DIR)");
  return {
    get: async (name) => {
      const store = await selected;
      if (!store) throw unavailable();
      return store.get(name);
    },
    set: async (name, value) => {
      const store = await selected;
      if (!store) throw unavailable();
      return store.set(name, value);
    },
  };
}

/** The saved workspace's job API on the cluster (`SVC_KUBECONFIG`); none without a cluster. */
function deployedJobApiLookup(config: AppConfig): JobApiTargetsDependencies["lookUpDeployed"] {
  if (!clusterConfigured()) return undefined;
  const workspaces = createWorkspaceStore(config.storage);
  return createDeployedJobApiLookup({
    savedWorkspace: async () => (await workspaces.get())?.workspace,
    kubeConfig: clusterKubeConfig,
    namespace: jobApiNamespace(),
  });
}

function build(): AppContext {
  const config = loadConfig(process.env);
  const logger = createLogger({ level: config.logLevel, base: { service: "functions" } });
  const secrets = secretStore(config);
  const credential = azureCredential(config.storage.kind === "identity" ? config.storage.clientId : undefined);
  const apiTokens = new ApiTokenService(secrets);
  const jobApiTargets = createJobApiTargets({
    configuredUrl: config.jobApiUrl,
    lookUpDeployed: deployedJobApiLookup(config),
    // The lookup precedes each job-API call: it gets no longer than the call's own timeout.
    lookupTimeoutMs: Math.min(config.jobApiTimeoutMs, 5_000),
    logger,
  });
  return {
    jobApiTargets,
    secrets,
    apiTokens,
    credential,
    audit: createAuditLog(config.storage),
    events: createEventLog(config.storage),
    config,
    logger,
    validator: createJwtValidator({
      discoveryUrl: config.auth.discoveryUrl ?? entraDiscoveryUrl(config.auth.tenantId),
      audience: apiAudience(config.auth.clientId),
      clockToleranceSeconds: config.auth.clockSkewSeconds,
    }),
    tableService: openTableServiceClient(config.storage),
    noopLimiter: createPerClientLimiter(config.noopRateLimitPerMinute, 60_000),
    jobApi: createJobApiClient({
      baseUrl: config.jobApiUrl,
      targets: jobApiTargets,
      token: async () => {
        const state = await apiTokens.state();
        if (!state) throw new DependencyUnavailableError("no job API token is configured");
        return state.current.value;
      },
      timeoutMs: config.jobApiTimeoutMs,
      idleTimeoutMs: config.jobApiIdleTimeoutMs,
    }),
  };
}

export const appContext: AppContext = build();
