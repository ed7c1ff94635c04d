import { z } from "zod";
import { DEFAULT_REAUTH_MAX_AGE_SECONDS } from "../auth/fresh-authentication.js";
import { type Env, envInt, envParsed, parseEnv } from "../config/env.js";
import { parseNcrontab } from "../config/ncrontab.js";
import { catalogPath } from "../ops/actions/action-types.js";
import { type ActionSettings, actionSettings, actionSettingsShape } from "../ops/actions/action-settings.js";
import type { LoadPolicy } from "./approvals/load-policy.js";
import { loadLoadPolicyFile, timeZoneSchema } from "./approvals/load-policy-file.js";
import { BREAK_GLASS_MAX_TTL_SECONDS } from "./break-glass/break-glass.js";
import { RECURRENT_QUERY_DEFAULTS } from "./recurrent-query.js";

/** Object ids, comma-separated. */
const oidList = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  )
  .pipe(
    z.array(z.string().regex(/^[A-Za-z0-9._-]{1,200}$/, "object ids are letters, digits, '.', '_' or '-'")).max(100),
  );

/** The console's settings (environment names), read by {@link loadConsoleConfig} and the configuration reference. */
export const consoleSettingsSchema = z
  .object({
    /** Object ids of the approvers A1 requests go to. */
    SVC_CONSOLE_APPROVERS: oidList.default([]),
    /** Object ids of every Owner break-glass pages; none configured means every activation is denied. */
    SVC_BREAK_GLASS_OWNERS: oidList.default([]),
    /** Above 14,400 refuses to load (spec §2.3). */
    SVC_BREAK_GLASS_MAX_TTL_SECONDS: envInt(60, BREAK_GLASS_MAX_TTL_SECONDS).default(BREAK_GLASS_MAX_TTL_SECONDS),
    SVC_APPROVAL_TTL_SECONDS: envInt(5, 7 * 86_400).default(86_400),
    /** An approval decision through the API needs an interactive sign-in (the token's `auth_time`) at most this many seconds old. */
    SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS: envInt(30, 3600).default(DEFAULT_REAUTH_MAX_AGE_SECONDS),
    /** The approval-load policy file (default `config/approval-load.yaml` of the catalog directory); the three settings below override it. */
    SVC_APPROVAL_LOAD_POLICY: z.string().min(1).optional(),
    /** Seconds before expiry at which reminders go out (unset: the load policy's). */
    SVC_APPROVAL_REMINDER_OFFSETS_SECONDS: z
      .string()
      .transform((s) => s.split(",").map((x) => Number(x.trim())))
      .pipe(z.array(z.number().int().min(1)).max(5))
      .optional(),
    /** Non-critical A1 requests go out together at multiples of this interval; 0 sends them at once (unset: the load policy's). */
    SVC_APPROVAL_GROUP_INTERVAL_SECONDS: envInt(0, 86_400).optional(),
    /** Quiet hours in the server time zone, `HH:MM-HH:MM`; non-critical requests wait for their end. */
    SVC_APPROVAL_QUIET_HOURS: z
      .string()
      .regex(/^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$/, "must look like 22:00-07:00")
      .transform((s) => {
        const [a, b] = s.split("-").map((t) => t.split(":").map(Number));
        return { startMinute: (a?.[0] ?? 0) * 60 + (a?.[1] ?? 0), endMinute: (b?.[0] ?? 0) * 60 + (b?.[1] ?? 0) };
      })
      .optional(),
    /** How often the operations core processes new events (six-field NCRONTAB). */
    SVC_OPS_LOOP_SCHEDULE: envParsed((text) => parseNcrontab(text).expression).default("0 */1 * * * *"),
    SVC_INCIDENT_WINDOW_SECONDS: envInt(60, 86_400).default(1800),
    /** The time zone of the inventory's reference time (scheduled shutdowns). */
    SVC_SERVER_TIME_ZONE: timeZoneSchema.default("UTC"),
    /** The one Log Analytics workspace `query_log` reads; unset, `query_log` answers unavailable. */
    SVC_LOG_ANALYTICS_WORKSPACE_ID: z
      .string()
      .regex(/^[0-9a-f-]{36}$/i, "must be a workspace id (a GUID)")
      .optional(),
    /** The server-configured subscription: `query_subscription_scope` and, through Resource Graph, `query_inventory`; unset, the local inventory is used. */
    SVC_SUBSCRIPTION_ID: z
      .string()
      .regex(/^[0-9a-f-]{36}$/i, "must be a subscription id (a GUID)")
      .optional(),
    /** The regional Azure Monitor metrics endpoint (`https://<region>.metrics.monitor.azure.com`) `query_metric` reads. */
    SVC_METRICS_ENDPOINT: z.url({ protocol: /^https$/ }).optional(),
    /** The one resource whose metrics `query_metric` reads (the cluster's resource id). */
    SVC_METRICS_RESOURCE_ID: z
      .string()
      .regex(/^\/subscriptions\/[0-9a-f-]{36}\/resourceGroups\/[^/]+\/providers\/.+$/i, "must be an Azure resource id")
      .optional(),
    /** The Chromium `capture_browser_evidence` launches (Debian's is `/usr/bin/chromium`); unset, the tool answers unavailable. */
    SVC_BROWSER_EVIDENCE_CHROMIUM: z
      .string()
      .regex(/^\/[\w./+-]{1,500}$/, "must be an absolute path to a Chromium executable")
      .optional(),
    /** The Git repository `query_deployments` reads deployment commits and release tags from (an absolute path); unset, that history is a reported gap. */
    SVC_DEPLOYMENTS_GIT_DIR: z
      .string()
      .regex(/^\/[\w./+-]{0,500}$/, "must be an absolute path to a Git repository")
      .optional(),
    /** The resource group whose ARM deployments `query_deployments` reads (with SVC_SUBSCRIPTION_ID). */
    SVC_DEPLOYMENTS_RESOURCE_GROUP: z
      .string()
      .regex(/^[-\w._()]{1,90}$/, "must be a resource group name")
      .optional(),
    /** Where the rule and action-type catalogs live (default `config/` of the app root). */
    SVC_CATALOG_DIR: z.string().min(1).optional(),
    /** Resource groups `query_subscription_health` and resource-health history read, comma-separated; unset, the whole subscription. */
    SVC_HEALTH_RESOURCE_GROUPS: z
      .string()
      .transform((s) =>
        s
          .split(",")
          .map((x) => x.trim())
          .filter(Boolean),
      )
      .pipe(
        z
          .array(
            z
              .string()
              .regex(/^[-\w._()]{1,90}$/, "resource group names are letters, digits, '-', '_', '.', '(' or ')'"),
          )
          .max(20),
      )
      .default([]),
    /** The BLAST agent pool of the AKS cluster (SVC_AKS_RESOURCE_GROUP, SVC_AKS_CLUSTER) whose readiness the snapshots observe. */
    SVC_AKS_NODE_POOL: z
      .string()
      .regex(/^[a-z][a-z0-9]{0,11}$/, "must be an agent pool name")
      .default("blast"),
    /** Distinct principals invoking one tool-argument shape within the window that publish `console.recurrent_query` (spec §8: 5). */
    SVC_RECURRENT_QUERY_THRESHOLD: envInt(2, 10_000).default(RECURRENT_QUERY_DEFAULTS.threshold),
    /** The rolling window of `console.recurrent_query` (spec §8: a week). */
    SVC_RECURRENT_QUERY_WINDOW_SECONDS: envInt(60, 366 * 86_400).default(RECURRENT_QUERY_DEFAULTS.windowSeconds),
    /** A snapshot older than this is stale: its tool answers unavailable (keep it above the loop's period). */
    SVC_SNAPSHOT_MAX_AGE_SECONDS: envInt(60, 7 * 86_400).default(900),
    ...actionSettingsShape,
  })
  .refine((c) => (c.SVC_METRICS_ENDPOINT === undefined) === (c.SVC_METRICS_RESOURCE_ID === undefined), {
    message: "set both or neither",
    path: ["SVC_METRICS_RESOURCE_ID"],
  })
  .refine((c) => c.SVC_DEPLOYMENTS_RESOURCE_GROUP === undefined || c.SVC_SUBSCRIPTION_ID !== undefined, {
    message: "needs SVC_SUBSCRIPTION_ID",
    path: ["SVC_DEPLOYMENTS_RESOURCE_GROUP"],
  })
  .refine((c) => (c.SVC_AKS_RESOURCE_GROUP === undefined) === (c.SVC_AKS_CLUSTER === undefined), {
    message: "set both or neither",
    path: ["SVC_AKS_CLUSTER"],
  })
  .refine((c) => c.SVC_AKS_CLUSTER === undefined || c.SVC_SUBSCRIPTION_ID !== undefined, {
    message: "needs SVC_SUBSCRIPTION_ID",
    path: ["SVC_AKS_CLUSTER"],
  });

/** Every setting the console reads (the Functions app's `local.settings.sample.json` lists them). */
export const CONSOLE_SETTING_NAMES: readonly string[] = Object.freeze(Object.keys(consoleSettingsSchema.shape));

/** The console's validated settings. */
export interface ConsoleConfig {
  readonly approvers: readonly string[];
  readonly breakGlass: { readonly owners: readonly string[]; readonly max_ttl_seconds: number };
  readonly approvalTtlSeconds: number;
  /** How recent the interactive sign-in of an API approval decision must be. */
  readonly approvalReauthMaxAgeSeconds: number;
  readonly reminderOffsetsSeconds: readonly number[];
  readonly incidentWindowMs: number;
  readonly loadPolicy: LoadPolicy;
  readonly opsLoopSchedule: string;
  readonly serverTimeZone: string;
  readonly catalogDir: string | undefined;
  readonly logAnalyticsWorkspaceId: string | undefined;
  readonly subscriptionId: string | undefined;
  readonly browserEvidenceChromium: string | undefined;
  readonly deploymentsGitDir: string | undefined;
  /** Only with `subscriptionId` (refused at load otherwise). */
  readonly deploymentsResourceGroup: string | undefined;
  /** Both set or neither (refused at load otherwise). */
  readonly metrics: { readonly endpoint: string; readonly resourceId: string } | undefined;
  /** The resource groups subscription health reads; empty means the whole subscription. */
  readonly healthResourceGroups: readonly string[];
  /** What the readiness and configuration snapshots observe; unset parts are coverage gaps. */
  readonly snapshots: {
    readonly aksClusterId: string | undefined;
    readonly aksNodePool: string;
    readonly kubeconfig: string | undefined;
    readonly maxAgeMs: number;
  };
  readonly recurrentQuery: { readonly threshold: number; readonly windowSeconds: number };
  /** What the action executors act on (see `shared/ops/actions/action-settings.ts`). */
  readonly actions: ActionSettings;
}

/**
 * Reads the console's `SVC_*` settings and the approval-load policy file; a bad setting stops
 * start-up naming it, a bad policy file naming its file and line. A set `SVC_APPROVAL_*` setting
 * wins over the file's entry (README, Decisions). `shippedCatalogDir` is where the app's own catalogs
 * are when `SVC_CATALOG_DIR` is unset.
 */
export function loadConsoleConfig(env: Env = process.env, shippedCatalogDir?: string): ConsoleConfig {
  return parseEnv(consoleSettingsSchema, env, (c) => {
    const file = loadLoadPolicyFile(
      catalogPath("approval-load.yaml", c.SVC_CATALOG_DIR ?? shippedCatalogDir),
      c.SVC_APPROVAL_LOAD_POLICY,
    );
    const quiet =
      c.SVC_APPROVAL_QUIET_HOURS ??
      (file.quiet_hours ? { startMinute: file.quiet_hours.start, endMinute: file.quiet_hours.end } : undefined);
    const loadPolicy: LoadPolicy = {
      groupIntervalSeconds: c.SVC_APPROVAL_GROUP_INTERVAL_SECONDS ?? file.group_interval_seconds,
      ...(quiet ? { quietHours: { ...quiet, timeZone: file.time_zone ?? c.SVC_SERVER_TIME_ZONE } } : {}),
      criticalSeverities: file.critical_severities,
      fatigue: { maxListedMembers: file.fatigue.max_listed_members },
    };
    return {
      approvers: c.SVC_CONSOLE_APPROVERS,
      breakGlass: { owners: c.SVC_BREAK_GLASS_OWNERS, max_ttl_seconds: c.SVC_BREAK_GLASS_MAX_TTL_SECONDS },
      approvalTtlSeconds: c.SVC_APPROVAL_TTL_SECONDS,
      approvalReauthMaxAgeSeconds: c.SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS,
      reminderOffsetsSeconds: c.SVC_APPROVAL_REMINDER_OFFSETS_SECONDS ?? file.reminder_offsets_seconds,
      incidentWindowMs: c.SVC_INCIDENT_WINDOW_SECONDS * 1000,
      opsLoopSchedule: c.SVC_OPS_LOOP_SCHEDULE,
      loadPolicy,
      serverTimeZone: c.SVC_SERVER_TIME_ZONE,
      catalogDir: c.SVC_CATALOG_DIR,
      logAnalyticsWorkspaceId: c.SVC_LOG_ANALYTICS_WORKSPACE_ID,
      subscriptionId: c.SVC_SUBSCRIPTION_ID,
      metrics:
        c.SVC_METRICS_ENDPOINT && c.SVC_METRICS_RESOURCE_ID
          ? { endpoint: c.SVC_METRICS_ENDPOINT, resourceId: c.SVC_METRICS_RESOURCE_ID }
          : undefined,
      browserEvidenceChromium: c.SVC_BROWSER_EVIDENCE_CHROMIUM,
      deploymentsGitDir: c.SVC_DEPLOYMENTS_GIT_DIR,
      deploymentsResourceGroup: c.SVC_DEPLOYMENTS_RESOURCE_GROUP,
      healthResourceGroups: c.SVC_HEALTH_RESOURCE_GROUPS,
      recurrentQuery: {
        threshold: c.SVC_RECURRENT_QUERY_THRESHOLD,
        windowSeconds: c.SVC_RECURRENT_QUERY_WINDOW_SECONDS,
      },
      actions: actionSettings(c),
      snapshots: {
        aksClusterId:
          c.SVC_SUBSCRIPTION_ID && c.SVC_AKS_RESOURCE_GROUP && c.SVC_AKS_CLUSTER
            ? `/subscriptions/${c.SVC_SUBSCRIPTION_ID}/resourceGroups/${c.SVC_AKS_RESOURCE_GROUP}/providers/Microsoft.ContainerService/managedClusters/${c.SVC_AKS_CLUSTER}`
            : undefined,
        aksNodePool: c.SVC_AKS_NODE_POOL,
        kubeconfig: c.SVC_KUBECONFIG,
        maxAgeMs: c.SVC_SNAPSHOT_MAX_AGE_SECONDS * 1000,
      },
    };
  });
}
