import { z } from "zod";
import {
  ConfigError,
  type Env,
  envEnum,
  envInt,
  envParsed,
  envUrl,
  LOG_LEVELS,
  type LogLevel,
  parseEnv,
} from "./env.js";
import { KEY_VAULT_CERTIFICATE_URI, TERMINAL_HOST } from "../cluster/terminal-ingress.js";
import { parseNcrontab } from "./ncrontab.js";
import { type NarratorSettings, narratorSettings, narratorSettingsShape } from "./narrator-settings.js";
import {
  checkStorageSettings,
  FUNCTIONS_STORAGE_SETTINGS,
  type StorageConnection,
  storageConnectionFromSettings,
  storageSettingsShape,
  withLegacyConnectionString,
} from "../storage/storage-connection.js";

export { ConfigError };

/**
 * The Functions app's one validated configuration. Every setting the app reads is here and in
 * `local.settings.sample.json`; the README explains each. `loadConfig` fails fast on a bad value.
 */
const TASK_HUB_NAME = /^[A-Za-z][A-Za-z0-9]{2,44}$/;

/** Daily at 03:00 UTC: the update check's schedule when `SVC_DB_UPDATE_CHECK_SCHEDULE` is unset. */
export const DEFAULT_DB_UPDATE_CHECK_SCHEDULE = "0 0 3 * * *";
/** Every ten minutes: the sweep of abandoned database uploads when `SVC_DB_UPLOAD_SWEEP_SCHEDULE` is unset. */
export const DEFAULT_DB_UPLOAD_SWEEP_SCHEDULE = "0 */10 * * * *";

/** The Functions app's settings (environment names), read by {@link loadConfig} and the configuration reference. */
export const appSettingsSchema = z
  .object({
    // A connection string (Azurite only) or the host's identity-based settings (`AzureWebJobsStorage__*`).
    ...storageSettingsShape(FUNCTIONS_STORAGE_SETTINGS),
    TASKHUB_NAME: z
      .string()
      .regex(TASK_HUB_NAME, "must be 3-45 letters or digits, starting with a letter")
      .default("blastplane"),
    AUTH_TENANT_ID: z.string(),
    AUTH_CLIENT_ID: z.string(),
    AUTH_DISCOVERY_URL: envUrl().optional(),
    AUTH_CLOCK_SKEW_SECONDS: envInt(0, 600).default(60),
    LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
    NOOP_RATE_LIMIT_PER_MINUTE: envInt(1, 10_000).default(30),
    HEALTH_DEPENDENCY_TIMEOUT_MS: envInt(100, 30_000).default(2000),
    JOBAPI_URL: envUrl().optional(),
    SECRETS_DIR: z.string().optional(),
    KEY_VAULT_URL: envUrl().optional(),
    API_TOKEN_GRACE_SECONDS: envInt(0, 7 * 86_400).default(3600),
    JOB_POLL_INTERVAL_SECONDS: envInt(1, 3600).default(5),
    JOBAPI_TIMEOUT_MS: envInt(100, 120_000).default(15_000),
    JOBAPI_IDLE_TIMEOUT_MS: envInt(100, 3_600_000).default(60_000),
    DATABASES_DIR: z.string().optional(),
    DATABASE_SOURCE_URL: envUrl().optional(),
    DATABASE_PARTITIONS: envInt(0, 64).default(2),
    // Azure Functions' HTTP front end refuses request bodies over 100 MB; larger FASTA files go through `db add`.
    DATABASE_UPLOAD_MAX_BYTES: envInt(1, Number.MAX_SAFE_INTEGER).default(100 * 1024 * 1024),
    // A timer schedule as Azure Functions reads it (six-field NCRONTAB or a TimeSpan).
    ARM_ENDPOINT: envUrl().optional(),
    ARM_CA_FILE: z.string().min(1).optional(),
    CLUSTER_SYSTEM_VM_SIZE: z
      .string()
      .regex(/^(?:Standard|Basic)_[A-Za-z]+[0-9]+[A-Za-z0-9-]*(?:_[A-Za-z0-9]+)*$/, "must be an Azure VM size")
      .default("Standard_D2s_v5"),
    CLUSTER_IDENTITY_ID: z
      .string()
      .regex(
        /^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.ManagedIdentity\/userAssignedIdentities\/[^/]+$/i,
        "must be a user-assigned identity's resource id",
      )
      .optional(),
    WORKLOAD_IDENTITY_PRINCIPAL_ID: z
      .string()
      .regex(
        /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
        "must be an object id (GUID)",
      )
      .optional(),
    JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID: z
      .string()
      .regex(
        /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
        "must be a client id (GUID)",
      )
      .optional(),
    JOBAPI_APP_SUBNET_CIDR: z
      .string()
      .regex(/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/, "must be an IPv4 CIDR such as 10.1.0.0/24")
      .optional(),
    JOBAPI_REGISTRY_LOGIN_SERVER: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:\d{1,5})?$/, "must be a registry login server such as 'x.azurecr.io'")
      .optional(),
    JOBAPI_ROLLOUT_TIMEOUT_SECONDS: envInt(10, 3600).default(600),
    JOBAPI_DEPLOY_KEY_VAULT_URL: envUrl().optional(),
    IMAGE_BUILD_CONTEXT_DIR: z.string().min(1).optional(),
    IMAGE_BUILD_POLL_SECONDS: envInt(1, 600).default(10),
    IMAGE_BUILD_TIMEOUT_SECONDS: envInt(300, 28_800).default(3600),
    // The browser terminal's ingress (decision 0022): both or neither.
    JOBAPI_TERMINAL_HOST: z
      .string()
      .transform((host) => host.trim().toLowerCase())
      .pipe(z.string().regex(TERMINAL_HOST, "must be a DNS name such as terminal.example.org"))
      .optional(),
    JOBAPI_TERMINAL_TLS_CERT_URI: z
      .string()
      .regex(
        KEY_VAULT_CERTIFICATE_URI,
        "must be a Key Vault certificate URI https://<vault>.vault.azure.net/certificates/<name>",
      )
      .optional(),
    SVC_DB_UPDATE_CHECK_SCHEDULE: envParsed((text) => parseNcrontab(text).expression).default(
      DEFAULT_DB_UPDATE_CHECK_SCHEDULE,
    ),
    SVC_DB_UPLOAD_SWEEP_SCHEDULE: envParsed((text) => parseNcrontab(text).expression).default(
      DEFAULT_DB_UPLOAD_SWEEP_SCHEDULE,
    ),
    // The narrator (shared/config/narrator-settings.ts; docs/narrator.md).
    ...narratorSettingsShape,
  })
  .superRefine(...checkStorageSettings(FUNCTIONS_STORAGE_SETTINGS))
  .superRefine((values, ctx) => {
    if (Boolean(values.JOBAPI_TERMINAL_HOST) === Boolean(values.JOBAPI_TERMINAL_TLS_CERT_URI)) return;
    const missing = values.JOBAPI_TERMINAL_HOST ? "JOBAPI_TERMINAL_TLS_CERT_URI" : "JOBAPI_TERMINAL_HOST";
    ctx.addIssue({
      code: "custom",
      path: [missing],
      message: "the terminal's ingress needs both JOBAPI_TERMINAL_HOST and JOBAPI_TERMINAL_TLS_CERT_URI",
    });
  });

/** Every app setting the Functions app reads (`local.settings.sample.json` lists the same). */
export const APP_SETTING_NAMES: readonly string[] = Object.freeze(Object.keys(appSettingsSchema.shape));

export interface AppConfig {
  /** Where the app's tables and blobs are: Azurite by connection string, or account URLs with the managed identity. */
  readonly storage: StorageConnection;
  /**
   * The Azurite connection string (local mode only).
   * @deprecated Open storage through `storage` (`shared/storage/storage-connection.ts`); with the
   * managed identity there is no connection string and reading this throws.
   */
  readonly storageConnectionString: string;
  readonly taskHubName: string;
  readonly auth: {
    readonly tenantId: string;
    readonly clientId: string;
    /** Override of the Entra ID discovery document; the local stack points it at its dev IdP. */
    readonly discoveryUrl: string | undefined;
    readonly clockSkewSeconds: number;
  };
  readonly logLevel: LogLevel;
  readonly noopRateLimitPerMinute: number;
  readonly healthDependencyTimeoutMs: number;
  /** Where the dashboard reaches the job API (in Azure: its in-cluster service address). */
  readonly jobApiUrl: string | undefined;
  /** The local secret store folder (the local stack's stand-in for Key Vault). */
  readonly secretsDir: string | undefined;
  /** Key Vault holding the shared job-API token (Azure); wins over `secretsDir`. */
  readonly keyVaultUrl: string | undefined;
  /** How long a regenerated API token's predecessor stays valid. */
  readonly apiTokenGraceSeconds: number;
  /** How often the submit orchestration polls the job API. */
  readonly jobPollIntervalSeconds: number;
  /** How long a call to the job API may wait for its status and headers (not its body). */
  readonly jobApiTimeoutMs: number;
  /** How long a body from the job API (a results download) may send nothing before it fails. */
  readonly jobApiIdleTimeoutMs: number;
  /** Where prepared databases live for the executors (the local stack: the job API's folder). */
  readonly databasesDir: string | undefined;
  /** Base URL of a release source laid out like NCBI's BLAST database distribution. */
  readonly databaseSourceUrl: string | undefined;
  /** Partitions built for each prepared database (for the sharded execution profile). */
  readonly databasePartitions: number;
  /** Largest database FASTA the Databases page may upload, in bytes (413 beyond). */
  readonly databaseUploadMaxBytes: number;
  /** When the database update check runs; the timer trigger registers with exactly this. */
  readonly dbUpdateCheckSchedule: string;
  /** The sweep of abandoned database uploads' schedule (NCRONTAB). */
  readonly dbUploadSweepSchedule: string;
  /** The console's narrator: none, or an OpenAI-compatible endpoint (docs/narrator.md). */
  readonly narrator: NarratorSettings;
  /** Cluster provisioning and discovery through Resource Manager. */
  readonly cluster: {
    /** Resource Manager's endpoint when not Azure's public cloud (the local stack's local ARM). */
    readonly armEndpoint: string | undefined;
    /** A PEM file of the CA `armEndpoint`'s certificate chains to (the local Resource Manager's); never in Azure. */
    readonly armCaFile: string | undefined;
    /** VM size of the cluster's system pool. */
    readonly systemVmSize: string;
    /** The user-assigned identity the cluster's control plane runs as (else a system-assigned one). */
    readonly identityId: string | undefined;
    /** Object id of the submit workload identity, for its runtime role assignments (spec §5). */
    readonly workloadPrincipalId: string | undefined;
  };
  /** The job API image's build in the workspace's registry (a registry task run). */
  readonly imageBuild: {
    /** The folder whose files (less `.dockerignore`'s) are the build context; unset: no builds. */
    readonly contextDir: string | undefined;
    /** How often the build orchestration polls the run. */
    readonly pollSeconds: number;
    /** The run's timeout in the registry, and how long the orchestration waits for it. */
    readonly timeoutSeconds: number;
  };
  /** What the job API's deploy renders its manifests with, beyond the workspace. */
  readonly jobApiDeploy: {
    readonly workloadIdentityClientId: string | undefined;
    readonly appSubnetCidr: string | undefined;
    /** The registry's login server; `<workspace registry>.azurecr.io` when unset. */
    readonly registryLoginServer: string | undefined;
    /** How long a rollout may take before the deploy fails with the pods' reasons. */
    readonly rolloutTimeoutSeconds: number;
    /** The vault the deployed job API reads its token from; `KEY_VAULT_URL` when unset. */
    readonly keyVaultUrl: string | undefined;
    /**
     * The browser terminal's public ingress (decision 0022): the host it answers on and the Key
     * Vault certificate it serves; undefined: no ingress, the job API stays private.
     */
    readonly terminalIngress: { readonly host: string; readonly tlsCertificateUri: string } | undefined;
  };
}

/**
 * Validates the environment and returns a frozen, typed configuration; throws `ConfigError`
 * naming every bad setting.
 */
export function loadConfig(env: Env = process.env): AppConfig {
  return parseEnv(appSettingsSchema, env, (c) => {
    const storage = storageConnectionFromSettings(c, FUNCTIONS_STORAGE_SETTINGS);
    const problems: string[] = [];
    // Local mode is the embedded Azurite by connection string (storage-connection.ts).
    const narrator = narratorSettings(c, storage.kind === "connection-string", problems);
    if (problems.length > 0) throw new ConfigError(problems);
    return withLegacyConnectionString({
      storage,
      taskHubName: c.TASKHUB_NAME,
      auth: {
        tenantId: c.AUTH_TENANT_ID,
        clientId: c.AUTH_CLIENT_ID,
        discoveryUrl: c.AUTH_DISCOVERY_URL,
        clockSkewSeconds: c.AUTH_CLOCK_SKEW_SECONDS,
      },
      logLevel: c.LOG_LEVEL,
      noopRateLimitPerMinute: c.NOOP_RATE_LIMIT_PER_MINUTE,
      healthDependencyTimeoutMs: c.HEALTH_DEPENDENCY_TIMEOUT_MS,
      jobApiUrl: c.JOBAPI_URL?.replace(/\/+$/, ""),
      secretsDir: c.SECRETS_DIR,
      keyVaultUrl: c.KEY_VAULT_URL,
      apiTokenGraceSeconds: c.API_TOKEN_GRACE_SECONDS,
      jobPollIntervalSeconds: c.JOB_POLL_INTERVAL_SECONDS,
      jobApiTimeoutMs: c.JOBAPI_TIMEOUT_MS,
      jobApiIdleTimeoutMs: c.JOBAPI_IDLE_TIMEOUT_MS,
      databasesDir: c.DATABASES_DIR,
      databaseSourceUrl: c.DATABASE_SOURCE_URL,
      databasePartitions: c.DATABASE_PARTITIONS,
      databaseUploadMaxBytes: c.DATABASE_UPLOAD_MAX_BYTES,
      dbUpdateCheckSchedule: c.SVC_DB_UPDATE_CHECK_SCHEDULE,
      dbUploadSweepSchedule: c.SVC_DB_UPLOAD_SWEEP_SCHEDULE,
      narrator,
      cluster: {
        armEndpoint: c.ARM_ENDPOINT?.replace(/\/+$/, ""),
        armCaFile: c.ARM_CA_FILE,
        systemVmSize: c.CLUSTER_SYSTEM_VM_SIZE,
        identityId: c.CLUSTER_IDENTITY_ID,
        workloadPrincipalId: c.WORKLOAD_IDENTITY_PRINCIPAL_ID,
      },
      imageBuild: {
        contextDir: c.IMAGE_BUILD_CONTEXT_DIR,
        pollSeconds: c.IMAGE_BUILD_POLL_SECONDS,
        timeoutSeconds: c.IMAGE_BUILD_TIMEOUT_SECONDS,
      },
      jobApiDeploy: {
        workloadIdentityClientId: c.JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID,
        appSubnetCidr: c.JOBAPI_APP_SUBNET_CIDR,
        registryLoginServer: c.JOBAPI_REGISTRY_LOGIN_SERVER,
        rolloutTimeoutSeconds: c.JOBAPI_ROLLOUT_TIMEOUT_SECONDS,
        keyVaultUrl: c.JOBAPI_DEPLOY_KEY_VAULT_URL ?? c.KEY_VAULT_URL,
        terminalIngress:
          c.JOBAPI_TERMINAL_HOST && c.JOBAPI_TERMINAL_TLS_CERT_URI
            ? { host: c.JOBAPI_TERMINAL_HOST, tlsCertificateUri: c.JOBAPI_TERMINAL_TLS_CERT_URI }
            : undefined,
      },
    });
  });
}
