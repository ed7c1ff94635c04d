import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { parseYamlCatalog } from "../../config/yaml-catalog.js";
import { CatalogLoadError } from "../../ops/catalog/json-catalog.js";
import { SEVERITIES } from "../../ops/rules/rule-catalog.js";

/** An IANA time zone this runtime knows. */
export const timeZoneSchema = z.string().refine((tz) => {
  try {
    new Intl.DateTimeFormat("en", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}, "is not a known time zone");

const clockTime = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d$/, "must look like 22:00")
  .transform((t) => {
    const [h, m] = t.split(":").map(Number);
    return (h ?? 0) * 60 + (m ?? 0);
  });

/** `config/approval-load.yaml` (spec §2.6 `SVC_APPROVAL_LOAD_POLICY`, §3 approval load rules). */
const loadPolicyFileSchema = z.strictObject({
  version: z.literal(1),
  /** Non-critical requests filed inside these hours wait for their end (local time of `time_zone`). */
  quiet_hours: z.strictObject({ start: clockTime, end: clockTime }).optional(),
  /** The quiet hours' time zone; unset, the server time zone (`SVC_SERVER_TIME_ZONE`). */
  time_zone: timeZoneSchema.optional(),
  /** Non-critical requests go out together, in one digest, at multiples of this interval; 0 sends each at once. */
  group_interval_seconds: z.number().int().min(0).max(86_400).default(0),
  /** Seconds before the original expiry at which reminders go out, at most five. */
  reminder_offsets_seconds: z.array(z.number().int().min(1)).max(5).default([3600, 600]),
  /** Severities that are sent at once, bypassing quiet hours and grouping. */
  critical_severities: z.array(z.enum(SEVERITIES)).min(1).default(["critical"]),
  /** Fatigue caps: only how a group's digest reads changes, never parking or a decision. */
  fatigue: z
    .strictObject({ max_listed_members: z.number().int().min(1).max(1000) })
    .default({ max_listed_members: 20 }),
});

export type LoadPolicyFile = z.output<typeof loadPolicyFileSchema>;

/** The policy when no file is configured and the default file is absent (the shipped file says the same). */
export const DEFAULT_LOAD_POLICY_FILE: LoadPolicyFile = loadPolicyFileSchema.parse({ version: 1 });

/**
 * Parses and validates the approval-load policy YAML. A YAML error or a field failing its rule is
 * a {@link CatalogLoadError} naming the file and line, so a bad policy stops start-up.
 */
export function parseLoadPolicyFile(file: string, text: string): LoadPolicyFile {
  return parseYamlCatalog(file, text, loadPolicyFileSchema);
}

/**
 * Reads the approval-load policy: `explicitPath` (`SVC_APPROVAL_LOAD_POLICY`) must exist; the
 * default file may be absent (then {@link DEFAULT_LOAD_POLICY_FILE}).
 */
export function loadLoadPolicyFile(defaultPath: string, explicitPath?: string): LoadPolicyFile {
  const file = explicitPath ?? defaultPath;
  if (!explicitPath && !existsSync(file)) return DEFAULT_LOAD_POLICY_FILE;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new CatalogLoadError(file, 1, `cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseLoadPolicyFile(file, text);
}
