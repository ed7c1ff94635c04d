import { z } from "zod";
import { type Env, envInt, envParsed, parseEnv } from "../config/env.js";
import { parseNcrontab } from "../config/ncrontab.js";
import { type ActionSettings, actionSettings, actionSettingsShape } from "../ops/actions/action-settings.js";
import type { LoadPolicy } from "./approvals/load-policy.js";
import { BREAK_GLASS_MAX_TTL_SECONDS } from "./break-glass/break-glass.js";

/** Object ids, comma-separated. */
const oidList = z
  .string()
  .transform((s) => s.split(",").map((x) => x.trim()).filter(Boolean))
  .pipe(z.array(z.string().regex(/^[A-Za-z0-9._-]{1,200}$/, "object ids are letters, digits, '.', '_' or '-'")).max(100));

const consoleEnvSchema = z
  .object({
  /** Object ids of the approvers A1 requests go to. */
  SVC_CONSOLE_APPROVERS: oidList.default([]),
  /** Object ids of every Owner break-glass pages; none configured means every activation is denied. */
  SVC_BREAK_GLASS_OWNERS: oidList.default([]),
  /** Above 14,400 refuses to load (spec §2.3). */
  SVC_BREAK_GLASS_MAX_TTL_SECONDS: envInt(60, BREAK_GLASS_MAX_TTL_SECONDS).default(BREAK_GLASS_MAX_TTL_SECONDS),
  SVC_APPROVAL_TTL_SECONDS: envInt(5, 7 * 86_400).default(86_400),
  /** Seconds before expiry at which reminders go out. */
  SVC_APPROVAL_REMINDER_OFFSETS_SECONDS: z
    .string()
    .transform((s) => s.split(",").map((x) => Number(x.trim())))
    .pipe(z.array(z.number().int().min(1)).max(5))
    .default([3600, 600]),
  /** Non-critical A1 requests go out together at multiples of this interval; 0 sends them at once. */
  SVC_APPROVAL_GROUP_INTERVAL_SECONDS: envInt(0, 86_400).default(0),
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
  SVC_SERVER_TIME_ZONE: z
    .string()
    .refine((tz) => {
      try {
        new Intl.DateTimeFormat("en", { timeZone: tz });
        return true;
      } catch {
        return false;
      }
    }, "is not a known time zone")
    .default("UTC"),
  /** The one Log Analytics workspace `query_log` reads; unset, `query_log` answers unavailable. */
  SVC_LOG_ANALYTICS_WORKSPACE_ID: z.string().regex(/^[0-9a-f-]{36}$/i, "must be a workspace id (a GUID)").optional(),
  /** The server-configured subscription: `query_subscription_scope` and, through Resource Graph, `query_inventory`; unset, the local inventory is used. */
  SVC_SUBSCRIPTION_ID: z.string().regex(/^[0-9a-f-]{36}$/i, "must be a subscription id (a GUID)").optional(),
  /** The regional Azure Monitor metrics endpoint (`https://<region>.metrics.monitor.azure.com`) `query_metric` reads. */
  SVC_METRICS_ENDPOINT: z.url({ protocol: /^https$/ }).optional(),
  /** The one resource whose metrics `query_metric` reads (the cluster's resource id). */
  SVC_METRICS_RESOURCE_ID: z.string().regex(/^\/subscriptions\/[0-9a-f-]{36}\/resourceGroups\/[^/]+\/providers\/.+$/i, "must be an Azure resource id").optional(),
  /** Where the rule and action-type catalogs live (default `config/` of the app root). */
  SVC_CATALOG_DIR: z.string().min(1).optional(),
  ...actionSettingsShape,
  })
  .refine((c) => (c.SVC_METRICS_ENDPOINT === undefined) === (c.SVC_METRICS_RESOURCE_ID === undefined), {
    message: "set both or neither",
    path: ["SVC_METRICS_RESOURCE_ID"],
  })
  .refine((c) => (c.SVC_AKS_RESOURCE_GROUP === undefined) === (c.SVC_AKS_CLUSTER === undefined), { message: "set both or neither", path: ["SVC_AKS_CLUSTER"] })
  .refine((c) => c.SVC_AKS_CLUSTER === undefined || c.SVC_SUBSCRIPTION_ID !== undefined, { message: "needs SVC_SUBSCRIPTION_ID", path: ["SVC_AKS_CLUSTER"] });


/** Every setting the console reads (the Functions app's `local.settings.sample.json` lists them). */
export const CONSOLE_SETTING_NAMES: readonly string[] = Object.freeze(Object.keys(consoleEnvSchema.shape));

/** The console's validated settings. */
export interface ConsoleConfig {
  readonly approvers: readonly string[];
  readonly breakGlass: { readonly owners: readonly string[]; readonly max_ttl_seconds: number };
  readonly approvalTtlSeconds: number;
  readonly reminderOffsetsSeconds: readonly number[];
  readonly incidentWindowMs: number;
  readonly loadPolicy: LoadPolicy;
  readonly opsLoopSchedule: string;
  readonly serverTimeZone: string;
  readonly catalogDir: string | undefined;
  readonly logAnalyticsWorkspaceId: string | undefined;
  readonly subscriptionId: string | undefined;
  /** Both set or neither (refused at load otherwise). */
  readonly metrics: { readonly endpoint: string; readonly resourceId: string } | undefined;
  /** What the action executors act on (see `shared/ops/actions/action-settings.ts`). */
  readonly actions: ActionSettings;
}

/** Reads the console's `SVC_*` settings; a bad one stops start-up naming it. */
export function loadConsoleConfig(env: Env = process.env): ConsoleConfig {
  return parseEnv(consoleEnvSchema, env, (c) => ({
    approvers: c.SVC_CONSOLE_APPROVERS,
    breakGlass: { owners: c.SVC_BREAK_GLASS_OWNERS, max_ttl_seconds: c.SVC_BREAK_GLASS_MAX_TTL_SECONDS },
    approvalTtlSeconds: c.SVC_APPROVAL_TTL_SECONDS,
    reminderOffsetsSeconds: c.SVC_APPROVAL_REMINDER_OFFSETS_SECONDS,
    incidentWindowMs: c.SVC_INCIDENT_WINDOW_SECONDS * 1000,
    opsLoopSchedule: c.SVC_OPS_LOOP_SCHEDULE,
    loadPolicy: { groupIntervalSeconds: c.SVC_APPROVAL_GROUP_INTERVAL_SECONDS, ...(c.SVC_APPROVAL_QUIET_HOURS ? { quietHours: { ...c.SVC_APPROVAL_QUIET_HOURS, timeZone: c.SVC_SERVER_TIME_ZONE } } : {}) },
    serverTimeZone: c.SVC_SERVER_TIME_ZONE,
    catalogDir: c.SVC_CATALOG_DIR,
    logAnalyticsWorkspaceId: c.SVC_LOG_ANALYTICS_WORKSPACE_ID,
    subscriptionId: c.SVC_SUBSCRIPTION_ID,
    metrics: c.SVC_METRICS_ENDPOINT && c.SVC_METRICS_RESOURCE_ID ? { endpoint: c.SVC_METRICS_ENDPOINT, resourceId: c.SVC_METRICS_RESOURCE_ID } : undefined,
    actions: actionSettings(c),
  }));
}
